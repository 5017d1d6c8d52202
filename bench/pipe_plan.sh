#!/bin/sh
# pipe_plan.sh - the pipeline planner against depth, and against Megatron's
# even split of the blocks.
#
# Usage: bench/pipe_plan.sh [BUILD_DIR]   (default build/release)
#
# Generates the gpt fixture's architecture at 12, 24, 48 and 96 blocks
# (bench/gen_deep.py) and plans each as a 4-stage pipeline on a 1x4 mesh
# (-pp=4, batch 16, 8 micro-batches), BENCH_RUNS times (default 7, medians).
# Prints, per depth: subgraphs (pipe-shard), the winning planner, the
# simulated iteration time (1F1B, training objective) of the chosen
# assignment and of Megatron's even split of the blocks (embedding with the
# first stage, head with the last) measured in the same run, their ratio,
# the standard deviation of the stage times of each, and the times of the
# pipe-shard and stage-assign passes.  Then the 12-block model over 3, 5 and
# 7 stages, where the blocks do not divide evenly; and the GPT fixture itself
# (embeddings, 2 blocks, head) with -pp=2 on 1x2, 2x2 and 2x4 (tapc picks
# the other degrees; left to itself it picks replicas alone there at batch
# 16, and the row would have no pipeline) and -pp=2 -tp=4 on 1x8.  The target: the chosen assignment is never slower than the
# even split.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
runs=${BENCH_RUNS:-7}
depths=${BENCH_DEPTHS:-12 24 48 96}
[ -x "$tapc" ] || { echo "pipe_plan.sh: no tapc in $build (build first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-pipeplan.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$top/bench/gen_deep.py" "$work" $depths >/dev/null

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-6s %5s %-12s %11s %11s %7s %10s %10s %9s %9s\n' depth subg method chosen_ms even_ms ratio \
    chosen_std even_std shard_ms assign_ms
status=0
for L in $depths; do
	m="$work/gpt_$L/model.onnx"
	: >"$work/times"
	for r in $(seq "$runs"); do
		"$tapc" "$m" -mesh 1x4 -pp=4 -batch=16 -microbatches=8 -emit=plan -o "$work/plan.json" \
		    -time-passes 2>>"$work/times"
	done
	t() { grep -F "$1" "$work/times" | awk '{ print $1 }' | median; }
	shard=$(t " pipe-shard"); assign=$(t " stage-assign")
	row=$(/usr/bin/python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
e = p["megatron_even_split"]
c, ev = p["simulated_seconds"] * 1e3, e["simulated_seconds"] * 1e3
print(p["subgraphs"], p["method"].replace(" ", "_"), "%.4f" % c, "%.4f" % ev,
      "%.3fx" % (c / ev), "%.2e" % p["stage_time_std"], "%.2e" % e["stage_time_std"],
      int(c <= ev * (1 + 1e-9)))' "$work/plan.json")
	set -- $row
	printf '%-6s %5s %-12s %11s %11s %7s %10s %10s %9s %9s\n' "$L" "$1" "$2" "$3" "$4" "$5" "$6" \
	    "$7" "$shard" "$assign"
	[ "$8" = 1 ] || status=1
done
echo
printf '%-6s %-12s %11s %11s %7s %10s %10s\n' stages method chosen_ms even_ms ratio chosen_std even_std
first=$(echo $depths | awk '{ print $1 }')
for pp in ${BENCH_UNEVEN:-3 5 7}; do
	"$tapc" "$work/gpt_$first/model.onnx" -mesh 1x$pp -pp=$pp -batch=16 -microbatches=8 -emit=plan \
	    -o "$work/plan.json"
	row=$(/usr/bin/python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
e = p["megatron_even_split"]
c, ev = p["simulated_seconds"] * 1e3, e["simulated_seconds"] * 1e3
print(p["method"].replace(" ", "_"), "%.4f" % c, "%.4f" % ev, "%.3fx" % (c / ev),
      "%.2e" % p["stage_time_std"], "%.2e" % e["stage_time_std"], int(c <= ev * (1 + 1e-9)))' "$work/plan.json")
	set -- $row
	printf '%-6s %-12s %11s %11s %7s %10s %10s\n' "$pp" "$1" "$2" "$3" "$4" "$5" "$6"
	[ "$7" = 1 ] || status=1
done
echo
echo "the GPT fixture itself (test/e2e/gpt: token and position embeddings, 2 blocks, LM head), batch 16"
printf '%-34s %-12s %11s %11s %7s %10s %10s\n' mesh method chosen_ms even_ms ratio chosen_std even_std
for args in "-mesh 1x2 -pp=2" "-mesh 2x2 -pp=2" "-mesh 2x4 -pp=2" "-mesh 1x8 -pp=2 -tp=4"; do
	"$tapc" "$top/test/e2e/gpt/model.onnx" $args -batch=16 -emit=plan -o "$work/plan.json"
	row=$(/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); p = j["pipeline"]; d = j["degrees"]
e = p["megatron_even_split"]
c, ev = p["simulated_seconds"] * 1e3, e["simulated_seconds"] * 1e3
print("dp%d,tp%d,pp%d,M%d" % (d["dp"], d["tp"], d["pp"], d["microbatches"]),
      p["method"].replace(" ", "_"), "%.4f" % c, "%.4f" % ev, "%.3fx" % (c / ev),
      "%.2e" % p["stage_time_std"], "%.2e" % e["stage_time_std"], int(c <= ev * (1 + 1e-9)))' "$work/plan.json")
	set -- $row
	printf '%-34s %-12s %11s %11s %7s %10s %10s\n' "$(echo $args | sed 's/-mesh //')($1)" "$2" "$3" \
	    "$4" "$5" "$6" "$7"
	[ "$8" = 1 ] || status=1
done
[ $status = 0 ] && echo "pipeline target (chosen <= even split at every depth): met" ||
    echo "pipeline target: NOT met"
exit $status
