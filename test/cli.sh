#!/bin/sh
# cli.sh - the tapc command line contract (docs/usage.md).
#
# Option spellings (-opt, --opt, -opt=v, -opt v, @file), exit statuses,
# usage errors, -help, the pass-manager options and that a failed run
# leaves no output file behind.
. "$srcdir/test/lib.sh"
cd "$srcdir"
mlp=test/e2e/mlp/model.onnx
gpt=test/e2e/gpt/model.onnx

# expect STATUS NAME CMD...: the command exits with STATUS
expect() {
	want=$1 name=$2; shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" = "$want" ]; then pass "$name"; else fail "$name (exit $got, want $want)"; head -3 "$tmp/err"; fi
}
has() { grep -q -- "$2" "$1"; }
# same_ir A B: two IR files written with -o are the same graph: the same
# text but for the name of the data file in the header, and the same data
# file bytes (or neither has one)
same_ir() {
	sed '1s/ data="[^"]*"$//' "$1" >"$tmp/same.a" && sed '1s/ data="[^"]*"$//' "$2" >"$tmp/same.b" &&
	    cmp -s "$tmp/same.a" "$tmp/same.b" || return 1
	[ -e "$1.weights" ] || { [ ! -e "$2.weights" ]; return; }
	cmp -s "$1.weights" "$2.weights"
}

expect 0 "-help exits 0" "$TAPC" -help
check "-help lists the passes" has "$tmp/out" "fold-constants"
check "-help hides LLVM's generic options" sh -c "! grep -q -- '-print-all-options' '$tmp/out'"
expect 0 "-version" "$TAPC" -version
check "-version names tapc" has "$tmp/out" "tapc"
expect 0 "-list-passes" "$TAPC" -list-passes
check "-list-passes lists verify" has "$tmp/out" "^verify "

expect 1 "no input is a usage error" "$TAPC"
check "no input: message" has "$tmp/err" "no input file"
expect 1 "unknown option" "$TAPC" -frobnicate $mlp
expect 1 "unknown pass" "$TAPC" $mlp -passes=verify,no-such-pass
check "unknown pass: message" has "$tmp/err" "unknown pass 'no-such-pass'"
expect 1 "unknown pass in -print-after" "$TAPC" $mlp -print-after=nope
expect 1 "bad mesh" "$TAPC" $mlp -mesh 2y3
check "bad mesh: message" has "$tmp/err" "expected ROWSxCOLS"
expect 1 "zero mesh" "$TAPC" $mlp -mesh=0x4
expect 1 "-emit=c needs -o" "$TAPC" $mlp -emit=c
check "-emit=c needs -o: message" has "$tmp/err" "give it with -o DIR"
expect 1 "unknown -emit" "$TAPC" $mlp -emit=asm
expect 1 "missing file" "$TAPC" test/nonexistent.onnx -emit=ir
check "missing file: one line naming it" sh -c "[ \$(wc -l < '$tmp/err') = 1 ] && grep -q 'nonexistent.onnx: cannot open' '$tmp/err'"

for form in "-mesh 2x2" "-mesh=2x2" "--mesh 2x2" "--mesh=2x2" "-mesh 2X2"; do
	expect 0 "option form $form" "$TAPC" $mlp $form -emit=ir
done
printf -- '-mesh 1x2\n-emit=ir\n' >"$tmp/args.rsp"
expect 0 "@file response file" "$TAPC" "@$tmp/args.rsp" $mlp
printf -- '-frobnicate\n' >"$tmp/bad.rsp"
expect 1 "@file with a bad option" "$TAPC" "@$tmp/bad.rsp" $mlp

