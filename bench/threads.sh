#!/bin/sh
# bench/threads.sh - intra-op and tensor-parallel scaling on two cores, with
# onnxruntime as the peer.
#
# Usage: bench/threads.sh [BUILD_DIR]
#
# For every model of BENCH_BIG (default "gpt2s bertb resnet18 mnv3 segnet",
# written by bench/gen_models.py into BENCH_GEN, reused when there) it
# builds the one-rank program and times, in each of BENCH_REPEATS rounds
# (default 5), ours with --threads 1 and --threads 2 and onnxruntime with
# intraOpNumThreads 1 and 2, one after the other; then the tensor-parallel
# program (-mesh 1x2 -tp=2, threads backend, one thread per rank) of each
# model of BENCH_TP (default gpt2s) against its one-rank program.  The ms
# columns are medians of the rounds; a speedup is the median over the
# rounds of that round's 1-thread ms / 2-thread ms (or one rank / two):
# its two runs are back to back, so a slow phase of the host weighs on
# both, as in run.sh's ratio.
# The targets (issue 17): >= 1.8x from 1 to 2 threads on these models, >=
# 1.7x for tp=2 on gpt2s.  Both need two idle cores: on a machine shared
# with other work the 2-thread numbers mostly measure the neighbours
# (compare the load average printed at the end).  On a virtual machine
# they also follow where the host put the two vCPUs: bench/xcore.c's
# cross-core hand-over, printed at the start and the end, is 1.0x on some
# placements and 3x on others, and writing over lines the other core read
# 9x and more a core's own, and the host changes placement within
# minutes.  So xcore.c reads the placement before and after each round
# (reading the other core's data / one's own: about 1.0x near, 3x far),
# and each row counts its rounds that ran near, far, or across a change,
# and gives the speedups again over its near rounds alone ("-": none).
# Each round also runs two one-thread copies of our program at once, each
# with its own memory and nothing shared: "two copies' bound" is the
# median over the rounds of 2 x one thread's ms / the copies' mean ms, the
# throughput the two vCPUs give to work that never communicates in that
# minute.  A 2-thread (or tp=2) speedup under it is what sharing the work
# costs; the bound under 2x is what the host takes (memory, L3, a slower
# vCPU) before any of our code.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-$root}" && pwd)
big=${BENCH_BIG-gpt2s bertb resnet18 mnv3 segnet}
tp=${BENCH_TP-gpt2s}
repeats=${BENCH_REPEATS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-threads.XXXXXX")
trap 'rm -rf "$work"' EXIT
gen=${BENCH_GEN:-$work/models}
ort_dir=${ORT_DIR:-/tmp/ort}
[ -d "$here/node_modules/onnxruntime-node" ] && ort_dir=$here
NODE_PATH=$ort_dir/node_modules
export NODE_PATH
die() { echo "threads.sh: $*" >&2; exit 1; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# speedup A B -> the median of the rounds' A[i] / B[i]
speedup() { paste "$1" "$2" | awk '{print $1 / $2}' | median; }
# near_speedup A B -> the same over the rounds tagged n in $work/tags, or -
near_speedup() {
	paste "$1" "$2" "$work/tags" | awk '$3 == "n" {print $1 / $2}' >"$work/near"
	if [ -s "$work/near" ]; then median <"$work/near" | awk '{printf "%.2fx", $1}'; else echo -; fi
}
# ours PROG N THREADS DATA -> ms/iteration
ours() {
	"$1" --bench "$2" --warmup 2 --threads "$3" --inputs "$4" |
		sed -n 's/.* ms\/iteration, \([0-9.eE+-]*\) samples\/s (batch \([0-9]*\),.*/\2 \1/p' |
		awk '{printf "%.6g\n", $1 * 1000 / $2}'
}
# ort MODEL RAW N THREADS -> mean ms/iteration
ort() {
	node "$root/test/e2e/ort_run.js" "$1" "$2" "$work/out" --threads "$4" --warmup 2 --repeat "$3" \
		2>"$work/err" >/dev/null || { cat "$work/err" >&2; return 1; }
	node -e 'const l = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop();
		const r = JSON.parse(l).runs_ms; console.log(r.reduce((a, b) => a + b, 0) / r.length);' "$work/err"
}
# iterations PROG DATA -> N for about 3 s of PROG on one thread (at least 5)
iterations() {
	awk -v t="$(ours "$1" 3 1 "$2")" 'BEGIN {n = int(3000 / t) + 1; print n < 5 ? 5 : n}'
}
batch() { case $1 in gpt2s | bertb) echo 4 ;; *) echo 1 ;; esac; }
# copies PROG N DATA -> the mean ms/iteration of two one-thread copies of
# PROG run at once
copies() {
	ours "$1" "$2" 1 "$3" >"$work/c0" &
	p=$!
	ours "$1" "$2" 1 "$3" >"$work/c1"
	wait "$p" || return 1
	cat "$work/c0" "$work/c1" | awk '{s += $1} END {if (NR == 2) print s / 2}'
}
# bound A C -> the median over the rounds of 2 A[i] / C[i] (two copies' bound)
bound() { paste "$1" "$2" | awk '{print 2 * $1 / $2}' | median | awk '{printf "%.2fx", $1}'; }

