#!/bin/sh
# bench/mpi.sh - the mpi backend against the threads backend: memory per
# process and throughput, on a wide MLP heavy in weights (bench/gen_wide.py).
#
# Usage: bench/mpi.sh [BUILD_DIR]
#
#   BUILD_DIR   the build tree holding tapc and a runtime built with MPI
#               (default: build/release, else the source tree)
#
# Memory: the model compiled for one rank (-mesh 1x1) and for four
# (-mesh 1x4 -tp=4); the one-rank program runs alone (threads backend) and
# the four-rank one under mpirun, each process inside /usr/bin/time, whose
# %M is the process's peak resident set (the kernel's maxrss: VmHWM).  The
# table gives each and the largest rank's share of the one-rank program's.
#
# Throughput: three plans of two ranks each, -tp=2, -pp=2 (micro-batches as
# tapc picks) and -dp=2 on -mesh 1x2, each built once and run with
# `--bench N` by the threads backend and by `mpirun -np 2 ... --backend=mpi`
# in alternating rounds (BENCH_REPEATS, default 5), so both see the same
# background load; the table shows the median ms/iteration of each and
# mpi's throughput over threads' (1.00: the same, above 1: mpi faster).
# Both use one BLAS thread per rank (OPENBLAS_NUM_THREADS=1).  Every program
# passes --check first.
#
# Environment: BENCH_BATCH (default 32), BENCH_ITERS (N, default 20),
# BENCH_REPEATS (5), BENCH_WIDTH/BENCH_HIDDEN/BENCH_BLOCKS (the model,
# default 1024/4096/4: 128 MiB of weights), BENCH_WORK (keep the files).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-}
[ -n "$build" ] || { [ -x "$root/build/release/tapc" ] && build=$root/build/release || build=$root; }
build=$(cd "$build" && pwd)
tapc=$build/tapc
batch=${BENCH_BATCH:-32}
iters=${BENCH_ITERS:-20}
repeats=${BENCH_REPEATS:-5}
work=${BENCH_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tapc-mpibench.XXXXXX")}
[ -n "${BENCH_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
mpirun() { command mpirun --oversubscribe "$@"; }

"$tapc" -version >/dev/null
model=$work/wide
[ -f "$model/model.onnx" ] || /usr/bin/python3 "$here/gen_wide.py" "$model" --batch "$batch" \
    --width "${BENCH_WIDTH:-1024}" --hidden "${BENCH_HIDDEN:-4096}" --blocks "${BENCH_BLOCKS:-4}" >&2
data=$model/test_data_set_0

build_plan() { # NAME TAPC-ARGS...: build the program into $work/NAME, check it
	name=$1; shift
	rm -rf "$work/$name"
	"$tapc" "$model/model.onnx" -batch="$batch" "$@" -o "$work/$name"
	make -s -C "$work/$name" >&2
	"$work/$name/model" --check "$data" >/dev/null ||
		{ echo "mpi.sh: $name fails its check" >&2; exit 1; }
	n=$(sed -n 's/^[[:space:]]*\.nranks = \([0-9]*\),/\1/p' "$work/$name/main.c")
	mpirun -np "$n" "$work/$name/model" --backend=mpi --check "$data" >/dev/null ||
		{ echo "mpi.sh: $name fails its check under mpi" >&2; exit 1; }
}

echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(getconf _NPROCESSORS_ONLN) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tapc $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $(mpirun --version | head -1); model: $(du -m "$model/model.onnx" | cut -f1) MB file, batch $batch"
echo

# ------------------------------------------------------------------ memory
build_plan one -mesh 1x1
build_plan tp4 -mesh 1x4 -tp=4
one=$(/usr/bin/time -f %M "$work/one/model" --check "$data" 2>&1 >/dev/null | tail -1)
# each rank's peak to a file of its own ($$: the shell that execs time):
# four ranks' lines through mpirun's one stdout can run together
rm -f "$work"/rss-rank.*
mpirun -np 4 sh -c 'exec /usr/bin/time -o "$2.$$" -f "%M" "$0" --backend=mpi --check "$1" >/dev/null' \
    "$work/tp4/model" "$data" "$work/rss-rank" >"$work/rss.log" 2>&1 || { cat "$work/rss.log" >&2; exit 1; }
cat "$work"/rss-rank.* >"$work/rss"
echo "| program | process | peak RSS (KiB) | of the one-rank program's |"
echo "|---|---|---:|---:|"
echo "| -mesh 1x1, threads | the only one | $one | 100% |"
max=0 k=0
for r in $(grep -E '^[0-9]+$' "$work/rss"); do
	echo "| -mesh 1x4 -tp=4, mpirun -np 4 | one of 4 | $r | $(awk -v a="$r" -v b="$one" 'BEGIN { printf "%.1f%%", 100 * a / b }') |"
	[ "$r" -gt "$max" ] && max=$r
	k=$((k + 1))
done
[ "$k" = 4 ] || { echo "mpi.sh: expected 4 ranks' RSS, got $k" >&2; cat "$work/rss" "$work/rss.log" >&2; exit 1; }
echo
echo "largest rank: $(awk -v a="$max" -v b="$one" 'BEGIN { printf "%.1f%%", 100 * a / b }') of the one-rank program's peak RSS (target <= 40%)"
echo

# -------------------------------------------------------------- throughput
ms_of() { sed -n 's/.*iterations, \([0-9.]*\) ms\/iteration.*/\1/p'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| plan | degrees | threads ms/iter | mpi ms/iter | mpi/threads throughput | spread threads/mpi |"
echo "|---|---|---:|---:|---:|---:|"
worst=9
for plan in tp:-tp=2 pp:-pp=2 dp:-dp=2; do
	name=${plan%%:*}
	build_plan "$name" -mesh 1x2 "${plan#*:}"
	deg=$(sed -n 's/.*"degrees": {"dp": \([0-9]*\), "tp": \([0-9]*\), "pp": \([0-9]*\), "microbatches": \([0-9]*\).*/dp \1 tp \2 pp \3 x\4/p' "$work/$name/plan.json")
	: >"$work/t" && : >"$work/m"
	i=0
	while [ $i -lt "$repeats" ]; do
		"$work/$name/model" --bench "$iters" --inputs "$data" | ms_of >>"$work/t"
		mpirun -np 2 "$work/$name/model" --backend=mpi --bench "$iters" --inputs "$data" | ms_of >>"$work/m"
		i=$((i + 1))
	done
	t=$(median <"$work/t") m=$(median <"$work/m")
	spread() { sort -g "$1" | awk -v med="$2" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f%%", 100 * (hi - lo) / med }'; }
	ratio=$(awk -v t="$t" -v m="$m" 'BEGIN { printf "%.3f", t / m }')
	worst=$(awk -v a="$worst" -v b="$ratio" 'BEGIN { print (b < a ? b : a) }')
	echo "| -mesh 1x2 ${plan#*:} | $deg | $t | $m | $ratio | $(spread "$work/t" "$t")/$(spread "$work/m" "$m") |"
done
echo
echo "lowest mpi/threads throughput: $worst (target >= 0.90); load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
