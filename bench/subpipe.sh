#!/bin/sh
# subpipe.sh - Merak's sub-pipelined TMP (-subpipeline) against plain TMP.
#
# Usage: bench/subpipe.sh [BUILD_DIR]   (default build/release)
#
# The GPT fixture (test/train/gpt_untied, MODEL= another) is compiled for
# training at -batch=BATCH (default 16) and -mesh 1x2 -tp=2 (both cores,
# one micro-batch per step), once plain and once with -subpipeline (each
# micro-batch as two halves taking turns at every TP all-reduce), and
# each is timed with --bench-train ITERS (default 200) after 3 warm-up
# steps, ROUNDS rounds (default 5) interleaved, the median: with the
# threads backend, and with the mpi backend (mpirun -np 2) when the
# runtime has it.  Prints one row per backend: plain ms, sub-pipelined
# ms, plain / sub-pipelined (above 1: the overlap gains).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
batch=${BATCH:-16}
rounds=${ROUNDS:-5}
iters=${ITERS:-200}
model=${MODEL:-$top/test/train/gpt_untied/model.onnx}
args=$(cat "$(dirname "$model")/sgd/args" 2>/dev/null || echo -optimizer=sgd)
[ -x "$tapc" ] || { echo "subpipe.sh: build first ($build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-subpipe.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl=self,vader

for v in plain sub; do
	flag=; [ $v = sub ] && flag=-subpipeline
	"$tapc" "$model" -train $args -batch="$batch" -mesh 1x2 -tp=2 $flag -o "$work/$v" >/dev/null
	make -s -C "$work/$v" >/dev/null
done
backends=threads
if command -v mpirun >/dev/null 2>&1 && "$work/plain/model" --help 2>&1 | grep -q 'mpi'; then
	backends="threads mpi"
fi
# one DIR BACKEND -> ms per step of one --bench-train run
one() {
	if [ "$2" = mpi ]; then
		mpirun --oversubscribe -np 2 "$1/model" --backend=mpi --bench-train "$iters" --warmup 3
	else
		"$1/model" --bench-train "$iters" --warmup 3
	fi 2>/dev/null | sed -n 's/.* \([0-9.e+-]*\) ms\/step.*/\1/p' | head -1
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "GPT fixture, -batch=$batch -mesh 1x2 -tp=2, $iters steps x $rounds rounds (median), $(nproc) cores"
printf '%-8s %12s %16s %8s\n' backend "plain ms" "subpipeline ms" gain
for be in $backends; do
	: >"$work/plain.$be"
	: >"$work/sub.$be"
	for r in $(seq "$rounds"); do
		one "$work/plain" $be >>"$work/plain.$be"
		one "$work/sub" $be >>"$work/sub.$be"
	done
	p=$(median <"$work/plain.$be")
	s=$(median <"$work/sub.$be")
	printf '%-8s %12.3f %16.3f %8.3f\n' "$be" "$p" "$s" "$(echo "$p / $s" | bc -l)"
done
