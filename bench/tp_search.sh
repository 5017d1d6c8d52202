#!/bin/sh
# tp_search.sh - how tp-plan's search scales with model depth (TAP §V-B).
#
# Usage: bench/tp_search.sh [BUILD_DIR]   (default build/release)
#
# Generates the gpt fixture's architecture at 12, 24, 48 and 96 blocks
# (bench/gen_deep.py, Debian's python3-torch) and plans each for a 1x4 mesh
# (TP over 4 devices), BENCH_RUNS times (default 15), taking medians.  Prints,
# per depth: the templates found, the plans enumerated and the plans pattern
# routing accepted (summed over the searches), the search time (enumerate,
# route, cost: plan.json's tensor_parallel.search_ms; the minimum over the
# runs, since a deterministic computation of a tenth of a millisecond is
# otherwise measuring the scheduler), the whole tp-plan pass
# (search, then applying the plan to every instance and noting collectives)
# and tp-rewrite.  The peer of each row is the 12-block model in the same
# run: the search time at 96 blocks must be at most 1.5x the 12-block one
# (TAP searches one instance per template, so it should not grow at all).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
runs=${BENCH_RUNS:-15}
depths=${BENCH_DEPTHS:-12 24 48 96}
mesh=${BENCH_MESH:-1x4}
[ -x "$tapc" ] || { echo "tp_search.sh: no tapc in $build (build first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-tpsearch.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$top/bench/gen_deep.py" "$work" $depths >/dev/null

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-6s %5s %10s %8s %8s %10s %8s %10s %11s\n' depth ops templates plans valid search_ms ratio \
    plan_ms rewrite_ms
first="" status=0
for L in $depths; do
	m="$work/gpt_$L/model.onnx"
	: >"$work/times"
	: >"$work/search"
	for r in $(seq "$runs"); do
		"$tapc" "$m" -mesh "$mesh" -emit=plan -o "$work/plan.json" -time-passes 2>>"$work/times"
		/usr/bin/python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["tensor_parallel"]["search_ms"])' "$work/plan.json" >>"$work/search"
	done
	t() { grep -F "$1" "$work/times" | awk '{ print $1 }' | median; }
	plan=$(t " tp-plan"); rw=$(t " tp-rewrite"); search=$(sort -g "$work/search" | head -1)
	stats=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["tensor_parallel"]["searches"]
t = d["pruning"]["templates"]
print(d["pruning"]["ops"], "+".join("%dx%d" % (x["graphnodes"], len(x["instances"])) for x in t) or "-",
      sum(x["plans"] for x in s), sum(x["valid"] for x in s))' "$work/plan.json")
	set -- $stats
	[ -n "$first" ] || first=$search
	ratio=$(echo "$search $first" | awk '{ printf "%.2f", ($2 > 0) ? $1 / $2 : 0 }')
	printf '%-6s %5s %10s %8s %8s %10s %8s %10s %11s\n' "$L" "$1" "$2" "$3" "$4" "$search" "${ratio}x" \
	    "$plan" "$rw"
done
echo "search time, deepest over shallowest: ${ratio}x (target <= 1.5x)"
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }' || status=1
[ $status = 0 ] && echo "tp search target: met" || echo "tp search target: NOT met"
exit $status