# tensor parallelism: -tp, -cost, the plan in the IR dump and plan.json
expect 0 "-tp=2 alone is a 1x2 mesh" "$TAPC" $gpt -tp=2 -emit=ir
check "-tp=2: the header" has "$tmp/out" "mesh=1x2 dp=1 tp=2 pp=1"
check "-tp=2: collectives in the IR" has "$tmp/out" "= AllReduce "
check "-tp=2: sliced weights" has "$tmp/out" "slice=1/2 blocks=3"
expect 1 "-tp must divide the devices" "$TAPC" $gpt -mesh 1x4 -tp=3 -emit=ir
check "-tp mismatch: message" has "$tmp/err" "degrees must multiply to that"
check "-tp mismatch: names only the degrees given" has "$tmp/err" "^[^ ]*: *error: -tp=3: the cluster"
expect 0 "-tp=2 on 1x4: the rule places the rest" "$TAPC" $gpt -mesh 1x4 -tp=2 -emit=ir
check "... batch 1: pipeline stages" has "$tmp/out" "mesh=1x4 dp=1 tp=2 pp=2"
expect 0 "-tp=2 on 1x4 at batch 4" "$TAPC" $gpt -mesh 1x4 -tp=2 -batch=4 -emit=ir
check "... replicas, each at half the batch" has "$tmp/out" "mesh=1x4 dp=2 tp=2 pp=1"
check "... shapes are a replica's" has "$tmp/out" 'f32\[2,16,128\]'
expect 1 "-tp negative" "$TAPC" $gpt -tp=-1 -emit=ir
expect 1 "-cost unknown key" "$TAPC" $gpt -cost=speed=3 -emit=ir
check "-cost: message names the item" has "$tmp/err" "'speed=3'"
expect 1 "-cost bad value" "$TAPC" $gpt -cost=flops=-1 -emit=ir
expect 1 "-cost bad objective" "$TAPC" $gpt -cost=objective=fast -emit=ir
expect 0 "-cost accepted" "$TAPC" $gpt -mesh 1x2 -cost=flops=1e14,bw_intra=3e11,latency=1e-5,objective=infer -emit=plan
check "-cost: plan.json shows the constants" has "$tmp/out" '"flops": 1e+14'
check "-cost: plan.json objective" has "$tmp/out" '"objective": "infer"'
# a -mesh's default mem_bw charges each micro-batch its stage's weights: the
# MLP at batch 32 on -pp=2 then takes 2 micro-batches (0.036-0.039 ms a
# batch, measured) and not AMP's FLOPs-only choice, 32 of one row (0.070-0.073)
expect 0 "-pp=2 at batch 32, default costs" "$TAPC" $mlp -batch=32 -mesh 1x2 -pp=2 -emit=plan
check "... 2 micro-batches" has "$tmp/out" '"microbatches": 2,'
expect 0 "... with -cost=mem_bw=0 (AMP's model)" "$TAPC" $mlp -batch=32 -mesh 1x2 -pp=2 -cost=mem_bw=0 -emit=plan
check "... 32 micro-batches" has "$tmp/out" '"microbatches": 32,'
# -cluster=FILE: JSON (docs/planner.md)
cat >"$tmp/cluster.json" <<'EOF'
{"latency": 1e-5,
 "nodes": [
   {"name": "a100x4", "count": 1, "devices": 4, "flops": 1.56e14, "memory": 4.0e10,
    "intra_bw": 3.0e11, "inter_bw": 1.25e9},
   {"name": "k80x1", "count": 2, "devices": 1, "flops": 4.37e12, "memory": 1.2e10,
    "inter_bw": 7.5e9}]}
