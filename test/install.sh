#!/bin/sh
# install.sh - an installed tapc builds programs against the installed runtime.
#
# Usage: test/install.sh BUILD_DIR PREFIX, where BUILD_DIR was configured
# with --prefix=PREFIX and `make install` has run.  The installed tapc must
# emit a Makefile that finds libtaprt through pkg-config with no variables
# set, and the program must pass its check (under mpirun too, when the
# runtime has its mpi backend).
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
			# it depends on the installed runtime: reinstalled, it links again
			check "$m: built, it is up to date" env -u PKG_CONFIG_PATH make -s -q -C "$out"
			env -u PKG_CONFIG_PATH make -n -W "$prefix/lib/libtaprt.so" -C "$out" >"$tmp/log" 2>&1
			check "$m: a reinstalled libtaprt.so links it again" grep -q -- "-o model " "$tmp/log"
			env -u PKG_CONFIG_PATH make -n -W "$prefix/include/taprt.h" -C "$out" >"$tmp/log" 2>&1
			check "$m: a reinstalled taprt.h compiles it again" grep -q -- "-c -o main.o main.c" "$tmp/log"
		else
			fail "$m: make against the installed runtime"; head -5 "$tmp/log"
		fi
	else
		fail "$m: installed tapc: $(head -1 "$tmp/err")"
	fi
done
# with the mpi backend built in, the installed runtime runs a program under mpirun
out="$tmp/gpt-tp"
if "$TAPC" test/e2e/gpt/model.onnx -mesh 1x2 -tp=2 -o "$out" 2>"$tmp/err" &&
    env -u PKG_CONFIG_PATH make -s -C "$out" >"$tmp/log" 2>&1; then
	if "$out/model" --help | grep -q "built into this runtime: .*mpi" &&
	    command -v mpirun >/dev/null 2>&1; then
		check "gpt -tp=2 under mpirun against the installed runtime" \
		    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
		    mpirun --oversubscribe -np 2 "$out/model" --backend=mpi --check test/e2e/gpt/test_data_set_0
	else
		echo "SKIP: the installed runtime has no mpi backend, or there is no mpirun"
	fi
else
	fail "gpt -tp=2: build against the installed runtime"; head -5 "$tmp/err" "$tmp/log"
fi
finish
