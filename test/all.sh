#!/bin/sh
# all.sh - the whole test suite, from a fresh Debian 12 machine.
#
# Installs the Debian packages (.ci/setup), builds tapc in build/release,
# runs `make check` there, again under AddressSanitizer+UBSan in
# build/asan, installs into build/prefix and builds a program with the
# installed tapc and runtime, short libFuzzer runs of the loader and the
# IR reader, and
# `make distcheck`.
# Ends with one line "N passed, M failed" summing every test case.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

sh "$top/.ci/setup"
cd "$top"
# onnxruntime-node for test/train.sh (npm; its install script would download
# more, so --ignore-scripts: the CPU library ships in the package).  Without
# it (offline) train.sh checks the trained models with tapc instead.
if [ -z "${ORT_DIR:-}" ]; then
	ort="$top/build/ort"
	if [ ! -d "$ort/node_modules/onnxruntime-node" ] && command -v npm >/dev/null 2>&1; then
		mkdir -p "$ort"
		(cd "$ort" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node \
		    >npm.log 2>&1) || echo "note: npm could not install onnxruntime-node (see $ort/npm.log)"
	fi
	[ -d "$ort/node_modules/onnxruntime-node" ] && ORT_DIR=$ort && export ORT_DIR
fi
[ -x configure ] || autoreconf -fi >/dev/null

step() { printf '\n=== %s\n' "$*"; }

build() { # dir configure-args...
	d=$1; shift
	mkdir -p "$top/build/$d"
	cd "$top/build/$d"
	[ -f Makefile ] || "$top/configure" -q "$@"
	make -s -j"$jobs"
}

status=0
step "release build: make check"
build release
make -s -j"$jobs" check || status=1

step "AddressSanitizer + UBSan build: make check"
build asan --enable-sanitizers
ASAN_OPTIONS=detect_leaks=1 make -s -j"$jobs" check || status=1

step "install into a prefix: the installed tapc builds against the installed runtime"
build install --prefix="$top/build/prefix"
make -s install >/dev/null
sh "$top/test/install.sh" "$top/build/install" "$top/build/prefix" >install.log 2>&1 || status=1
grep -v '^PASS' install.log || true

step "libFuzzer: loader and IR reader, ${FUZZ_SECONDS}s each"
cd "$top/build/release"
make -s fuzz FUZZ_SECONDS="$FUZZ_SECONDS" >fuzz.log 2>&1 || { tail -40 fuzz.log; status=1; }
grep -E '^Done' fuzz.log

step "make distcheck"
cd "$top/build/release"
make -s distcheck >distcheck.log 2>&1 || { tail -40 distcheck.log; status=1; }
grep -E 'archives ready|tapc-.*tar' distcheck.log | head -3 || true

# Every test program ends its log with "N passed, M failed".
passed=0 failed=0
for log in "$top"/build/release/test/*.log "$top"/build/release/test/unit/*.log \
    "$top"/build/asan/test/*.log "$top"/build/asan/test/unit/*.log "$top"/build/install/install.log; do
	[ -f "$log" ] || continue
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	[ -n "$line" ] || { echo "no summary in $log"; status=1; continue; }
	passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
	failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
done
[ "$status" = 0 ] || [ "$failed" != 0 ] || failed=1
printf '\n%d passed, %d failed\n' "$passed" "$failed"
[ "$status" = 0 ] && [ "$failed" = 0 ]