EOF
expect 0 "-cluster=FILE" "$TAPC" $gpt -cluster="$tmp/cluster.json" -batch=6 -emit=plan
check "-cluster: six devices, six ranks" has "$tmp/out" '"rank": 5,'
check "-cluster: plan.json lists the nodes" has "$tmp/out" '"name": "k80x1", "count": 2, "devices": 1'
check "-cluster: each rank's device" has "$tmp/out" '"device": 5'
check "-cluster: the search" has "$tmp/out" '"search": {"method": "exhaustive"'
expect 1 "-cluster and -mesh both" "$TAPC" $gpt -mesh 1x2 -cluster="$tmp/cluster.json" -emit=ir
check "... message" has "$tmp/err" "give one"
expect 1 "-cluster with -cost=flops" "$TAPC" $gpt -cluster="$tmp/cluster.json" -cost=flops=1 -emit=ir
check "... message" has "$tmp/err" "only objective= applies"
expect 0 "-cluster with -cost=objective=infer" "$TAPC" $gpt -cluster="$tmp/cluster.json" -cost=objective=infer -emit=plan
# bad files: one line naming the key and the problem
badcluster() { # NAME JSON WANT
	printf '%s\n' "$2" >"$tmp/bad.json"
	expect 1 "-cluster: $1" "$TAPC" $gpt -cluster="$tmp/bad.json" -emit=ir
	check "... says '$3'" has "$tmp/err" "bad.json: $3"
	check "... one line" sh -c "[ \$(wc -l < '$tmp/err') = 1 ]"
}
badcluster "not JSON" '{"nodes": [' "line 2: "
badcluster "no nodes" '{"latency": 1e-5}' "nodes: missing"
badcluster "nodes not an array" '{"nodes": 3}' "nodes: wrong type: expected an array"
badcluster "no devices" '{"nodes": [{"flops": 1e12, "memory": 1e9}]}' "nodes\[0\].devices: missing"
badcluster "flops a string" '{"nodes": [{"devices": 1, "flops": "fast", "memory": 1e9}]}' "nodes\[0\].flops: wrong type: expected a number"
badcluster "memory zero" '{"nodes": [{"devices": 1, "flops": 1e12, "memory": 0}]}' "nodes\[0\].memory: not positive"
badcluster "negative latency" '{"latency": -1, "nodes": [{"devices": 1, "flops": 1e12, "memory": 1e9}]}' "latency: negative"
badcluster "a typo" '{"nodes": [{"devices": 1, "flops": 1e12, "memory": 1e9, "fl0ps": 2}]}' "nodes\[0\].fl0ps: unknown key"
badcluster "devices fractional" '{"nodes": [{"devices": 1.5, "flops": 1e12, "memory": 1e9}]}' "nodes\[0\].devices: wrong type: expected a whole number"
badcluster "no intra_bw for 2 devices" '{"nodes": [{"devices": 2, "flops": 1e12, "memory": 1e9}]}' "nodes\[0\].intra_bw: missing"
badcluster "no inter_bw between nodes" '{"nodes": [{"count": 2, "devices": 1, "flops": 1e12, "memory": 1e9}]}' "nodes\[0\].inter_bw: missing"
badcluster "duplicate key" '{"nodes": [], "nodes": []}' "line 1: duplicate object key"
badcluster "too many devices" '{"nodes": [{"count": 65536, "devices": 2, "flops": 1e12, "memory": 1e9, "intra_bw": 1, "inter_bw": 1}]}' "nodes: more than 65536 devices"
expect 1 "-cluster: a missing file" "$TAPC" $gpt -cluster="$tmp/nonexistent" -emit=ir
expect 1 "-cost=memory too small" "$TAPC" $gpt -mesh 1x2 -cost=memory=1000 -emit=ir
check "memory: message" has "$tmp/err" "bytes per device"
expect 0 "-print-after=tp-plan" "$TAPC" $gpt -mesh 1x4 -print-after=tp-plan -emit=ir -o /dev/null
check "tp-plan dump: patterns" has "$tmp/err" "tp=S1/3 "
check "tp-plan dump: collectives" has "$tmp/err" "comm=allreduce:1"
"$TAPC" $gpt -mesh 1x2 -stop-after=tp-plan -emit=ir -o "$tmp/planned.ir" 2>/dev/null
expect 0 "a tp-plan dump reads back and rewrites" "$TAPC" "$tmp/planned.ir" -passes=tp-rewrite,verify -emit=ir -o "$tmp/rewritten.ir"
"$TAPC" $gpt -mesh 1x2 -O0 -emit=ir -o "$tmp/direct.ir" 2>/dev/null
check "... the same graph as one run" same_ir "$tmp/rewritten.ir" "$tmp/direct.ir"
expect 0 "a rewritten dump reads back unchanged" "$TAPC" "$tmp/direct.ir" -passes=verify -emit=ir -o "$tmp/again.ir"
check "... byte for byte" same_ir "$tmp/again.ir" "$tmp/direct.ir"
expect 1 "tp-plan refuses a rewritten graph" "$TAPC" "$tmp/direct.ir" -mesh 1x2 -emit=ir
check "... message" has "$tmp/err" "already one rank's"

# pipeline planning: -pp, -microbatches, -emit=schedule
expect 0 "-pp=2 alone is a 1x2 mesh" "$TAPC" $gpt -pp=2 -batch=8 -emit=ir
check "-pp=2: the header" has "$tmp/out" "mesh=1x2 dp=1 tp=1 pp=2"
check "-pp=2: subgraphs and stages" has "$tmp/out" " sg=4 stage=1 "
cp "$tmp/out" "$tmp/pp.ir"
expect 0 "a staged dump reads back" "$TAPC" "$tmp/pp.ir" -passes=verify -emit=ir -o -
check "... byte for byte" cmp -s "$tmp/pp.ir" "$tmp/out"
expect 0 "-tp=2 -pp=2 on 1x4" "$TAPC" $gpt -mesh 1x4 -tp=2 -pp=2 -batch=8 -emit=plan
check "plan.json: the stage table" has "$tmp/out" '"stage_table"'
check "plan.json: the even split baseline" has "$tmp/out" '"megatron_even_split"'
expect 1 "-tp x -pp must cover the mesh" "$TAPC" $gpt -mesh 1x4 -tp=2 -pp=3 -emit=ir
expect 1 "-microbatches must divide the batch" "$TAPC" $gpt -pp=2 -batch=6 -microbatches=4 -emit=ir
check "... message" has "$tmp/err" "does not divide a replica's batch 6"
expect 0 "-microbatches=4: shapes are a micro-batch's" "$TAPC" $gpt -pp=2 -batch=8 -microbatches=4 -emit=ir
check "... the header" has "$tmp/out" "mesh=1x2 dp=1 tp=1 pp=2 microbatches=4"
check "... the logits" has "$tmp/out" 'f32\[2,16,128\]'
cp "$tmp/out" "$tmp/mb.ir"
expect 0 "... the dump reads back" "$TAPC" "$tmp/mb.ir" -passes=verify -emit=ir -o -
check "... byte for byte" cmp -s "$tmp/mb.ir" "$tmp/out"