mkdir -p "$gen"
# what reading the other core's fresh data costs here, now and at the end
# (bench/xcore.c), and what writing over bytes the other core read costs:
# the 2-thread numbers of the CNNs follow both
cc -O3 -march=native -pthread -o "$work/xcore" "$here/xcore.c" || die "cannot compile xcore.c"
xcore() {
	"$work/xcore" | awk '{printf "1 MiB read %.1f us on its own core, %.1f us on the other (%.2fx); written over %.1f us, %.1f us after the other core read it (%.2fx)", $2, $3, $4, $5, $6, $7}'
}
# placement -> n (near: the other core's data read at under 2x one's own)
# or f (far), from 200 rounds of xcore.c (about 0.1 s)
placement() { "$work/xcore" 200 | awk '{print $4 < 2 ? "n" : "f"}'; }
# tag: append the round's tag to $work/tags: n or f when the placement
# after it is $before, the one read before it, c when it changed; the
# reading after is the next round's before
tag() { a=$(placement); if [ "$a" = "$before" ]; then echo "$a"; else echo c; fi >>"$work/tags"; before=$a; }
# placements -> "near N, far F, changed C" from $work/tags
placements() { awk '{c[$1]++} END {printf "near %d, far %d, changed %d", c["n"], c["f"], c["c"]}' "$work/tags"; }
xstart=$(xcore)
for m in $big $tp; do
	[ -f "$gen/$m/model.onnx" ] || /usr/bin/python3 "$here/gen_models.py" "$gen" "$m" >/dev/null 2>&1 ||
		die "gen_models.py $m failed (needs python3-torch)"
