#!/bin/sh
# gen.sh OUTDIR - generate the official ONNX backend node tests into OUTDIR/node/test_*/
# (about 922 cases: model.onnx and test_data_set_0/), with Debian's python3-onnx run by
# /usr/bin/python3 through test/node/generate.py, then tapc's own cases in the same layout
# from every test/node/extra_*.py (each run as `extra_X.py OUTDIR/node`; their names start
# with test_tapc_, and their references come from an independent implementation: onnx's
# numpy reference code, numpy or torch, never from tapc).  Idempotent: does nothing when
# OUTDIR/.stamp exists and is newer than generate.py and every extra_*.py.  Needs
# /usr/bin/python3 with the onnx and numpy modules (python3-onnx); PYTHON overrides the
# interpreter.
set -eu
if [ $# -ne 1 ]; then
	echo "usage: gen.sh OUTDIR" >&2
	exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
if [ -f "$out/.stamp" ] && [ -d "$out/node" ] &&
    [ -z "$(find "$here/generate.py" "$here"/extra_*.py -newer "$out/.stamp" 2>/dev/null)" ]; then
	exit 0
fi
if ! err=$("$py" -c 'import onnx, numpy' 2>&1); then
	echo "gen.sh: $py cannot import onnx (install Debian's python3-onnx, as .ci/setup does):" >&2
	echo "$err" | tail -1 >&2
	exit 1
fi
mkdir -p "$out"
rm -rf "$out/node" "$out/real" "$out/simple" "$out/.stamp"
"$py" -W ignore "$here/generate.py" "$out" >/dev/null
for x in "$here"/extra_*.py; do
	[ -f "$x" ] || continue
	"$py" -W ignore "$x" "$out/node" >/dev/null || { echo "gen.sh: $x failed" >&2; exit 1; }
done
n=$(find "$out/node" -name model.onnx | wc -l)
if [ "$n" -lt 100 ]; then
	echo "gen.sh: only $n node tests generated in $out/node" >&2
	exit 1
fi
touch "$out/.stamp"
echo "gen.sh: $n node tests in $out/node"