# data parallelism and the planner's search (docs/planner.md)
expect 0 "-dp=2 alone is a 1x2 mesh" "$TAPC" $gpt -dp=2 -batch=4 -emit=ir
check "-dp=2: the header" has "$tmp/out" "mesh=1x2 dp=2 tp=1 pp=1"
check "-dp=2: a replica's shapes" has "$tmp/out" 'f32\[2,16,128\]'
expect 1 "-dp must divide the batch" "$TAPC" $gpt -dp=2 -emit=ir
check "... message" has "$tmp/err" "-dp=2 does not divide the batch 1"
expect 1 "-dp -tp -pp must multiply to the mesh" "$TAPC" $gpt -mesh 2x4 -dp=2 -tp=2 -pp=1 -emit=ir
expect 1 "-dp negative" "$TAPC" $gpt -dp=-2 -emit=ir
expect 1 "no room for the devices" "$TAPC" $mlp -mesh 1x8 -tp=2 -pp=2 -emit=ir
check "... message" has "$tmp/err" "does not split into 2 data-parallel replicas"
expect 0 "the search on 2x8" "$TAPC" $gpt -mesh 2x8 -batch=4 -emit=plan
check "... plan.json says how it chose" has "$tmp/out" "\"rule\": \"mesh-map, exhaustive search of [0-9]* candidates: dp [0-9]*, tp"
check "... 16 ranks" has "$tmp/out" '"rank": 15, "dp": [0-9]*, "tp": [0-9]*, "stage": [0-9]*, "device": [0-9]*'
check "... the search record" has "$tmp/out" '"candidates_total": [0-9]*, "candidates_evaluated": [0-9]*'
check "... Megatron's rule as the baseline" has "$tmp/out" '"megatron": {"dp": '
check "... the ten best" sh -c "[ \$(grep -c '^      {\"dp\": ' '$tmp/out') = 10 ]"
expect 0 "-emit=search" "$TAPC" $gpt -mesh 2x8 -batch=4 -emit=search
check "... a table with the chosen plan first" has "$tmp/out" "^#1 "
check "... and Megatron's" has "$tmp/out" "^Megatron "
expect 0 "-search=anneal -seed=7" "$TAPC" $gpt -mesh 2x8 -batch=4 -search=anneal -seed=7 -emit=plan
check "... annealing" has "$tmp/out" '"method": "simulated annealing"'
check "... its seed" has "$tmp/out" '"seed": 7'
cp "$tmp/out" "$tmp/sa1.json"
"$TAPC" $gpt -mesh 2x8 -batch=4 -search=anneal -seed=7 -emit=plan >"$tmp/sa2.json"
samesearch='import json, sys
a, b = (json.load(open(f))["search"] for f in sys.argv[1:3])
sys.exit(not (a["chosen"] == b["chosen"] and a["top"] == b["top"] and a["candidates_evaluated"] == b["candidates_evaluated"]))'
check "... the same seed, the same plan" python3 -c "$samesearch" "$tmp/sa1.json" "$tmp/sa2.json"
expect 1 "-search=magic" "$TAPC" $gpt -search=magic -emit=ir
check "... message" has "$tmp/err" "expected auto, exhaustive or anneal"
expect 1 "-half=fast" "$TAPC" $gpt -half=fast -emit=ir
check "... message" has "$tmp/err" "-half=fast: expected f32 or exact"
"$TAPC" -help >"$tmp/help" 2>&1
check "-help explains -half" has "$tmp/help" "-half=exact rounds"
expect 0 "on 2x8 at batch 1: no replicas" "$TAPC" $gpt -mesh 2x8 -emit=plan
check "... dp 1" has "$tmp/out" '"degrees": {"dp": 1, '
expect 0 "-dp=2 -pp=2 -tp=2 on 2x4" "$TAPC" $gpt -mesh 2x4 -dp=2 -pp=2 -tp=2 -batch=4 -o "$tmp/3d"
for f in stage0.c stage1.c; do
	check "-emit=c wrote $f" test -f "$tmp/3d/$f"
