#!/bin/sh
# scaling.sh - how TAP's pruning scales with model depth.
#
# Usage: bench/scaling.sh [BUILD_DIR]   (default build/release)
#
# Generates the gpt fixture's architecture at 12, 24, 48 and 96 blocks
# (bench/gen_deep.py, Debian's python3-torch) and runs tapc on each with
# -time-passes, BENCH_RUNS times (default 7), taking the median of every
# time.  Prints, per depth: ops as loaded, ops after folding, GraphNodes,
# templates x instances, and the times of load, strip-aux, graph-nodes and
# fold-scopes.  The issue's targets, checked at the end: the fold (graph-nodes
# + fold-scopes) at 96 blocks takes at most 10x its time at 12 blocks (it
# is near-linear in ops, which grow 8x), and the number of templates does
# not grow with depth.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
runs=${BENCH_RUNS:-7}
depths=${BENCH_DEPTHS:-12 24 48 96}
[ -x "$tapc" ] || { echo "scaling.sh: no tapc in $build (build first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-scaling.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$top/bench/gen_deep.py" "$work" $depths >/dev/null

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-7s %8s %8s %10s %12s %10s %10s %10s %10s %10s\n' depth ops_in ops graphnodes templates \
    load_ms strip_ms group_ms fold_ms fold+grp
first_fold="" last_fold="" first_tmpl="" status=0
for L in $depths; do
	m="$work/gpt_$L/model.onnx"
	: >"$work/times"
	for r in $(seq "$runs"); do
		"$tapc" "$m" -emit=plan -o "$work/plan.json" -time-passes 2>>"$work/times"
	done
	t() { grep -F "$1" "$work/times" | awk '{ print $1 }' | median; }
	load=$(t "(load"); strip=$(t " strip-aux"); grp=$(t " graph-nodes"); fold=$(t " fold-scopes")
	stats=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["pruning"]
t = d["templates"]
print(d["ops_loaded"], d["ops"], d["graphnodes"], len(t),
      "+".join("%dx%d" % (x["graphnodes"], len(x["instances"])) for x in t) or "-")' "$work/plan.json")
	set -- $stats
	both=$(echo "$fold $grp" | awk '{ printf "%.3f", $1 + $2 }')
	printf '%-7s %8s %8s %10s %12s %10s %10s %10s %10s %10s\n' "$L" "$1" "$2" "$3" "$5" "$load" \
	    "$strip" "$grp" "$fold" "$both"
	[ -n "$first_fold" ] || { first_fold=$both; first_tmpl=$4; }
	last_fold=$both
	[ "$4" = "$first_tmpl" ] || { echo "templates changed with depth: $4 vs $first_tmpl"; status=1; }
done
ratio=$(echo "$last_fold $first_fold" | awk '{ printf "%.2f", ($2 > 0) ? $1 / $2 : 0 }')
echo "fold time, deepest over shallowest: ${ratio}x (target <= 10x)"
awk -v r="$ratio" 'BEGIN { exit !(r <= 10) }' || status=1
[ $status = 0 ] && echo "scaling targets: met" || echo "scaling targets: NOT met"
exit $status
