#!/bin/sh
# bench/run.sh - single-thread CPU benchmark of tapc-compiled programs against
# onnxruntime: every end-to-end fixture (test/e2e) at batch 1 and 4, and the
# realistic-size models bench/gen_models.py writes (GPT-2-small and
# BERT-base width at T 128 batch 4, ResNet-18, a MobileNetV3-style CNN and a
# segmentation net at 224x224 batch 1, BERT-width feed-forward blocks as
# onnxruntime's quantize_dynamic writes them at batch 4, and the GPT-2 model
# as a float16 converter writes it, at batch 4: gpt2s16).
#
# Usage: bench/run.sh [--update-readme] [BUILD_DIR]
#
#   BUILD_DIR        the build tree holding tapc and runtime/.libs/libtaprt.a
#                    (default: the source tree, i.e. an in-tree build)
#   --update-readme  also write the table into bench/README.md (between the
#                    "results" markers), with the date and the machine
#
# For every configuration it compiles and builds the program (tapc -mesh
# 1x1 -batch=B), checks its outputs against the reference (--check), converts
# the same inputs for test/e2e/ort_run.js, calibrates an iteration count N so
# that the faster side runs >= BENCH_MIN_MS of timed work, then runs
# BENCH_REPEATS rounds, each round one run of ours (--bench N --warmup W)
# followed by one run of onnxruntime (--warmup W --repeat N, intra-op 1,
# inter-op 1, sequential), each under /usr/bin/time for its peak RSS.  The
# table shows the median over the rounds of each side's ms/iteration, the
# ratio -- the median over the rounds of the round's ort_ms / our_ms (our
# throughput relative to onnxruntime's; > 1 means we are faster): the two
# runs of a round are back to back, so a slow phase of a shared host weighs
# on both, where the two sides' medians can come from different phases (a
# virtual machine here ran the same 2 ms program at 1.98 and 2.49 ms
# minutes apart) -- and the largest peak RSS of each side (MiB;
# onnxruntime's is the node process's, which includes node itself:
# BENCH_ORT_BASE below).
# The last lines say whether every row reaches BENCH_TARGET and whether our
# peak RSS is at most onnxruntime's on every row.
#
# Environment:
#   BENCH_MODELS   fixtures to run (default: every test/e2e fixture)
#   BENCH_BATCHES  fixture batches (default "1 4"; only 1 and 4 have data sets)
#   BENCH_BIG      generated models to run (default "gpt2s bertb resnet18 mnv3
#                  segnet qffn gpt2s16"; "" for none); each at its own batch (4,
#                  4, 1, 1, 1, 4, 4); gpt2s16 checked at rtol and atol 2e-2
#   BENCH_GEN      where bench/gen_models.py writes them (default
#                  $BENCH_WORK/models; an existing model there is reused)
#   BENCH_THREADS  threads per side (default 1: --threads N and onnxruntime's
#                  intraOpNumThreads N)
#   BENCH_REPEATS  rounds per configuration (default 5)
#   BENCH_MIN_MS   minimum timed work per run, in ms (default 1000)
#   BENCH_MAX_MS   cap on the slower side's timed work per run (default 30000;
#                  when it binds, the faster side times less than BENCH_MIN_MS)
#   BENCH_TARGET   ratio every row should reach (default 1.0)
#   BENCH_WORK     work directory (default: a fresh mktemp -d, removed at exit)
#   ORT_DIR        a directory whose node_modules/ holds onnxruntime-node
#
# Both sides run on BENCH_THREADS threads: our programs get --threads N
# (OpenBLAS threads per rank), run.sh exports OPENBLAS_NUM_THREADS=N
# OMP_NUM_THREADS=N, and ort_run.js sets intraOpNumThreads N, interOpNumThreads
# 1 and sequential execution.  onnxruntime-node is installed into
# bench/node_modules on first use (npm install --ignore-scripts), unless
# ORT_DIR or /tmp/ort already provide it.  The generated models need
# Debian's python3-torch (.ci/setup --fixtures).  Exit status: 0 when every
# configuration was measured and passed --check, 1 otherwise (the verdict
# lines do not change it).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
ncpu=$(getconf _NPROCESSORS_ONLN) # before OMP_NUM_THREADS=1, which nproc obeys
root=$(cd "$here/.." && pwd)
update_readme=no
build=
for a in "$@"; do
	case $a in
	--update-readme) update_readme=yes ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "run.sh: unknown option $a" >&2; exit 2 ;;
	*) build=$a ;;
	esac