done
check "... rank 5 builds from stage 0" has "$tmp/3d/Makefile" "rank5.o: stage0.c"
check "... rank 7 from stage 1" has "$tmp/3d/Makefile" "rank7.o: stage1.c"
check "... stage 0 sends to stage 1" has "$tmp/3d/stage0.c" "taprt_send(cx, &T\[[0-9]*\], cx->rank + 2,"
check "... stage 1 receives" has "$tmp/3d/stage1.c" "taprt_recv(cx, &T\[[0-9]*\], cx->rank - 2,"
check "... the program table" has "$tmp/3d/main.c" ".dp = 2,"
check "... the stage table lists both replicas" has "$tmp/3d/plan.json" '"ranks": \[2, 3, 6, 7\]'
"$TAPC" $gpt -mesh 1x2 -pp=2 -microbatches=4 -batch=4 -emit=ir -o "$tmp/staged.ir" 2>/dev/null
expect 0 "a staged, micro-batched dump compiles" "$TAPC" "$tmp/staged.ir" -passes=verify -o "$tmp/staged"
check "... with its degrees" has "$tmp/staged/main.c" ".microbatches = 4,"
check "... and the whole batch as input" has "$tmp/staged/main.c" '"idx", 7, 2, {4, 16}'
"$TAPC" $gpt -pp=2 -stop-after=mesh-map -emit=ir -o "$tmp/unstaged.ir" 2>/dev/null
expect 1 "a dump without stages does not compile" "$TAPC" "$tmp/unstaged.ir" -passes=verify -o "$tmp/unstaged"
check "... message" has "$tmp/err" "run stage-assign"
check "... one line" sh -c "[ \$(wc -l < '$tmp/err') = 1 ]"
check "... nothing written" sh -c "[ ! -e '$tmp/unstaged' ]"
expect 0 "-emit=schedule" "$TAPC" $gpt -mesh 1x4 -pp=4 -batch=8 -microbatches=8 -emit=schedule -o "$tmp/s.svg"
check "-emit=schedule: an SVG" sh -c "head -c 5 '$tmp/s.svg' | grep -q '<svg '"
check "-emit=schedule: a box per device and per micro-batch, forward only (an inference program)" \
    sh -c "[ \$(grep -c '<rect ' '$tmp/s.svg') = 36 ]"
check "-emit=schedule: the placement" has "$tmp/s.svg" "device 3: rank 3, replica 0, stage 3, tp 0"
check "-emit=schedule: well-formed XML" python3 -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$tmp/s.svg"
expect 0 "-emit=schedule without a pipeline: the placement" "$TAPC" $gpt -mesh 2x2 -tp=4 -emit=schedule
check "... four devices" sh -c "[ \$(grep -c '<rect ' '$tmp/out') = 4 ]"
expect 1 "more stages than subgraphs" "$TAPC" $mlp -pp=8 -batch=8 -emit=ir
check "... message" has "$tmp/err" "cuts into only"

expect 0 "-print-after=fold-constants" "$TAPC" $gpt -print-after=fold-constants -emit=ir -o /dev/null
check "-print-after banner" has "$tmp/err" "IR Dump After fold-constants"
check "-print-after prints IR" has "$tmp/err" '^graph "'
expect 0 "-print-before=fold-constants" "$TAPC" $gpt -print-before=fold-constants -emit=ir -o /dev/null
check "-print-before shows Shape ops" has "$tmp/err" "= Shape "
expect 0 "-print-after-all" "$TAPC" $mlp -passes=verify,fold-constants,verify -print-after-all -emit=ir -o /dev/null
check "-print-after-all: one banner per pass" sh -c "[ \$(grep -c 'IR Dump After' '$tmp/err') = 3 ]"
expect 0 "-time-passes" "$TAPC" $mlp -time-passes -emit=ir -o /dev/null
check "-time-passes table" has "$tmp/err" "Total"
expect 0 "-stop-after=verify" "$TAPC" $gpt -stop-after=verify -emit=ir -o "$tmp/stop.ir"
check "-stop-after stops before folding" has "$tmp/stop.ir" "= Shape "
expect 1 "-stop-after a pass not in the pipeline" "$TAPC" $mlp -passes=verify -stop-after=fold-constants
expect 0 "-verify-each" "$TAPC" $gpt -verify-each -emit=ir -o /dev/null
expect 0 "-ir-dump-dir" "$TAPC" $gpt -passes=verify,fold-constants,verify -ir-dump-dir="$tmp/dumps" -emit=ir -o /dev/null
check "-ir-dump-dir: numbered files" test -f "$tmp/dumps/02-fold-constants.ir"
check "-ir-dump-dir: one per pass plus input" sh -c "[ \$(ls '$tmp/dumps'/*.ir | wc -l) = 4 ]"
check "-ir-dump-dir: big values in data files" test -s "$tmp/dumps/02-fold-constants.ir.weights"
expect 0 "-batch=3" "$TAPC" $gpt -batch=3 -emit=ir -o "$tmp/b3.ir"
check "-batch=3 reaches the logits" has "$tmp/b3.ir" "f32\[3,16,128\]"
expect 1 "-batch=-2" "$TAPC" $gpt -batch=-2
# an option whose default means "not given" (0, or < 0) refuses the user's own 0
for bad in -batch=0 -max-model-size=0 -max-model-size=-3 -dp=0 -tp=0 -pp=0 -microbatches=0 \
    -anneal-steps=0 -mesh=; do
	expect 1 "$bad" "$TAPC" $mlp $bad -emit=ir
	check "... names it alone" sh -c "[ \$(wc -l < '$tmp/err') = 1 ] && grep -q -- '$bad' '$tmp/err'"
