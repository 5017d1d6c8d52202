#!/bin/sh
# calibrate.sh - the planner's predictions against measured throughput.
#
# Usage: bench/calibrate.sh [BUILD_DIR]   (default build/release)
#
# For N in 2 and 4: runtime/taprt-calibrate --devices N writes this
# machine's cluster file (GEMM FLOP/s per rank with N ranks running, the
# threads backend's all-reduce latency and bandwidth).  Then for the gpt
# and bert fixtures at batch BATCH (default 16), every candidate plan of a
# 1xN mesh (every dp x tp x pp = N with pp at most the model's subgraphs,
# every micro-batch count; placements are all alike on one node) is
# compiled with that cluster and -cost=objective=infer (the programs run
# the forward pass), its predicted seconds per batch read from plan.json,
# built, and timed with --bench (ROUNDS rounds, default 3, interleaved over
# the candidates; the median).  Prints each candidate's prediction and
# measurement, then per model and mesh the Spearman rank correlation of
# predicted and measured time and how far the predicted best's measured
# time is from the measured best.  Targets: Spearman >= 0.8, within 10%.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
cal=$build/runtime/taprt-calibrate
batch=${BATCH:-16}
rounds=${ROUNDS:-3}
iters=${ITERS:-20}
[ -x "$tapc" ] && [ -x "$cal" ] || { echo "calibrate.sh: build first ($build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-calibrate.XXXXXX")
trap 'rm -rf "$work"' EXIT

divisors() { n=$1; d=1; while [ $d -le $n ]; do [ $((n % d)) = 0 ] && echo $d; d=$((d + 1)); done; }

: >"$work/rows"
for N in 2 4; do
	"$cal" --devices $N -o "$work/cluster$N.json"
	sed 's/^/  /' "$work/cluster$N.json"
	for model in gpt bert; do
		m="$top/test/e2e/$model/model.onnx"
		for dp in $(divisors $N); do
			for tp in $(divisors $((N / dp))); do
				pp=$((N / dp / tp))
				[ $((batch % dp)) = 0 ] || continue
				for M in $(divisors $((batch / dp))); do
					out="$work/$model-$N-$dp-$tp-$pp-$M"
					if ! "$tapc" "$m" -cluster="$work/cluster$N.json" -cost=objective=infer \
					    -batch=$batch -dp=$dp -tp=$tp -pp=$pp -microbatches=$M -o "$out" \
					    2>/dev/null; then
						continue        # more stages than subgraphs
					fi
					make -s -C "$out" >/dev/null 2>&1 || { echo "make failed: $out" >&2; exit 1; }
					pred=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["search"]["chosen"]["predicted_seconds"])' "$out/plan.json")
					echo "$model $N $dp $tp $pp $M $pred $out" >>"$work/rows"
				done
			done
		done
	done
done
# the measurements, interleaved: every candidate once per round
for r in $(seq "$rounds"); do
	while read -r model N dp tp pp M pred out; do
		"$out/model" --bench "$iters" --warmup 3 2>/dev/null |
		    sed -n 's/.* \([0-9.e+-]*\) ms\/iteration.*/\1/p' >>"$out/ms"
	done <"$work/rows"
done
: >"$work/table"
while read -r model N dp tp pp M pred out; do
	ms=$(sort -g "$out/ms" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "$model $N $dp $tp $pp $M $pred $ms" >>"$work/table"
done <"$work/rows"
/usr/bin/python3 - "$work/table" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1])]

def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r

def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy)

status = 0
print("%-5s %4s %4s %4s %4s %5s %14s %12s" % ("model", "mesh", "dp", "tp", "pp", "micro",
                                            "predicted_ms", "measured_ms"))
groups = {}
for model, N, dp, tp, pp, M, pred, ms in rows:
    print("%-5s %4s %4s %4s %4s %5s %14.4f %12.4f" % (model, "1x" + N, dp, tp, pp, M,
                                                   float(pred) * 1e3, float(ms)))
    groups.setdefault((model, N), []).append((float(pred), float(ms), (dp, tp, pp, M)))
print()
print("%-5s %5s %10s %9s %-24s %-24s %9s" % ("model", "mesh", "candidates", "spearman",
                                              "predicted best", "measured best", "best gap"))
for (model, N), g in groups.items():
    s = spearman([p for p, _, _ in g], [m for _, m, _ in g])
    pb = min(g, key=lambda x: x[0])
    mb = min(g, key=lambda x: x[1])
    gap = pb[1] / mb[1] - 1
    name = lambda c: "dp%s tp%s pp%s M%s" % c[2]
    print("%-5s %5s %10d %9.3f %-24s %-24s %8.1f%%" % (model, "1x" + N, len(g), s, name(pb),
                                                      name(mb), gap * 100))
    if s < 0.8 or gap > 0.10:
        status = 1
sys.exit(status)
EOF
