#!/bin/sh
# train.sh - tapc -train against torch (test/train, docs/training.md).
#
# For each model of test/train (GPT with an untied head, BERT, T5, ViT,
# the MLP, the CNN), each optimizer (sgd, adamw: NAME/OPT/args) and each
# plan of PLANS (default 1x1, 1x2 -tp=2, 2x1 -dp=2, 2x2 -dp=2 -tp=2):
#   tapc NAME/model.onnx -train $(cat NAME/OPT/args) -batch=4 PLAN -o OUT
#   make -C OUT && OUT/model --train 10 --data NAME/data --save SAVED
# The 10 printed losses must match torch's (NAME/OPT/losses.txt: rtol 1e-3
# for steps 1-3, 1e-2 for all), and SAVED/model.onnx, run by onnxruntime
# on the batch, must give torch's trained model's outputs (NAME/OPT/
# output_N.pb, rtol 1e-3, atol 1e-4).  onnxruntime-node is looked for in
# ORT_DIR (default /tmp/ort; test/all.sh installs it); without node and it,
# the saved model is compiled by tapc and checked with --check instead
# (the same references), and the log says so.  Under MPI (TAPRT_MPI=yes and
# mpirun), the 2x2 plan of every model also runs as 4 processes.  A NaN
# loss or output fails the comparisons.
. "$srcdir/test/lib.sh"
cd "$srcdir"
py=/usr/bin/python3
ort_dir=${ORT_DIR:-/tmp/ort}
ort=no
command -v node >/dev/null 2>&1 && [ -d "$ort_dir/node_modules/onnxruntime-node" ] && ort=yes
[ $ort = yes ] || echo "NOTE: no onnxruntime-node in $ort_dir: saved models are checked by tapc"

# losses GOT WANT: the printed "step K loss L" lines against torch's
cmp_losses='import sys
got = {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) == 4 and w[0] == "step" and w[2] == "loss":
        got[int(w[1])] = float(w[3])
want = [float(x) for x in open(sys.argv[2])]
bad = []
for k, w in enumerate(want, 1):
    g = got.get(k)
    tol = 1e-3 if k <= 3 else 1e-2
    if g is None or not abs(g - w) <= tol * abs(w):  # a NaN fails too
        bad.append("step %d: %s, torch %.6g" % (k, g, w))
if len(got) != len(want) or bad:
    print("losses differ:", "; ".join(bad) or "%d printed" % len(got))
    sys.exit(1)'

# saved MODEL DATA REF: the saved model in onnxruntime against torch's outputs
ort_check='import json, os, subprocess, sys
import numpy as np
import onnx
from onnx import numpy_helper
model, data, ref, work, script = sys.argv[1:6]
m = onnx.load(model, load_external_data=False)
ins = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
man = []
for k, name in enumerate(ins):
    t = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "input_%d.pb" % k)))
    f = "in%d.bin" % k
    t.tofile(os.path.join(work, f))
    man.append({"name": name, "dtype": {"float32": "float32", "int64": "int64"}[str(t.dtype)],
                "shape": list(t.shape), "file": f})
json.dump(man, open(os.path.join(work, "inputs.json"), "w"))
subprocess.run(["node", script, model, work, work], check=True, stderr=subprocess.DEVNULL)
outs = json.load(open(os.path.join(work, "outputs.json")))
bad = 0
for k, o in enumerate(outs):
    p = os.path.join(ref, "output_%d.pb" % k)
    if not os.path.exists(p):
        continue
    want = numpy_helper.to_array(onnx.load_tensor(p))
    got = np.fromfile(os.path.join(work, o["file"]), dtype=want.dtype).reshape(want.shape)
    err = np.abs(got - want) - (1e-4 + 1e-3 * np.abs(want))
    if not (err <= 0).all():  # a NaN fails too
        print("output %d: max abs err %.3g" % (k, np.abs(got - want).max()))
        bad = 1
sys.exit(bad)'

