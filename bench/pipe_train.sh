#!/bin/sh
# pipe_train.sh - pipeline training steps: measured against the simulator.
#
# Usage: bench/pipe_train.sh [BUILD_DIR]   (default build/release)
#
# runtime/taprt-calibrate --devices 2 writes this machine's cluster file;
# then the GPT fixture (test/train/gpt_untied) at batch BATCH (default 16)
# is compiled for training at -mesh 1x2 -pp=2 -microbatches=M (default 4)
# under each schedule (gpipe, 1f1b, merak), without and with
# -recompute=all, and with -slice (AutoPipe's slicer) and no recomputation,
# with that cluster.  Each program's predicted step is
# plan.json's pipeline.schedule.simulated_seconds (the schedule pass's
# simulation of its own step lists on stage-assign's stage times); each is
# timed with --bench-train ITERS (default 20) after 3 warm-up steps,
# ROUNDS rounds (default 3) interleaved, the median.  Prints one row per
# program: predicted ms, measured ms, measured / predicted (target:
# within 15%); then per schedule the slicer's gain, unsliced / sliced
# step, predicted and measured.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
cal=$build/runtime/taprt-calibrate
batch=${BATCH:-16}
micro=${MICRO:-4}
rounds=${ROUNDS:-3}
iters=${ITERS:-20}
model=${MODEL:-$top/test/train/gpt_untied/model.onnx}
[ -x "$tapc" ] && [ -x "$cal" ] || { echo "pipe_train.sh: build first ($build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-pipe-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$cal" --devices 2 -o "$work/cluster.json"
: >"$work/rows"
for rec in none all slice; do
	for s in gpipe 1f1b merak; do
		out="$work/$s-$rec"
		flags="-recompute=$rec"
		[ $rec = slice ] && flags="-recompute=none -slice"
		"$tapc" "$model" -train -batch=$batch -cluster="$work/cluster.json" -pp=2 \
		    -microbatches=$micro -schedule=$s $flags -o "$out"
		make -s -C "$out" >/dev/null
		pred=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["pipeline"]["schedule"]["simulated_seconds"] * 1e3)' "$out/plan.json")
		echo "$s $rec $pred $out" >>"$work/rows"
	done
done
for r in $(seq "$rounds"); do
	while read -r s rec pred out; do
		"$out/model" --bench-train "$iters" --warmup 3 2>/dev/null |
		    sed -n 's/.* \([0-9.e+-]*\) ms\/step.*/\1/p' >>"$out/ms"
	done <"$work/rows"
done
printf '%-6s %-9s %12s %12s %9s\n' schedule recompute "predicted ms" "measured ms" ratio
while read -r s rec pred out; do
	ms=$(sort -g "$out/ms" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "$ms" >"$out/median"
	awk -v s="$s" -v r="$rec" -v p="$pred" -v m="$ms" \
	    'BEGIN { printf "%-6s %-9s %12.4f %12.4f %9.3f\n", s, r, p, m, m / p }'
done <"$work/rows"
# the slicer: the same schedule without recomputation, unsliced / sliced
printf '\n%-6s %7s %16s %15s\n' schedule sliced "predicted gain" "measured gain"
for s in gpipe 1f1b merak; do
	n=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["pipeline"]["schedule"]["slice"]["sliced"])' "$work/$s-slice/plan.json")
	p0=$(awk -v s=$s '$1 == s && $2 == "none" { print $3 }' "$work/rows")
	p1=$(awk -v s=$s '$1 == s && $2 == "slice" { print $3 }' "$work/rows")
	awk -v s="$s" -v n="$n" -v p0="$p0" -v p1="$p1" -v m0="$(cat "$work/$s-none/median")" \
	    -v m1="$(cat "$work/$s-slice/median")" \
	    'BEGIN { printf "%-6s %7d %16.3f %15.3f\n", s, n, p0 / p1, m0 / m1 }'
done
