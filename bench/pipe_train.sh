#!/bin/sh
# pipe_train.sh - pipeline training steps: measured against the simulator.
#
# Usage: bench/pipe_train.sh [BUILD_DIR]   (default build/release)
#
# runtime/taprt-calibrate --devices 2 writes this machine's cluster file;
# then AMP's alpha (eq. 3: "obtained by profiling or improved by further
# real trials") is fitted by one real trial: the one-rank training program
# of one micro-batch (BATCH/M rows, the cluster cut to one device) is
# compiled with alpha 1 and 2 (its prediction is linear in alpha), timed
# like the others, and alpha solved so its prediction is what it measured
# (CALIBRATE=0 keeps alpha 1).
# Then the GPT fixture (test/train/gpt_untied) at batch BATCH (default 16)
# is compiled for training at -mesh 1x2 -pp=2 -microbatches=M (default 4)
# under each schedule (gpipe, 1f1b, merak), without and with
# -recompute=all, and with -slice (AutoPipe's slicer) and no recomputation,
# with that cluster.  Each program's predicted step is
# plan.json's pipeline.schedule.simulated_seconds (the schedule pass's
# simulation of its own step lists on stage-assign's stage times); each is
# timed with --bench-train ITERS (default 200) after 3 warm-up steps,
# ROUNDS rounds (default 5) interleaved, the median.  Prints one row per
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
rounds=${ROUNDS:-5}
iters=${ITERS:-200}
model=${MODEL:-$top/test/train/gpt_untied/model.onnx}
[ -x "$tapc" ] && [ -x "$cal" ] || { echo "pipe_train.sh: build first ($build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-pipe-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

# the cross-core hand-over (bench/xcore.c): the two stages' threads pass
# activations between cores, which a virtual machine's vCPU placement
# makes 1.2x or 3x a core's own read; printed at the start and the end
cc -O3 -march=native -pthread -o "$work/xcore" "$top/bench/xcore.c"
xcore() { "$work/xcore" | awk '{printf "%.2fx", $4}'; }
xstart=$(xcore)
"$cal" --devices 2 -o "$work/cluster.json"
# predicted DIR -> the plan's predicted step, ms
predicted() {
	/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("pipeline", {}).get("schedule", {}).get("simulated_seconds")
print((p if p is not None else d["search"]["chosen"]["predicted_seconds"]) * 1e3)' "$1/plan.json"
}
# measured DIR -> the median of ROUNDS --bench-train runs, ms
measured() {
	for r in $(seq "$rounds"); do
		"$1/model" --bench-train "$iters" --warmup 3 2>/dev/null |
		    sed -n 's/.* \([0-9.e+-]*\) ms\/step.*/\1/p'
	done | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
# with_alpha A OUT [DEVICES]: the cluster file with alpha A (and DEVICES)
with_alpha() {
	/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["alpha"] = float(sys.argv[2])
if len(sys.argv) > 4: d["nodes"][0]["devices"] = int(sys.argv[4])
json.dump(d, open(sys.argv[3], "w"))' "$work/cluster.json" "$@"
}
alpha=1
if [ "${CALIBRATE:-1}" = 1 ]; then
	for a in 1 2; do
		with_alpha $a "$work/alpha$a.json" 1
		"$tapc" "$model" -train -batch=$((batch / micro)) -cluster="$work/alpha$a.json" \
		    -o "$work/one$a" >/dev/null
	done
	make -s -C "$work/one1" >/dev/null
	p1=$(predicted "$work/one1")
	p2=$(predicted "$work/one2")
	m1=$(measured "$work/one1")
	alpha=$(awk -v p1="$p1" -v p2="$p2" -v m="$m1" 'BEGIN { printf "%.4g", 1 + (m - p1) / (p2 - p1) }')
	printf 'calibration: one rank, %d rows: predicted %.4f ms at alpha 1, measured %.4f ms: alpha %s\n\n' \
	    $((batch / micro)) "$p1" "$m1" "$alpha"
fi
with_alpha "$alpha" "$work/calibrated.json"
: >"$work/rows"
for rec in none all slice; do
	for s in gpipe 1f1b merak; do
		out="$work/$s-$rec"
		flags="-recompute=$rec"
		[ $rec = slice ] && flags="-recompute=none -slice"
		"$tapc" "$model" -train -batch=$batch -cluster="$work/calibrated.json" -pp=2 \
		    -microbatches=$micro -schedule=$s $flags -o "$out"
		make -s -C "$out" >/dev/null
		pred=$(predicted "$out")
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
echo
echo "cross-core hand-over (bench/xcore.c, other core / own core): $xstart at the start, $(xcore) at the end"