run_train() { # NAME OPT PLAN (comma-separated flags) [NP: processes]
	name=$1 opt=$2 plan=$3 np=${4:-}
	flags=$(echo "$plan" | tr , ' ')
	dir=test/train/$name
	out="$tmp/$name-$opt-$(echo "$plan" | tr -c 'a-z0-9\n' _)${np:+-mpi}"
	what="$name $opt ${plan:-1x1}${np:+ under mpirun -np $np}"
	if ! "$TAPC" $dir/model.onnx -train $(cat $dir/$opt/args) -batch=4 $flags -o "$out" \
	    2>"$tmp/err"; then
		fail "$what: tapc: $(head -1 "$tmp/err")"
		return
	fi
	if ! make -s -C "$out" >"$tmp/err" 2>&1; then
		fail "$what: make"; head -5 "$tmp/err"
		return
	fi
	rm -rf "$out.saved"
	if [ -n "$np" ]; then
		timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$out/model" --backend=mpi --train 10 \
		    --data $dir/data --save "$out.saved" >"$tmp/log" 2>&1
	else
		"$out/model" --train 10 --data $dir/data --save "$out.saved" >"$tmp/log" 2>&1
	fi
	if [ $? != 0 ]; then
		fail "$what: training"; grep -m5 -E "ERROR|error" "$tmp/log"; tail -5 "$tmp/log"
		return
	fi
	if $py -c "$cmp_losses" "$tmp/log" $dir/$opt/losses.txt >"$tmp/cmp" 2>&1; then
		pass "$what: 10 losses as torch's"
	else
		fail "$what: $(cat "$tmp/cmp")"; cat "$tmp/log"
	fi
	if [ $ort = yes ]; then
		mkdir -p "$tmp/ort"
		if ORT_DIR=$ort_dir $py -c "$ort_check" "$out.saved/model.onnx" $dir/data $dir/$opt \
		    "$tmp/ort" test/e2e/ort_run.js >"$tmp/cmp" 2>&1; then
			pass "$what: the saved model in onnxruntime gives torch's trained outputs"
		else
			fail "$what: the saved model in onnxruntime: $(tail -1 "$tmp/cmp")"
		fi
		rm -rf "$tmp/ort"
	else
		mkdir -p "$tmp/ref"
		cp $dir/data/input_*.pb $dir/$opt/output_*.pb "$tmp/ref/"
		if "$TAPC" "$out.saved/model.onnx" -batch=4 -o "$out.check" 2>"$tmp/err" &&
		    make -s -C "$out.check" >/dev/null 2>&1 &&
		    "$out.check/model" --check "$tmp/ref" --rtol 1e-3 --atol 1e-4 >"$tmp/cmp" 2>&1; then
			pass "$what: the saved model (compiled by tapc) gives torch's trained outputs"
		else
			fail "$what: the saved model: $(head -3 "$tmp/err" "$tmp/cmp")"
		fi
		rm -rf "$tmp/ref" "$out.check"
	fi
	rm -rf "$out" "$out.saved"
}

if [ "${TAPRT_MPI:-no}" = yes ] && [ -n "${MPIRUN:-}" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl=self,vader
	# under ASan: Open MPI's own leaks are suppressed, as in mpi.sh
	export LSAN_OPTIONS="suppressions=$srcdir/test/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
fi
# Pipelines (docs/pipeline.md): each model at 1x2 -pp=2 with 4 micro-batches,
# the schedule turning with the model and optimizer (TRAIN_PIPE_FULL=yes: every
# schedule for both optimizers); AdamW at 2x4 (dp 2, tp 2, pp 2, 2
# micro-batches); SGD at 1x4 -pp=4 with -recompute=auto, and -recompute=all.
# AutoPipe's slicer (-slice: each micro-batch as two halves): SGD at 1x4
# -pp=4, AdamW at 1x2 -pp=2 with -recompute=all.  Merak's sub-pipelined TMP
# (-subpipeline: the halves take turns at every TP all-reduce): SGD at 1x2
# -tp=2; AdamW at 2x4 (dp 2, tp 2, pp 2) for GPT, at 1x4 (tp 2, pp 2) with
# -recompute=all for BERT.
schedules="gpipe 1f1b merak"
turn=0
pipe_plans() { # this model's pipeline plans for $opt
	if [ "${TRAIN_PIPE_FULL:-no}" = yes ]; then
		for s in $schedules; do echo "-mesh,1x2,-pp=2,-microbatches=4,-schedule=$s"; done
	else
		set -- $schedules
		shift $((turn % 3))
		echo "-mesh,1x2,-pp=2,-microbatches=4,-schedule=$1"
	fi
	case $opt in
	adamw) echo "-mesh,2x4,-dp=2,-tp=2,-pp=2,-microbatches=2"
	       echo "-mesh,1x2,-pp=2,-microbatches=2,-slice,-recompute=all"
	       case $name in
	       gpt_untied) echo "-mesh,2x4,-dp=2,-tp=2,-pp=2,-microbatches=1,-subpipeline" ;;
	       bert) echo "-mesh,1x4,-tp=2,-pp=2,-microbatches=2,-subpipeline,-recompute=all" ;;
	       esac ;;
	sgd) echo "-mesh,1x4,-pp=4,-microbatches=4,-recompute=auto"
	     echo "-mesh,1x2,-pp=2,-microbatches=4,-schedule=1f1b,-recompute=all"
	     echo "-mesh,1x4,-pp=4,-microbatches=2,-slice"
	     echo "-mesh,1x2,-tp=2,-subpipeline" ;;
	esac
}