done
expect 1 "-train -weight-decay=-5" "$TAPC" $mlp -train -weight-decay=-5 -emit=ir
check "... weight decay >= 0" has "$tmp/err" "weight decay >= 0"
expect 1 "-mesh=65536x2: past the device limit" "$TAPC" $mlp -mesh=65536x2 -emit=ir
check "... says the limit" has "$tmp/err" "at most 65536 devices"
expect 1 "-o - with -emit=c" "$TAPC" $mlp -o -
check "... no directory named -" test ! -e ./-

# a failed run leaves nothing behind, and never a half-written file
mkdir "$tmp/outdir"
printf 'garbage' >"$tmp/bad.onnx"
expect 1 "bad model" "$TAPC" "$tmp/bad.onnx" -emit=ir -o "$tmp/outdir/x.ir"
check "bad model: no output left" sh -c "[ -z \"\$(ls -A '$tmp/outdir')\" ]"
expect 0 "-o writes the IR" "$TAPC" $mlp -emit=ir -o "$tmp/outdir/x.ir"
check "-o file is the IR" has "$tmp/outdir/x.ir" '^graph "'
check "-o leaves no temporary" sh -c "[ \$(ls -A '$tmp/outdir' | wc -l) = 1 ]"
# -emit=c: a directory, replaced only when it is a previous tapc output
expect 0 "-emit=c writes a directory" "$TAPC" $mlp -o "$tmp/prog"
for f in Makefile main.c stage0.c plan.json; do
	check "-emit=c wrote $f" test -f "$tmp/prog/$f"
done
check "plan.json has a format version" has "$tmp/prog/plan.json" '"format_version": 1'
check "plan.json names the program" has "$tmp/prog/plan.json" '"program": "model"'
touch "$tmp/prog/stale"
expect 0 "-emit=c replaces its own output" "$TAPC" $mlp -o "$tmp/prog/"
check "replaced, not merged" test ! -e "$tmp/prog/stale"
mkdir "$tmp/mine" && touch "$tmp/mine/precious"
expect 1 "-emit=c refuses a directory that is not its own" "$TAPC" $mlp -o "$tmp/mine"
check "refusal message" has "$tmp/err" "is not a tapc output directory"
check "the user's file survives" test -f "$tmp/mine/precious"
check "no temporary left beside it" sh -c "[ \$(ls '$tmp' | grep -c tmp) = 0 ]"
expect 1 "-emit=c of a bad model" "$TAPC" "$tmp/bad.onnx" -o "$tmp/badprog"
check "a failed -emit=c leaves no directory" test ! -e "$tmp/badprog"

# -emit=plan and make dependency files
expect 0 "-emit=plan" "$TAPC" $gpt -emit=plan -o "$tmp/plan.json"
check "-emit=plan: predicted flops" has "$tmp/plan.json" '"flops": '
expect 0 "-MD with -emit=c" "$TAPC" $mlp -o "$tmp/dep" -MD
check "-MD writes DIR.d naming the model" has "$tmp/dep.d" "^$tmp/dep/plan.json: test/e2e/mlp/model.onnx"
expect 0 "-MF FILE" "$TAPC" $mlp -emit=ir -o "$tmp/x2.ir" -MF "$tmp/x2.deps"
check "-MF target is the output file" has "$tmp/x2.deps" "^$tmp/x2.ir: test/e2e/mlp/model.onnx"
check "-MF adds an empty rule per dependency" has "$tmp/x2.deps" "^test/e2e/mlp/model.onnx:$"
expect 1 "-MD without -o" "$TAPC" $mlp -emit=ir -MD

# the IR's big values in FILE.weights beside it (docs/ir.md)
res=test/e2e/resnet
expect 0 "-emit=ir -o of a folded CNN" "$TAPC" $res/model.onnx -batch=4 -emit=ir -o "$tmp/res.ir"
check "... names its data file" has "$tmp/res.ir" ' data="res.ir.weights"$'
check "... and points into it" has "$tmp/res.ir" '^  %[0-9]* = weight "[^"]*|bn" f32\[[0-9,]*\] @+0x'
check "... which is there" test -s "$tmp/res.ir.weights"
check "... a small value stays inline" sh -c "'$TAPC' $res/model.onnx -batch=2 -emit=ir | grep -q ' = \\[.*\\]\$' && grep -q ' = \\[.*\\]\$' '$tmp/res.ir'"
expect 0 "... the IR compiles with its data file" "$TAPC" "$tmp/res.ir" -o "$tmp/resprog" -MD
check "... -MD names the data file" has "$tmp/resprog.d" "^$tmp/resprog/plan.json: $tmp/res.ir $tmp/res.ir.weights test/e2e/resnet/model.onnx"
if make -s -C "$tmp/resprog" >"$tmp/log" 2>&1; then
	expect 0 "... the program from it checks" "$tmp/resprog/model" --check $res/test_data_set_1
else
	fail "... the program from it builds"; head -5 "$tmp/log"
