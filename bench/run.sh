#!/bin/sh
# bench/run.sh - single-thread CPU benchmark of tapc-compiled programs against
# onnxruntime on the end-to-end fixtures (test/e2e: gpt, bert, ln17, mlp, cnn).
#
# Usage: bench/run.sh [--update-readme] [BUILD_DIR]
#
#   BUILD_DIR        the build tree holding tapc and runtime/.libs/libtaprt.a
#                    (default: the source tree, i.e. an in-tree build)
#   --update-readme  also write the table into bench/README.md (between the
#                    "results" markers), with the date and the machine
#
# For every fixture and batch (1: test_data_set_0, 4: test_data_set_1, compiled
# with -batch=B) it compiles and builds the program (tapc -mesh 1x1), checks
# its outputs against the fixture (--check), converts the same inputs for
# test/e2e/ort_run.js, calibrates an iteration count N so that the faster
# side runs >= BENCH_MIN_MS of timed work, then runs BENCH_REPEATS rounds,
# each round one run of ours (--bench N --warmup W) followed by one run of
# onnxruntime (--warmup W --repeat N, intra-op 1, inter-op 1, sequential).
# Each run yields a mean ms/iteration; the table shows the median over the
# rounds for each side and ratio = ort_ms / our_ms (our throughput relative
# to onnxruntime's; > 1 means we are faster).  The last line says whether
# every transformer fixture (gpt, bert, ln17) reaches BENCH_TARGET (0.8).
#
# Environment:
#   BENCH_MODELS   fixtures to run (default "gpt bert ln17 mlp cnn")
#   BENCH_BATCHES  batches (default "1 4"; only 1 and 4 have data sets)
#   BENCH_REPEATS  rounds per configuration (default 5)
#   BENCH_MIN_MS   minimum timed work per run, in ms (default 1000)
#   BENCH_MAX_MS   cap on the slower side's timed work per run (default 30000;
#                  when it binds, the faster side times less than BENCH_MIN_MS)
#   BENCH_TARGET   ratio the transformer fixtures should reach (default 0.8)
#   BENCH_WORK     work directory (default: a fresh mktemp -d, removed at exit)
#   ORT_DIR        a directory whose node_modules/ holds onnxruntime-node
#
# Both sides run on one thread: our programs default to --threads 1 (one
# OpenBLAS thread), and OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 are
# exported; ort_run.js sets intraOpNumThreads 1, interOpNumThreads 1 and
# sequential execution.  onnxruntime-node is installed into bench/node_modules
# on first use (npm install --ignore-scripts), unless ORT_DIR or /tmp/ort
# already provide it.  Exit status: 0 when every configuration was measured
# and passed --check, 1 otherwise (the verdict line does not change it).
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

models=${BENCH_MODELS:-gpt bert ln17 mlp cnn}
batches=${BENCH_BATCHES:-1 4}
repeats=${BENCH_REPEATS:-5}
min_ms=${BENCH_MIN_MS:-1000}
max_ms=${BENCH_MAX_MS:-30000}
target=${BENCH_TARGET:-0.8}

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

# --- one thread everywhere -----------------------------------------------------
OPENBLAS_NUM_THREADS=1
OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS OMP_NUM_THREADS

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
# per iteration as B * 1000 / Y (Y has more significant digits than X)
our_ms() {
	"$1" --bench "$2" --warmup "$3" --inputs "$4" |
		sed -n 's/.* ms\/iteration, \([0-9.eE+-]*\) samples\/s (batch \([0-9]*\),.*/\2 \1/p' |
		awk '$2 > 0 {printf "%.6g\n", $1 * 1000 / $2}'
}
# onnxruntime: mean of the per-run times ort_run.js reports on stderr
ort_ms() {
	node "$root/test/e2e/ort_run.js" "$1" "$2" "$work/ort_out" --threads 1 --warmup "$4" --repeat "$3" \
		2>"$work/ort.err" >/dev/null || { cat "$work/ort.err" >&2; return 1; }
	node -e 'const l = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop();
		const r = JSON.parse(l).runs_ms; console.log(r.reduce((a, b) => a + b, 0) / r.length);' "$work/ort.err"
}