for dir in test/train/*/; do
	name=$(basename "$dir")
	[ -f "$dir/model.onnx" ] || continue
	for opt in sgd adamw; do
		turn=$((turn + 1))
		for plan in ${PLANS-"" -mesh,1x2,-tp=2 -mesh,2x1,-dp=2 -mesh,2x2,-dp=2,-tp=2 $(pipe_plans)}; do
			run_train "$name" "$opt" "$plan"
		done
		if [ "${TAPRT_MPI:-no}" = yes ] && [ -n "${MPIRUN:-}" ]; then
			run_train "$name" "$opt" "-mesh,2x2,-dp=2,-tp=2" 4
			[ "$name" = gpt_untied ] &&
			    run_train "$name" "$opt" "-mesh,2x2,-dp=2,-pp=2,-microbatches=2,-schedule=1f1b" 4
			[ "$name" = gpt_untied ] && [ $opt = sgd ] &&
			    run_train "$name" "$opt" "-mesh,1x2,-tp=2,-subpipeline" 2
		fi
	done
done

# plan.json's memory of a training rank, against the model's initializers
# (onnx): every f32 weight of gpt_untied is trained; AdamW keeps two moments
mem_check='import json, sys
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
total = sum(numpy_helper.to_array(t).nbytes for t in m.graph.initializer if t.data_type == 1)
bad = []
for path, tp in zip(sys.argv[2:], (1, 2)):
    for r in json.load(open(path))["ranks"]:
        x = r["memory"]
        w = x["weights"]
        if tp == 1 and w != total or tp == 2 and not total / 2 <= w < total:
            bad.append("tp %d rank %d: weights %d of %d" % (tp, r["rank"], w, total))
        if x["gradients"] != w or x["optimizer_state"] != 2 * w:
            bad.append("tp %d rank %d: %s" % (tp, r["rank"], x))
        if x["peak"] != w + x["optimizer_state"] + x["activations"] or x["activations"] <= 0:
            bad.append("tp %d rank %d: peak %s" % (tp, r["rank"], x))
print("; ".join(bad))
sys.exit(1 if bad else 0)'
g=test/train/gpt_untied/model.onnx
if "$TAPC" $g -train -optimizer=adamw -batch=4 -emit=plan -o "$tmp/p1.json" 2>"$tmp/err" &&
    "$TAPC" $g -train -optimizer=adamw -batch=4 -mesh 1x2 -tp=2 -emit=plan -o "$tmp/p2.json" 2>>"$tmp/err" &&
    "$py" -c "$mem_check" $g "$tmp/p1.json" "$tmp/p2.json" >"$tmp/cmp" 2>&1; then
	pass "plan.json: each rank's weights, gradients, AdamW state and peak (1x1, 1x2 -tp=2)"
else
	fail "plan.json memory: $(cat "$tmp/err" "$tmp/cmp" | head -3)"
fi

# --memory-report: each rank's measured peak of activations (the arena's
# high-water mark), at most the plan's; stage 0 of GPT at 1x2 -pp=2 with 4
# micro-batches and no recomputation holds at most 60% under 1F1B of what
# it holds under GPipe (2 micro-batches in flight instead of 4), on the
# unfused graph (-O0); fuse-train's graph (its LayerNorms and GELUs store
# less per micro-batch, so the part that does not grow with the micro-
# batches in flight weighs more) holds less than the unfused one under
# each schedule, and less under 1F1B than under GPipe
mem_ratio='import sys
peak = {}
for s, path in (("gpipe", sys.argv[1]), ("1f1b", sys.argv[2]), ("gpipe fused", sys.argv[3]),
                ("1f1b fused", sys.argv[4])):
    for line in open(path):
        w = line.split()
        if len(w) == 8 and w[0] == "rank" and w[4] == "peak_activation_bytes":
            if int(w[5]) > int(w[7]) or int(w[5]) <= 0:
                print("%s rank %s: measured %s, planned %s" % (s, w[1], w[5], w[7]))
                sys.exit(1)
            if w[3] == "0":
                peak[s] = int(w[5])
if len(peak) != 4 or peak["1f1b"] > 0.6 * peak["gpipe"] or \
    not peak["1f1b fused"] < peak["gpipe fused"] or \
    not peak["gpipe fused"] < peak["gpipe"] or not peak["1f1b fused"] < peak["1f1b"]:
    print("stage 0 peaks: %s" % peak)
    sys.exit(1)
print("stage 0, -O0: 1f1b %d bytes, gpipe %d (%.0f%%); fused: %d, %d" % (peak["1f1b"],
      peak["gpipe"], 100.0 * peak["1f1b"] / peak["gpipe"], peak["1f1b fused"],
      peak["gpipe fused"]))'
ok=yes
for s in gpipe 1f1b; do
	for o in -O0 ""; do
		"$TAPC" $g -train -batch=4 -mesh 1x2 -pp=2 -microbatches=4 -schedule=$s $o \
		    -o "$tmp/mem-$s$o" 2>"$tmp/err" && make -s -C "$tmp/mem-$s$o" >/dev/null 2>&1 &&
		    "$tmp/mem-$s$o/model" --train 1 --data test/train/gpt_untied/data --memory-report \
		    >"$tmp/mem-$s$o.txt" 2>&1 || ok=no
	done
done
if [ $ok = yes ] && "$py" -c "$mem_ratio" "$tmp/mem-gpipe-O0.txt" "$tmp/mem-1f1b-O0.txt" \
    "$tmp/mem-gpipe.txt" "$tmp/mem-1f1b.txt" >"$tmp/cmp" 2>&1; then
	pass "--memory-report: measured peaks within the plan; $(cat "$tmp/cmp")"
else
	fail "--memory-report: $(cat "$tmp/err" "$tmp/cmp" | head -3)"
fi
rm -rf "$tmp"/mem-gpipe* "$tmp"/mem-1f1b*

# Merak's stage-aware recomputation by module (-recompute=auto): GPT at 1x3
# -pp=3 with 4 micro-batches of 1 row and a device memory (2.03 MB) that
# fits stage 0 (3 modules, 3 micro-batches in flight) with its last module
# kept and the other two re-run, but not with two kept; stage 1 follows
# the paper's formula (alpha_2 = alpha_1 = 1/3 of its one module: none).
# plan.json must say so, the 10 losses and the saved model must be torch's,
# and stage 0's measured peak must lie strictly between -recompute=all's
# and -recompute=none's.  On the unfused graph (-O0): the device memory is
# set by its modules' activations, which fuse-train's would shrink.
sr="-mesh,1x3,-pp=3,-microbatches=4,-cost=memory=2.03e6,-O0"
run_train gpt_untied sgd "$sr,-recompute=auto"
kept_check='import json, sys
st = json.load(open(sys.argv[1]))["pipeline"]["stage_table"]
got = [(s["modules"], s["modules_kept"], s["recompute"]) for s in st]
want = [(3, 1, True), (1, 0, True), (3, 3, False)]
print("stages (modules, kept, recompute): %s" % got)
sys.exit(0 if got == want else 1)'
peak0() { sed -n "s/^rank 0 stage 0 peak_activation_bytes \([0-9]*\) .*/\1/p" "$1"; }
ok=yes
for r in auto none all; do
	"$TAPC" $g -train $(cat test/train/gpt_untied/sgd/args) -batch=4 $(echo "$sr" | tr , ' ') \
	    -recompute=$r -o "$tmp/sr-$r" 2>"$tmp/err" && make -s -C "$tmp/sr-$r" >/dev/null 2>&1 &&
	    "$tmp/sr-$r/model" --train 1 --data test/train/gpt_untied/data --memory-report \
	    >"$tmp/sr-$r.txt" 2>&1 || ok=no