fi
mv "$tmp/res.ir.weights" "$tmp/res.ir.w"
expect 1 "... without its data file" "$TAPC" "$tmp/res.ir" -emit=ir -o "$tmp/res2.ir"
check "... says which" has "$tmp/err" "res.ir: line 1: data file 'res.ir.weights': No such file or directory"
check "... and writes nothing" sh -c "! ls '$tmp'/res2.ir* 2>/dev/null"
head -c 1000 "$tmp/res.ir.w" >"$tmp/res.ir.weights"
expect 1 "... with a data file cut short" "$TAPC" "$tmp/res.ir" -emit=ir -o "$tmp/res2.ir"
check "... names the line and the range" has "$tmp/err" "are past the data file's end (1000 bytes)"
mkdir "$tmp/own" && cp $mlp "$tmp/own/x.weights"
expect 1 "-o whose data file would replace the model" "$TAPC" "$tmp/own/x.weights" -emit=ir -o "$tmp/own/x"
check "... says so" has "$tmp/err" "cannot write '$tmp/own/x.weights': the IR's data file would replace the model's file"
check "... and the model survives" cmp -s "$tmp/own/x.weights" $mlp
check "... and no IR is written" test ! -e "$tmp/own/x"

# outputs of a failed run (issue 11): nothing half-written, nothing lost
mkdir "$tmp/holds" && cp test/e2e/mlp/model.onnx "$tmp/holds/mlp.onnx"
expect 0 "a program directory beside its model" "$TAPC" "$tmp/holds/mlp.onnx" -o "$tmp/holds/prog"
cp "$tmp/holds/prog/plan.json" "$tmp/holds/plan.json"
expect 1 "-o at a tapc output directory holding the input model" "$TAPC" "$tmp/holds/mlp.onnx" -o "$tmp/holds"
check "... refused: it holds the model" has "$tmp/err" "holds the model or a file it reads; not replacing it"
check "... and the model survives" cmp -s "$tmp/holds/mlp.onnx" test/e2e/mlp/model.onnx
expect 1 "an unwritable -MF" "$TAPC" $mlp -o "$tmp/mfprog" -MF "$tmp/no/such/dir/x.d"
check "... names the file" has "$tmp/err" "cannot write '$tmp/no/such/dir/x.d'"
check "... and leaves no program directory" test ! -e "$tmp/mfprog"
if [ -w /dev/full ]; then
	expect 1 "-emit=ir to a full device" sh -c "'$TAPC' $mlp -emit=ir > /dev/full"
	check "... says so" has "$tmp/err" "cannot write standard output: No space left on device"
fi
expect 1 "@missing.rsp" "$TAPC" "@$tmp/missing.rsp" $mlp
check "... names the response file" has "$tmp/err" "missing.rsp: cannot open: No such file or directory"
printf '%s\n' "-mesh '1x2'" "-emit=\"ir\" -o '$tmp/with space.ir' -dp=\\2 -batch=2" >"$tmp/q.rsp"
expect 0 "@file: quotes group words, a backslash escapes" "$TAPC" "@$tmp/q.rsp" $mlp
check "... the quoted name" has "$tmp/with space.ir" "mesh=1x2 dp=2"
printf -- "@%s\n" "$tmp/loop.rsp" >"$tmp/loop.rsp"
expect 1 "@file that includes itself" "$TAPC" "@$tmp/loop.rsp" $mlp
check "... stops at a depth" has "$tmp/err" "response files nest deeper than 16"
expect 1 "-mesh with a sign" "$TAPC" $mlp -mesh=+1x2 -emit=ir
expect 1 "-mesh with a blank" "$TAPC" $mlp "-mesh= 1x2" -emit=ir

# program names never clash with the files of the directory
cp test/e2e/mlp/model.onnx "$tmp/Makefile.onnx"
expect 0 "a model named Makefile.onnx" "$TAPC" "$tmp/Makefile.onnx" -o "$tmp/mkprog"
check "... builds Makefile.bin, not a second Makefile" has "$tmp/mkprog/Makefile" "^PROGRAM = Makefile.bin$"
# the program depends on the runtime it links: rebuilt, it links again
lib=$(dirname "$TAPC")/runtime/.libs/libtaprt.a
mklib=$(sed -n 's/^TAPRT_LIB = //p' "$tmp/mkprog/Makefile")
mkhdr=$(sed -n 's/^TAPRT_INCLUDEDIR = //p' "$tmp/mkprog/Makefile")/taprt.h
check "... its Makefile names the build's libtaprt.a" test "$mklib" -ef "$lib"
check "... and the source tree's taprt.h" test "$mkhdr" -ef "$srcdir/runtime/taprt.h"
if make -s -C "$tmp/mkprog" >"$tmp/log" 2>&1; then
	check "... built, it is up to date" make -q -C "$tmp/mkprog"
	make -n -W "$mklib" -C "$tmp/mkprog" >"$tmp/log" 2>&1
	check "... a rebuilt runtime links it again" has "$tmp/log" "-o Makefile.bin "
	check "... and compiles nothing" sh -c "! grep -q -- ' -c ' '$tmp/log'"
	make -n -W "$mkhdr" -C "$tmp/mkprog" >"$tmp/log" 2>&1
	check "... a changed taprt.h compiles it again" has "$tmp/log" "-c -o main.o main.c"
