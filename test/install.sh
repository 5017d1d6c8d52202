#!/bin/sh
# install.sh - an installed tapc builds programs against the installed runtime.
#
# Usage: test/install.sh BUILD_DIR PREFIX, where BUILD_DIR was configured
# with --prefix=PREFIX and `make install` has run.  The installed tapc must
# emit a Makefile that finds libtaprt through pkg-config with no variables
# set, and the program must pass its check.
set -u
build=$1 prefix=$2
srcdir=$(cd "$(dirname "$0")/.." && pwd)
TAPC="$prefix/bin/tapc"
. "$srcdir/test/lib.sh"
cd "$srcdir"
check "installed tapc exists" test -x "$TAPC"
check "taprt.pc installed" test -f "$prefix/lib/pkgconfig/taprt.pc"
check "taprt.h installed" test -f "$prefix/include/taprt.h"
for m in mlp gpt; do
	out="$tmp/$m"
	if "$TAPC" test/e2e/$m/model.onnx -o "$out" 2>"$tmp/err"; then
		check "$m: Makefile uses pkg-config" grep -q 'PKG_CONFIG) --libs taprt' "$out/Makefile"
		if env -u PKG_CONFIG_PATH make -s -C "$out" >"$tmp/log" 2>&1; then
			check "$m: program checks" "$out/model" --check test/e2e/$m/test_data_set_0
		else
			fail "$m: make against the installed runtime"; head -5 "$tmp/log"
		fi
	else
		fail "$m: installed tapc: $(head -1 "$tmp/err")"
	fi
done
finish