done
if [ $ok = yes ] && "$py" -c "$kept_check" "$tmp/sr-auto/plan.json" >"$tmp/cmp" 2>&1 &&
    [ "$(peak0 "$tmp/sr-all.txt")" -lt "$(peak0 "$tmp/sr-auto.txt")" ] &&
    [ "$(peak0 "$tmp/sr-auto.txt")" -lt "$(peak0 "$tmp/sr-none.txt")" ]; then
	pass "-recompute=auto by module: $(cat "$tmp/cmp"); stage 0 peak $(peak0 "$tmp/sr-all.txt") < $(peak0 "$tmp/sr-auto.txt") < $(peak0 "$tmp/sr-none.txt") bytes (all, auto, none)"
else
	fail "-recompute=auto by module: $(cat "$tmp/err" "$tmp/cmp" | head -3)"
fi
rm -rf "$tmp"/sr-*

# an error of tapc: one line saying WANT
expect_err() { # WHAT WANT ARGS...
	what=$1 want=$2; shift 2
	if "$@" >"$tmp/out" 2>"$tmp/err"; then
		fail "$what: accepted"
	elif grep -q -- "$want" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]; then
		pass "$what"
	else
		fail "$what: $(cat "$tmp/err")"
	fi
}
# a training graph's IR dump (its loss and gradient lines, AdamW's state,
# the replicas' gradient buckets) compiles to the same training program:
# torch's losses again
# trains_from_ir DIR OPT IR OUT: IR compiled (weights from DIR/model.onnx)
# into OUT, 10 steps on DIR/data, torch's losses (DIR/OPT/losses.txt)
trains_from_ir() {
	"$TAPC" "$3" -model=$1/model.onnx -o "$4" 2>>"$tmp/err" &&
	    make -s -C "$4" >/dev/null 2>>"$tmp/err" &&
	    "$4/model" --train 10 --data $1/data >"$tmp/log" 2>>"$tmp/err" &&
	    $py -c "$cmp_losses" "$tmp/log" $1/$2/losses.txt >"$tmp/cmp" 2>&1
}
d=test/train/mlp
if "$TAPC" $d/model.onnx -train $(cat $d/adamw/args) -batch=4 -mesh 2x1 -dp=2 -emit=ir \
    -o "$tmp/train.ir" 2>"$tmp/err" &&
    trains_from_ir $d adamw "$tmp/train.ir" "$tmp/fromir"; then
	pass "a training IR dump (loss, grad and state lines; dp 2) compiles and trains as torch"