else
	fail "... make"; head -5 "$tmp/log"
fi
# the program's own command line (docs/usage.md, "The program")
prog=$tmp/mkprog/Makefile.bin
data=test/e2e/mlp/test_data_set_0
expect 0 "the program: --check" "$prog" --check $data
expect 0 "... --threads 2" "$prog" --threads 2 --check $data
expect 0 "... --warmup 0" "$prog" --bench 1 --warmup 0 --inputs $data
for bad in "--threads 0" "--threads 1025" "--bench 0" "--bench abc" "--train 0" "--atol -1" \
    "--frobnicate"; do
	expect 2 "... $bad" "$prog" $bad --inputs $data
	check "... one line" sh -c "[ \$(wc -l < '$tmp/err') = 1 ]"
done
expect 0 "... --help" "$prog" --help
check "... --threads is the rank's team" has "$tmp/out" "1 to 1024"
# OpenBLAS is loaded on the first product oneDNN does not take: at batch
# 2048 every one of the MLP's products (2048x10x64 the least) is oneDNN's,
# and glibc's loader (LD_DEBUG=files) must never open it
expect 0 "the MLP at -batch=2048" "$TAPC" $mlp -batch=2048 -o "$tmp/bigprog"
if make -s -C "$tmp/bigprog" >"$tmp/log" 2>&1; then
	LD_DEBUG=files "$tmp/bigprog/model" --bench 2 --threads 2 >"$tmp/out" 2>"$tmp/err"
	if has "$tmp/out" "thread.*, oneDNN"; then
		check "... products all on oneDNN: OpenBLAS never loaded" sh -c "! grep -q 'file=libopenblas' '$tmp/err'"
		check "... nor named" sh -c "! grep -q 'OpenBLAS' '$tmp/out'"
	fi
else
	fail "... make"; head -5 "$tmp/log"
fi
expect 1 "... --model naming a missing file" "$prog" --model /nonexistent.onnx --check $data
check "... named as given" sh -c "grep -q ': /nonexistent.onnx: ' '$tmp/err' && ! grep -q '//' '$tmp/err'"
cp test/e2e/mlp/model.onnx "$tmp/-x.onnx"
expect 0 "a model named -x.onnx" "$TAPC" "$tmp/-x.onnx" -o "$tmp/dashprog"
check "... builds _x" has "$tmp/dashprog/Makefile" "^PROGRAM = _x$"

# an IR file's model: inside the current directory unless -model names it
"$TAPC" $mlp -emit=ir -o "$tmp/m.ir" 2>/dev/null
sed 's|model="test/e2e/mlp/model.onnx"|model="/tmp/x.onnx"|' "$tmp/m.ir" >"$tmp/abs.ir"
expect 1 "an IR file naming an absolute model" "$TAPC" "$tmp/abs.ir" -emit=ir
check "... refused" has "$tmp/err" "model path '/tmp/x.onnx' must be relative"
expect 0 "... unless -model names it" "$TAPC" "$tmp/abs.ir" -model=test/e2e/mlp/model.onnx -o "$tmp/modelprog"
check "... the program reads the model -model named" has "$tmp/modelprog/main.c" '"model.onnx"'
expect 1 "-model with an ONNX input" "$TAPC" $mlp -model=x.onnx -emit=ir

# symbolic dims: -dim, -input-shape (test/e2e/p2o: x is [p2o.0, 3, 16, p2o.1])
p2o=test/e2e/p2o/model.onnx
expect 1 "a symbolic width without a value" "$TAPC" $p2o -emit=ir
check "... names it, its input and the options" has "$tmp/err" \
    "'p2o.DynamicDimension.1' (input 'x' dim 3); give each one with -dim NAME=N or the input's shape with -input-shape"
expect 0 "-dim binds it" "$TAPC" $p2o -dim p2o.DynamicDimension.1=24 -emit=ir
check "... x is f32[1,3,16,24]" has "$tmp/out" 'input "x" f32\[1,3,16,24\]'
check "... y's width follows from Shape" has "$tmp/out" 'f32\[1,24,16\]'
expect 0 "-input-shape=x=2x3x16x10 pins the whole input" "$TAPC" $p2o -input-shape=x=2x3x16x10 -emit=ir
check "... x is f32[2,3,16,10]" has "$tmp/out" 'input "x" f32\[2,3,16,10\]'
expect 1 "-input-shape with a bad size" "$TAPC" $p2o -input-shape=x=2x3x0x10 -emit=ir
expect 1 "-dim and -input-shape on an IR file" "$TAPC" "$tmp/m.ir" -dim a=1 -emit=ir
finish