done
build=$(cd "${build:-$root}" && pwd)

all_fixtures=$(cd "$root/test/e2e" && for d in */; do [ -f "$d/model.onnx" ] && echo "${d%/}"; done)
models=${BENCH_MODELS-$all_fixtures}
batches=${BENCH_BATCHES:-1 4}
big=${BENCH_BIG-gpt2s bertb resnet18 mnv3 segnet qffn gpt2s16}
threads=${BENCH_THREADS:-1}
repeats=${BENCH_REPEATS:-5}
min_ms=${BENCH_MIN_MS:-1000}
max_ms=${BENCH_MAX_MS:-30000}
target=${BENCH_TARGET:-1.0}

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "$*" >&2; }

[ -x "$build/tapc" ] || die "$build/tapc not found; build first (./configure && make), or pass BUILD_DIR"
[ -f "$build/runtime/.libs/libtaprt.a" ] || die "$build/runtime/.libs/libtaprt.a not found; run make in $build"
command -v node >/dev/null 2>&1 ||
	die "node not found; run .ci/setup --bench (installs Debian's nodejs and npm)"

# --- onnxruntime-node ---------------------------------------------------------
has_ort() { [ -f "$1/node_modules/onnxruntime-node/package.json" ]; }
if has_ort "$here"; then
	ort_dir=$here
elif [ -n "${ORT_DIR:-}" ] && has_ort "$ORT_DIR"; then
	ort_dir=$ORT_DIR
elif has_ort /tmp/ort; then
	ort_dir=/tmp/ort
else
	command -v npm >/dev/null 2>&1 || die "npm not found; run .ci/setup --bench"
	log "installing onnxruntime-node into $here/node_modules"
	(cd "$here" && npm install --ignore-scripts --no-audit --no-fund >&2) ||
		die "npm install failed"
	ort_dir=$here
fi
ort_dir=$(cd "$ort_dir" && pwd)
NODE_PATH=$ort_dir/node_modules
export NODE_PATH
node -e "require('onnxruntime-node')" 2>/dev/null || die "onnxruntime-node in $ort_dir does not load"
ort_version=$(node -p "require('onnxruntime-node/package.json').version")

# --- BENCH_THREADS threads on each side ---------------------------------------
OPENBLAS_NUM_THREADS=$threads
OMP_NUM_THREADS=$threads
export OPENBLAS_NUM_THREADS OMP_NUM_THREADS
[ -x /usr/bin/time ] || die "/usr/bin/time not found (Debian's time package) for the peak RSS"

if [ -n "${BENCH_WORK:-}" ]; then
	work=$BENCH_WORK
	mkdir -p "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-bench.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	trap 'exit 130' INT TERM
fi

# median of the numbers on stdin (one a line)
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) exit 1; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# ours: "NAME: N iterations, X ms/iteration, Y samples/s (batch B, ...)" -> ms
# per iteration as B * 1000 / Y (Y has more significant digits than X); the
# run's peak RSS (KiB) goes to $work/rss
our_ms() {
	/usr/bin/time -f %M -o "$work/rss" "$1" --bench "$2" --warmup "$3" --inputs "$4" --threads "$threads" |
		tee "$work/last_bench" | sed -n 's/.* ms\/iteration, \([0-9.eE+-]*\) samples\/s (batch \([0-9]*\),.*/\2 \1/p' |
		awk '$2 > 0 {printf "%.6g\n", $1 * 1000 / $2}'
}
# onnxruntime: mean of the per-run times ort_run.js reports on stderr
ort_ms() {
	/usr/bin/time -f %M -o "$work/rss" node "$root/test/e2e/ort_run.js" "$1" "$2" "$work/ort_out" \
		--threads "$threads" --warmup "$4" --repeat "$3" 2>"$work/ort.err" >/dev/null ||
		{ cat "$work/ort.err" >&2; return 1; }
	node -e 'const l = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop();
		const r = JSON.parse(l).runs_ms; console.log(r.reduce((a, b) => a + b, 0) / r.length);' "$work/ort.err"
}
rss() { tail -n 1 "$work/rss"; }