else
	fail "training IR dump: $(cat "$tmp/err" "$tmp/cmp" | head -3)"
fi
# a pipelined training graph's IR dump, sliced (its header's microbatches=
# counts the halves, slice= the sliced pairs; its sg= cut is kept, not
# re-cut across the backward): torch's losses again
d=test/train/gpt_untied
if "$TAPC" $d/model.onnx -train $(cat $d/sgd/args) -batch=4 -mesh 1x2 -pp=2 -microbatches=2 -slice \
    -emit=ir -o "$tmp/slice.ir" 2>"$tmp/err" &&
    head -1 "$tmp/slice.ir" | grep -Eq ' microbatches=4 slice=[12]( data="[^"]*")?$' &&
    trains_from_ir $d sgd "$tmp/slice.ir" "$tmp/fromir2"; then
	pass "a sliced pipeline's training IR dump (pp 2, slice=) compiles and trains as torch"
else
	fail "sliced training IR dump: $(head -1 "$tmp/slice.ir") $(cat "$tmp/err" "$tmp/cmp" | head -3)"
fi
sed '1s/slice=[0-9]*/slice=7/' "$tmp/slice.ir" >"$tmp/bad.ir"
expect_err "an IR file's slice= beyond its pairs" "slice=7: expected with pp > 1" \
    "$TAPC" "$tmp/bad.ir" -model=$d/model.onnx -emit=ir
d=test/train/mlp
# ... whose loss and gradient lines are checked like the rest of an IR file
w=$(sed -n 's/^  grad \(%[0-9]*\) .*/\1/p' "$tmp/train.ir" | head -1)
sed "s/^  grad $w .*/  grad $w $w/" "$tmp/train.ir" >"$tmp/bad.ir"
expect_err "an IR file's gradient that is not a computed tensor" "expected a computed tensor of a float weight's type" \
    "$TAPC" "$tmp/bad.ir" -model=$d/model.onnx -emit=ir
sed "s/^  loss .*/  loss $w/" "$tmp/train.ir" >"$tmp/bad.ir"
expect_err "an IR file's loss that is a weight" "expected one computed f32 or f64 value" \
    "$TAPC" "$tmp/bad.ir" -model=$d/model.onnx -emit=ir

