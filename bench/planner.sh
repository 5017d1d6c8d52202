#!/bin/sh
# planner.sh - mesh-map against Megatron's rule, annealing against
# exhaustive search, and the planning time (docs/planner.md).
#
# Usage: bench/planner.sh [BUILD_DIR]   (default build/release)
#
# Generates GPT-2 medium at AMP's sizes (bench/gen_gpt2.py: 24 blocks,
# hidden 1024, 16 heads, sequence 1024, vocabulary 50257, batch 32; the
# weights a sparse file) and plans it for a training step on:
#   amp-5.2      AMP §5.2's heterogeneous cluster (bench/clusters/amp-5.2.json)
#   amp-5.1      AMP §5.1's homogeneous one (amp-5.1.json)
#   mixed-1024   1024 devices of two kinds (mixed-1024.json), batch 32 and 512
# Prints per cluster the chosen plan and Megatron's rule (AMP §5, on the
# same cost model, computed in the same run), their predicted seconds per
# iteration and the speedup; the whole tapc run's wall time (load, every
# pass, plan.json; median of BENCH_RUNS, default 5) and the search's own.
# Then simulated annealing (-search=anneal, seeds 1 to 10) against the
# exhaustive search on each: the worst ratio of the annealed plan's
# predicted time to the exhaustive one's.  Targets: amp-5.2 >= 1.37x,
# amp-5.1 >= 1.0x, 16 devices under 1 s, 1024 under 10 s, annealing within
# 1%.  Exit status 1 if one is missed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
runs=${BENCH_RUNS:-5}
[ -x "$tapc" ] || { echo "planner.sh: no tapc in $build (build first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-planner.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$top/bench/gen_gpt2.py" "$work/gpt2m" >/dev/null
/usr/bin/python3 "$top/bench/gen_gpt2.py" "$work/gpt2m-512" --batch 512 >/dev/null

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }

status=0
printf '%-12s %5s %-34s %-34s %9s %9s %8s %8s %9s\n' cluster batch chosen megatron chosen_s \
    megatron_s speedup wall_s search_s
for run in amp-5.2:gpt2m:1.37:1 amp-5.1:gpt2m:1.0:1 mixed-1024:gpt2m:0:10 mixed-1024:gpt2m-512:0:10; do
	IFS=: read -r cl model want limit <<EOF
$run
EOF
	: >"$work/walls"
	for r in $(seq "$runs"); do
		t0=$(now)
		"$tapc" "$work/$model/model.onnx" -cluster="$top/bench/clusters/$cl.json" -emit=plan \
		    -o "$work/plan.json"
		t1=$(now)
		awk "BEGIN { print $t1 - $t0 }" >>"$work/walls"
	done
	wall=$(median <"$work/walls")
	row=$(/usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["search"]
def d(p):
    return "dp%d,tp%d,pp%d,mbs%d,M%d,%s/%s" % (p["dp"], p["tp"], p["pp"], p["microbatch_size"],
        p["microbatches"], p["placement"]["order"].replace(",", ""), p["placement"]["devices"])
c, m = s["chosen"], s["megatron"]
print(d(c), d(m), "%.4f" % c["predicted_seconds"], "%.4f" % m["predicted_seconds"],
      "%.3f" % (m["predicted_seconds"] / c["predicted_seconds"]), "%.4f" % s["seconds"])
' "$work/plan.json")
	set -- $row
	batch=$(echo "$model" | sed 's/.*-//; s/gpt2m/32/')
	printf '%-12s %5s %-34s %-34s %9s %9s %7sx %8.3f %9s\n' "$cl" "$batch" "$1" "$2" "$3" "$4" \
	    "$5" "$wall" "$6"
	ok=$(awk "BEGIN { print ($5 >= $want && $wall < $limit) }")
	[ "$ok" = 1 ] || { echo "  missed: speedup >= $want and under $limit s" >&2; status=1; }
done

echo
printf '%-12s %5s %12s %12s %10s %14s %14s\n' cluster batch exhaustive_s worst_sa_s ratio evaluated_ex \
    evaluated_sa
for run in amp-5.2:gpt2m amp-5.1:gpt2m mixed-1024:gpt2m mixed-1024:gpt2m-512; do
	cl=${run%%:*} model=${run#*:}
	"$tapc" "$work/$model/model.onnx" -cluster="$top/bench/clusters/$cl.json" -search=exhaustive \
	    -emit=plan -o "$work/ex.json"
	for seed in 1 2 3 4 5 6 7 8 9 10; do
		"$tapc" "$work/$model/model.onnx" -cluster="$top/bench/clusters/$cl.json" -search=anneal \
		    -seed=$seed -emit=plan -o "$work/sa$seed.json"
	done
	row=$(/usr/bin/python3 -c '
import json, sys
ex = json.load(open(sys.argv[1]))["search"]
sa = [json.load(open(f))["search"] for f in sys.argv[2:]]
worst = max(s["chosen"]["predicted_seconds"] for s in sa)
e = ex["chosen"]["predicted_seconds"]
print("%.5f" % e, "%.5f" % worst, "%.4f" % (worst / e), ex["candidates_evaluated"],
      "%d-%d" % (min(s["candidates_evaluated"] for s in sa), max(s["candidates_evaluated"] for s in sa)))
' "$work/ex.json" "$work"/sa*.json)
	set -- $row
	batch=$(echo "$model" | sed 's/.*-//; s/gpt2m/32/')
	printf '%-12s %5s %12s %12s %10s %14s %14s\n' "$cl" "$batch" "$1" "$2" "$3" "$4" "$5"
	ok=$(awk "BEGIN { print ($3 <= 1.01) }")
	[ "$ok" = 1 ] || { echo "  missed: annealing within 1%" >&2; status=1; }
done
exit $status