rows=$work/rows
: >"$rows"
status=0
# bench NAME BATCH MODEL DATASET [tapc args...]: one row of the table
bench() {
	name=$1 b=$2 model=$3 data=$4
	shift 4
	out=$work/$name-b$b
	rm -rf "$out"
	"$build/tapc" "$model" "$@" -mesh 1x1 -batch="$b" -o "$out" || die "$name b$b: tapc failed"
	make -s -C "$out" >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; die "$name b$b: make failed"; }
	prog=$out/model
	if "$prog" --check "$data" $checkflags >"$work/check.log" 2>&1; then check=ok; else check=FAIL; status=1; cat "$work/check.log" >&2; fi
	raw=$work/$name-b$b.raw
	node "$here/pb2raw.js" "$data" "$raw" || die "$name b$b: pb2raw failed"

	# calibrate: N iterations so that the faster side times >= min_ms
	# (the slower side then times more), unless the slower side would
	# exceed max_ms; warm-up W = N / 10, between 5 and 1000
	o=$(our_ms "$prog" 20 3 "$data")
	r=$(ort_ms "$model" "$raw" 10 3)
	[ -n "$o" ] && [ -n "$r" ] || die "$name b$b: calibration failed"
	n=$(awk -v a="$o" -v b="$r" -v t="$min_ms" -v x="$max_ms" 'BEGIN {
		lo = a < b ? a : b; hi = a < b ? b : a; if (lo <= 0) lo = 1e-4
		n = int(t / lo) + 1; if (n * hi > x) n = int(x / hi) + 1; if (n < 10) n = 10; print n}')
	w=$(awk -v n="$n" 'BEGIN {w = int(n / 10); if (w < 5) w = 5; if (w > 1000) w = 1000; print w}')
	log "$name batch $b: check $check, $n iterations, warm-up $w, $repeats rounds (calibration: ours $o ms, ort $r ms)"

	: >"$work/ours" && : >"$work/ort" && : >"$work/ours_rss" && : >"$work/ort_rss" && : >"$work/ratios"
	i=0
	while [ "$i" -lt "$repeats" ]; do
		o=$(our_ms "$prog" "$n" "$w" "$data")
		[ -n "$o" ] || die "$name b$b: no timing from $prog"
		rss >>"$work/ours_rss"
		r=$(ort_ms "$model" "$raw" "$n" "$w")
		rss >>"$work/ort_rss"
		echo "$o" >>"$work/ours"
		echo "$r" >>"$work/ort"
		awk -v o="$o" -v r="$r" 'BEGIN {printf "%.6g\n", r / o}' >>"$work/ratios"
		log "  round $((i + 1)): ours $o ms, ort $r ms"
		i=$((i + 1))
	done
	om=$(median <"$work/ours")
	rm_=$(median <"$work/ort")
	pr=$(median <"$work/ratios")
	# spread: (max - min) / median, per side, in percent
	os=$(sort -g "$work/ours" | awk -v md="$om" 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f", (hi - lo) / md * 100}')
	rs=$(sort -g "$work/ort" | awk -v md="$rm_" 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f", (hi - lo) / md * 100}')
	orss=$(sort -g "$work/ours_rss" | tail -n 1)
	rrss=$(sort -g "$work/ort_rss" | tail -n 1)
	echo "$name $b $om $rm_ $n $check $os $rs $orss $rrss $pr" >>"$rows"
}

checkflags=
for m in $models; do
	model=$root/test/e2e/$m/model.onnx
	[ -f "$model" ] || die "no fixture $model"
	args=$(cat "$root/test/e2e/$m/args" 2>/dev/null || true)
	for b in $batches; do
		case $b in 1) ds=test_data_set_0 ;; 4) ds=test_data_set_1 ;; *) die "batch $b has no data set" ;; esac
		bench "$m" "$b" "$model" "$root/test/e2e/$m/$ds" $args
	done
done