# -subpipeline's program runs the pairs interleaved: run() calls the paired
# steps, whose parts start a TP all-reduce and wait for it a part later;
# the IR header says subpipeline=1, and the reader checks it
d=test/train/gpt_untied
if "$TAPC" $d/model.onnx -train $(cat $d/sgd/args) -batch=4 -mesh 1x2 -tp=2 -subpipeline \
    -o "$tmp/sub" 2>"$tmp/err" &&
    grep -q '^	if (fwd2(cx, 0))' "$tmp/sub/stage0.c" &&
    grep -q '^	if (bwd2(cx, 0, true))' "$tmp/sub/stage0.c" &&
    [ "$(grep -c 'taprt_allreduce_start(cx' "$tmp/sub/stage0.c")" -ge 4 ] &&
    [ "$(grep -c 'taprt_allreduce_wait(cx' "$tmp/sub/stage0.c")" -ge 4 ]; then
	pass "-subpipeline: run() steps pairs of halves, parts split at started TP all-reduces"
else
	fail "-subpipeline's program: $(head -3 "$tmp/err")"
fi
if "$TAPC" $d/model.onnx -train $(cat $d/sgd/args) -batch=4 -mesh 1x2 -tp=2 -subpipeline \
    -emit=ir -o "$tmp/sub.ir" 2>"$tmp/err" &&
    head -1 "$tmp/sub.ir" | grep -Eq ' microbatches=2 subpipeline=1( data="[^"]*")?$'; then
	pass "a sub-pipelined IR dump's header: microbatches= counts halves, subpipeline=1"
else
	fail "sub-pipelined IR dump: $(head -1 "$tmp/sub.ir") $(head -3 "$tmp/err")"
fi
sed '1s/microbatches=2/microbatches=3/' "$tmp/sub.ir" >"$tmp/bad.ir"
expect_err "an IR file's subpipeline=1 with an odd microbatches=" \
    "subpipeline=1: expected with tp > 1, an even microbatches=" \
    "$TAPC" "$tmp/bad.ir" -model=$d/model.onnx -emit=ir
rm -rf "$tmp/sub"

# usage errors, one line each
m=test/train/mlp/model.onnx
# fuse-train: GPT's two GELUs and five LayerNorms one node each before
# autodiff (one gradient node each), so no Erf and only the loss's
# ReduceMean; -O0 keeps the pieces (the losses above check the function)
for o in "" -O0; do
	if "$TAPC" test/train/gpt_untied/model.onnx -train -batch=4 $o -emit=ir -o "$tmp/ft.ir" \
	    2>"$tmp/err"; then
		n="$(grep -c '= FusedGelu ' "$tmp/ft.ir") $(grep -c '= GeluGrad ' "$tmp/ft.ir")"
		n="$n $(grep -c '= FusedLayerNorm ' "$tmp/ft.ir") $(grep -c '= Erf ' "$tmp/ft.ir")"
		want="2 2 5 0"
		[ -n "$o" ] && want="0 0 0 2"
		check "fuse-train${o:+ $o}: FusedGelu, GeluGrad, FusedLayerNorm, Erf: $n" test "$n" = "$want"
	else
		fail "fuse-train$o: $(head -1 "$tmp/err")"
	fi
done
expect_err "-schedule=zb" "expected gpipe, 1f1b or merak" "$TAPC" $m -train -schedule=zb -emit=ir
expect_err "-recompute=some" "expected none, all or auto" "$TAPC" $m -train -recompute=some -emit=ir
expect_err "-loss=hinge" "expected cross_entropy or mse" "$TAPC" $m -train -loss=hinge -emit=ir
expect_err "-optimizer=lamb" "expected sgd or adamw" "$TAPC" $m -train -optimizer=lamb -emit=ir
expect_err "-lr=0" "expected lr > 0" "$TAPC" $m -train -lr=0 -emit=ir
expect_err "-slice -pp=1" "no pipeline to slice" "$TAPC" $m -train -slice -pp=1 -emit=ir
expect_err "-slice with micro-batches of 1 row" "micro-batches of an odd number of rows" \
    "$TAPC" $m -train -batch=4 -mesh 1x2 -pp=2 -microbatches=4 -slice -emit=ir
expect_err "-slice where the plan has no pipeline" "the plan chosen has no pipeline" \
    "$TAPC" $m -train -batch=4 -mesh 1x2 -dp=2 -slice -emit=ir
expect_err "-subpipeline -tp=1" "there are none at tp 1" "$TAPC" $m -train -subpipeline -tp=1 -emit=ir
expect_err "-subpipeline -slice" "both run each micro-batch as two halves" \
    "$TAPC" $m -train -batch=4 -mesh 1x4 -tp=2 -pp=2 -subpipeline -slice -emit=ir
expect_err "-subpipeline where the plan has no TP" "the plan chosen has no tensor parallelism" \
    "$TAPC" $m -train -batch=4 -mesh 1x2 -dp=2 -subpipeline -emit=ir
finish
