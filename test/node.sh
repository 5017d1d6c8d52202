#!/bin/sh
# node.sh - the ONNX backend node tests, run by `make check`.
#
# Generates the official node tests with Debian's python3-onnx into ./node-tests (the build
# directory; once, see test/node/gen.sh) and runs every case whose operators tapc supports
# through tapc, make and --check (test/node/run.sh; expected failures in
# test/node/expected_failures.txt).  Writes the per-operator numbers to
# ./node-tests/results.txt for test/node/report.sh.  Needs TAPC (the built tapc) and srcdir
# (the source tree) from make check, and /usr/bin/python3 with python3-onnx (installed by
# .ci/setup): without it this test fails, it does not skip.
: "${TAPC:?TAPC must name the tapc binary}"
: "${srcdir:?srcdir must name the source tree}"
py=${PYTHON:-/usr/bin/python3}
if ! err=$("$py" -c 'import onnx' 2>&1); then
	echo "FAIL: node tests: $py cannot import onnx: $(echo "$err" | tail -1)"
	echo "      install Debian's python3-onnx (.ci/setup does)"
	exit 1
fi
out="$(pwd)/node-tests"
sh "$srcdir/test/node/gen.sh" "$out" || { echo "FAIL: node tests: generating them failed"; exit 1; }
PYTHON=$py
export TAPC srcdir PYTHON
sh "$srcdir/test/node/run.sh" -r "$out/results.txt" "$out/node"