# the realistic-size models: generated once, at their own batch; their
# outputs are larger sums, so --check allows atol 1e-4
if [ -n "$big" ]; then
	gen=${BENCH_GEN:-$work/models}
	mkdir -p "$gen"
	for m in $big; do
		[ -f "$gen/$m/model.onnx" ] && continue
		log "generating $m into $gen"
		/usr/bin/python3 "$here/gen_models.py" "$gen" "$m" >"$work/gen.log" 2>&1 ||
			{ cat "$work/gen.log" >&2; die "gen_models.py $m failed (needs python3-torch: .ci/setup --fixtures)"; }
	done
	for m in $big; do
		case $m in gpt2s | gpt2s16 | bertb | qffn) b=4 ;; *) b=1 ;; esac
		# a half model against torch's f32 outputs (of its weights rounded
		# to f16) rounded to f16, at test/e2e.sh's half tolerance
		case $m in *16) checkflags="--rtol 2e-2 --atol 2e-2" ;; *) checkflags="--atol 1e-4" ;; esac
		bench "$m" "$b" "$gen/$m/model.onnx" "$gen/$m/test_data_set_0"
	done
fi

# --- report --------------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
gemm=$(sed -n 's/.*rank[s]*, [0-9]* threads*, \(.*\))$/\1/p' "$work/last_bench" 2>/dev/null || true)
# node's own peak RSS with onnxruntime loaded and no session: the part of
# onnxruntime's column that is node, not onnxruntime
ort_base=$(/usr/bin/time -f %M node -e "require('onnxruntime-node')" 2>&1 >/dev/null | tail -n 1)
{
	echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $ncpu CPUs, ${cpu:-unknown CPU}; load average at end: $(cut -d ' ' -f 1-3 /proc/loadavg)"
	echo "tapc $rev; onnxruntime-node $ort_version; $repeats rounds; N for >= $min_ms ms on the faster side, <= $max_ms ms on the slower; $threads thread(s) each side; tapc's GEMM: ${gemm:-?}"
	echo "command: bench/run.sh${BENCH_THREADS:+ (BENCH_THREADS=$threads)}; RSS: peak resident set of the whole process, MiB (node alone with onnxruntime loaded: $(awk -v k="$ort_base" 'BEGIN {printf "%.0f", k / 1024}') MiB)"
	echo
	echo "| model | batch | tapc ms/iter | ort ms/iter | ratio (ort/tapc) | tapc RSS | ort RSS | iters | spread tapc/ort | check |"
	echo "|-------|------:|-------------:|------------:|-----------------:|---------:|--------:|------:|----------------:|-------|"
	awk '{printf "| %s | %d | %.4g | %.4g | %.2f | %.0f | %.0f | %d | %s%%/%s%% | %s |\n", $1, $2, $3, $4, $11, $9 / 1024, $10 / 1024, $5, $7, $8, $6}' "$rows"
	echo
	awk -v t="$target" '
		{ r = $11; n++
		  if (n == 1 || r < min) {min = r; at = $1 " batch " $2}
		  if (r < t) bad = bad " " $1 "/b" $2
		  if ($9 > $10) fat = fat " " $1 "/b" $2 }
		END {
			if (n == 0) {print "No configuration measured"; exit}
			if (bad == "") printf "Every row >= %s: YES (lowest %.2f, %s)\n", t, min, at
			else printf "Every row >= %s: NO (below:%s; lowest %.2f, %s)\n", t, bad, min, at
			if (fat == "") print "Peak RSS <= onnxruntime on every row: YES"
			else print "Peak RSS <= onnxruntime on every row: NO (above:" fat ")"
		}' "$rows"
} >"$work/table"
cat "$work/table"

if [ "$update_readme" = yes ]; then
	readme=$here/README.md
	grep -q '^<!-- results:begin -->$' "$readme" && grep -q '^<!-- results:end -->$' "$readme" ||
		die "$readme lacks the results markers"
	awk -v tbl="$work/table" '
		/^<!-- results:begin -->$/ {print; while ((getline l < tbl) > 0) print l; skip = 1; next}
		/^<!-- results:end -->$/ {skip = 0}
		!skip' "$readme" >"$work/README.md"
	cat "$work/README.md" >"$readme"
	log "updated $readme"
fi
exit "$status"