done
echo "| model | tapc 1 thr ms | tapc 2 thr ms | tapc speedup | two copies' bound | ort 1 thr ms | ort 2 thr ms | ort speedup | ratio at 2 thr (ort/tapc) | rounds' placement | tapc speedup, near rounds | ort speedup, near rounds |"
echo "|-------|------:|------:|-----:|-----:|------:|------:|-----:|-----:|-----|-----:|-----:|"
for m in $big; do
	b=$(batch "$m")
	"$build/tapc" "$gen/$m/model.onnx" -mesh 1x1 -batch="$b" -o "$work/$m" && make -s -C "$work/$m" >/dev/null ||
		die "$m: build failed"
	node "$here/pb2raw.js" "$gen/$m/test_data_set_0" "$work/$m.raw"
	n=$(iterations "$work/$m/model" "$gen/$m/test_data_set_0")
	: >"$work/o1"; : >"$work/o2"; : >"$work/cc"; : >"$work/r1"; : >"$work/r2"; : >"$work/tags"
	i=0
	before=$(placement)
	while [ "$i" -lt "$repeats" ]; do
		ours "$work/$m/model" "$n" 1 "$gen/$m/test_data_set_0" >>"$work/o1"
		ours "$work/$m/model" "$n" 2 "$gen/$m/test_data_set_0" >>"$work/o2"
		copies "$work/$m/model" "$n" "$gen/$m/test_data_set_0" >>"$work/cc"
		ort "$gen/$m/model.onnx" "$work/$m.raw" "$n" 1 >>"$work/r1"
		ort "$gen/$m/model.onnx" "$work/$m.raw" "$n" 2 >>"$work/r2"
		tag
		i=$((i + 1))
	done
	o1=$(median <"$work/o1"); o2=$(median <"$work/o2"); r1=$(median <"$work/r1"); r2=$(median <"$work/r2")
	so=$(speedup "$work/o1" "$work/o2"); sr=$(speedup "$work/r1" "$work/r2"); q=$(speedup "$work/r2" "$work/o2")
	awk -v m="$m" -v o1="$o1" -v o2="$o2" -v r1="$r1" -v r2="$r2" -v so="$so" -v sr="$sr" -v q="$q" \
	    -v cb="$(bound "$work/o1" "$work/cc")" -v w="$(placements)" \
	    -v no="$(near_speedup "$work/o1" "$work/o2")" -v nr="$(near_speedup "$work/r1" "$work/r2")" 'BEGIN {
		printf "| %s | %.4g | %.4g | %.2fx | %s | %.4g | %.4g | %.2fx | %.2f | %s | %s | %s |\n", m, o1, o2, so, cb, r1, r2, sr, q, w, no, nr}'
done
if [ -n "$tp" ]; then
	echo
	echo "| model | one rank ms | tp=2 (1x2, threads backend) ms | speedup | two copies' bound | rounds' placement | speedup, near rounds |"
	echo "|-------|------:|------:|-----:|-----:|-----|-----:|"
fi
for m in $tp; do
	b=$(batch "$m")
	[ -x "$work/$m/model" ] || { "$build/tapc" "$gen/$m/model.onnx" -mesh 1x1 -batch="$b" -o "$work/$m" && make -s -C "$work/$m" >/dev/null; }
	"$build/tapc" "$gen/$m/model.onnx" -mesh 1x2 -tp=2 -batch="$b" -o "$work/$m-tp2" && make -s -C "$work/$m-tp2" >/dev/null ||
		die "$m: tp=2 build failed"
	"$work/$m-tp2/model" --check "$gen/$m/test_data_set_0" --atol 1e-4 >/dev/null || die "$m: tp=2 fails --check"
	n=$(iterations "$work/$m/model" "$gen/$m/test_data_set_0")
	: >"$work/o1"; : >"$work/o2"; : >"$work/cc"; : >"$work/tags"
	i=0
	before=$(placement)
	while [ "$i" -lt "$repeats" ]; do
		ours "$work/$m/model" "$n" 1 "$gen/$m/test_data_set_0" >>"$work/o1"
		ours "$work/$m-tp2/model" "$n" 1 "$gen/$m/test_data_set_0" >>"$work/o2"
		copies "$work/$m/model" "$n" "$gen/$m/test_data_set_0" >>"$work/cc"
		tag
		i=$((i + 1))
	done
	o1=$(median <"$work/o1"); o2=$(median <"$work/o2"); so=$(speedup "$work/o1" "$work/o2")
	awk -v m="$m" -v o1="$o1" -v o2="$o2" -v so="$so" -v cb="$(bound "$work/o1" "$work/cc")" \
	    -v w="$(placements)" -v no="$(near_speedup "$work/o1" "$work/o2")" 'BEGIN {
		printf "| %s | %.4g | %.4g | %.2fx | %s | %s | %s |\n", m, o1, o2, so, cb, w, no}'
done
echo
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(getconf _NPROCESSORS_ONLN) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1); load average at end: $(cut -d ' ' -f 1-3 /proc/loadavg); $repeats rounds"
echo "Cross-core hand-over (bench/xcore.c): at the start $xstart; at the end $(xcore)"
