#!/bin/sh
# train.sh - training steps per second, tapc against torch on CPU.
#
# Usage: bench/train.sh [BUILD_DIR]   (default build/release)
#
# For the gpt_untied and bert training fixtures (test/train) and gpt_wide (the
# same GPT at hidden 512, 8 heads, 4 blocks, sequence 128, batch 8):
# bench/train_torch.py exports the model and a batch and times torch's AdamW
# steps (one thread); tapc -train compiles the same model with the same
# optimizer for one device (-mesh 1x1), and the program's --bench-train times
# its steps.  ROUNDS rounds (default 3), torch and tapc alternating, medians.
# Prints ms per step of each and the ratio torch / tapc (> 1: tapc faster).
# The target: at least 1.0 on every row.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
tapc=$build/tapc
rounds=${ROUNDS:-3}
steps=${STEPS:-20}
[ -x "$tapc" ] || { echo "train.sh: no tapc in $build (build first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-train.XXXXXX")
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

status=0
printf '%-12s %12s %12s %8s\n' model torch_ms tapc_ms ratio
for model in gpt_untied bert gpt_wide; do
	d="$work/$model"
	: >"$d.torch"; : >"$d.tapc"
	for r in $(seq "$rounds"); do
		/usr/bin/python3 "$top/bench/train_torch.py" "$d" $model --steps "$steps" |
		    sed -n 's/^torch_ms_per_step //p' >>"$d.torch"
		if [ ! -x "$d/out/model" ]; then
			"$tapc" "$d/model.onnx" -train $(cat "$d/args") -o "$d/out" >/dev/null
			make -s -C "$d/out" >/dev/null
		fi
		"$d/out/model" --bench-train "$steps" --warmup 3 --data "$d/data" |
		    sed -n 's/.* \([0-9.e+-]*\) ms\/step.*/\1/p' >>"$d.tapc"
	done
	t=$(median <"$d.torch"); c=$(median <"$d.tapc")
	ratio=$(awk "BEGIN { printf \"%.3f\", $t / $c }")
	printf '%-12s %12.3f %12.3f %8s\n' $model "$t" "$c" "$ratio"
	[ "$(awk "BEGIN { print ($ratio >= 1.0) }")" = 1 ] || status=1
done
exit $status