rows=$work/rows
: >"$rows"
status=0
for m in $models; do
	model=$root/test/e2e/$m/model.onnx
	[ -f "$model" ] || die "no fixture $model"
	for b in $batches; do
		case $b in 1) ds=test_data_set_0 ;; 4) ds=test_data_set_1 ;; *) die "batch $b has no data set" ;; esac
		data=$root/test/e2e/$m/$ds
		out=$work/$m-b$b
		rm -rf "$out"
		"$build/tapc" "$model" -mesh 1x1 -batch="$b" -o "$out" || die "$m b$b: tapc failed"
		make -s -C "$out" >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; die "$m b$b: make failed"; }
		prog=$out/model
		if "$prog" --check "$data" >"$work/check.log" 2>&1; then check=ok; else check=FAIL; status=1; cat "$work/check.log" >&2; fi
		raw=$work/$m-b$b.raw
		node "$here/pb2raw.js" "$data" "$raw" || die "$m b$b: pb2raw failed"

		# calibrate: N iterations so that the faster side times >= min_ms
		# (the slower side then times more), unless the slower side would
		# exceed max_ms; warm-up W = N / 10, between 5 and 1000
		o=$(our_ms "$prog" 200 20 "$data")
		r=$(ort_ms "$model" "$raw" 50 10)
		[ -n "$o" ] && [ -n "$r" ] || die "$m b$b: calibration failed"
		n=$(awk -v a="$o" -v b="$r" -v t="$min_ms" -v x="$max_ms" 'BEGIN {
			lo = a < b ? a : b; hi = a < b ? b : a; if (lo <= 0) lo = 1e-4
			n = int(t / lo) + 1; if (n * hi > x) n = int(x / hi) + 1; if (n < 10) n = 10; print n}')
		w=$(awk -v n="$n" 'BEGIN {w = int(n / 10); if (w < 5) w = 5; if (w > 1000) w = 1000; print w}')
		log "$m batch $b: check $check, $n iterations, warm-up $w, $repeats rounds (calibration: ours $o ms, ort $r ms)"

		: >"$work/ours" && : >"$work/ort"
		i=0
		while [ "$i" -lt "$repeats" ]; do
			o=$(our_ms "$prog" "$n" "$w" "$data")
			[ -n "$o" ] || die "$m b$b: no timing from $prog"
			r=$(ort_ms "$model" "$raw" "$n" "$w")
			echo "$o" >>"$work/ours"
			echo "$r" >>"$work/ort"
			log "  round $((i + 1)): ours $o ms, ort $r ms"
			i=$((i + 1))
		done
		om=$(median <"$work/ours")
		rm_=$(median <"$work/ort")
		# spread: (max - min) / median, per side, in percent
		os=$(sort -g "$work/ours" | awk -v md="$om" 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f", (hi - lo) / md * 100}')
		rs=$(sort -g "$work/ort" | awk -v md="$rm_" 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f", (hi - lo) / md * 100}')
		echo "$m $b $om $rm_ $n $check $os $rs" >>"$rows"
	done
done

# --- report --------------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
{
	echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $ncpu CPUs, ${cpu:-unknown CPU}; load average at end: $(cut -d ' ' -f 1-3 /proc/loadavg)"
	echo "tapc $rev; onnxruntime-node $ort_version; $repeats rounds; N for >= $min_ms ms on the faster side, <= $max_ms ms on the slower; one thread each side"
	echo
	echo "| model | batch | tapc ms/iter | ort ms/iter | ratio (ort/tapc) | iters | spread tapc/ort | check |"
	echo "|-------|------:|-------------:|------------:|-----------------:|------:|----------------:|-------|"
	awk '{printf "| %s | %d | %.4g | %.4g | %.2f | %d | %s%%/%s%% | %s |\n", $1, $2, $3, $4, $4 / $3, $5, $7, $8, $6}' "$rows"
	echo
	awk -v t="$target" '
		$1 == "gpt" || $1 == "bert" || $1 == "ln17" {
			r = $4 / $3; n++
			if (n == 1 || r < min) {min = r; at = $1 " batch " $2}
			if (r < t) {bad = bad " " $1 "/b" $2}
		}
		END {
			if (n == 0) {print "Transformer fixtures (gpt, bert, ln17): none measured"; exit}
			if (bad == "") printf "Transformer fixtures (gpt, bert, ln17) >= %s: YES (lowest %.2f, %s)\n", t, min, at
			else printf "Transformer fixtures (gpt, bert, ln17) >= %s: NO (below:%s; lowest %.2f, %s)\n", t, bad, min, at
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
