#!/bin/sh
# e2e.sh - every fixture compiled, built and checked against its reference.
#
# For each test/e2e/NAME: `tapc model.onnx -mesh 1x1 -o OUT`, `make -C OUT`,
# `OUT/model --check test_data_set_0` (batch 1, the default) and, recompiled
# with -batch=4, `--check test_data_set_1`, at rtol 1e-4 / atol 1e-5.  The
# references come from torch (test/e2e/gen_fixtures.py), cross-checked with
# onnxruntime.  MESHES="1x1 1x2" widens the meshes tried.
. "$srcdir/test/lib.sh"
cd "$srcdir"
for m in test/e2e/*/model.onnx; do
	dir=$(dirname "$m")
	name=$(basename "$dir")
	for mesh in ${MESHES:-1x1}; do
		for set in 0 1; do
			out="$tmp/$name-$mesh-$set"
			batch=""
			[ $set = 1 ] && batch=-batch=4
			what="$name mesh $mesh test_data_set_$set"
			if ! "$TAPC" "$m" -mesh "$mesh" $batch -o "$out" 2>"$tmp/err"; then
				fail "$what: tapc: $(head -1 "$tmp/err")"
				continue
			fi
			if ! make -s -C "$out" >"$tmp/err" 2>&1; then
				fail "$what: make"; head -5 "$tmp/err"
				continue
			fi
			if "$out/model" --check "$dir/test_data_set_$set" --rtol 1e-4 --atol 1e-5 >"$tmp/log" 2>&1; then
				pass "$what"
			else
				fail "$what"; cat "$tmp/log"
			fi
			sed 's/^/    /' "$tmp/log"
		done
	done
done
finish
