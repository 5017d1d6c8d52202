#!/bin/sh
# diag.sh - run tapc on every bad model in test/diag/ and compare the first
# line of stderr with CASE.expected (see test/diag/gen_diag.py).
#
# Needs: TAPC (the built tapc) and srcdir (the source tree) in the
# environment, as `make check` sets them.  For each case tapc runs from
# test/diag/ on CASE.onnx, CASE.ir, CASE/model.onnx or CASE/model.ir with
# the arguments in CASE.args (one per line) and -o into a fresh temporary
# directory.  CASE/SYMLINKS ("LINK TARGET" lines) and CASE/FIFOS (one name
# a line) are made in a copy of CASE/ first: git keeps neither.
# A bad model must exit with status 1, print the expected first line and
# leave that directory empty.  An empty CASE.expected is a positive
# control: status 0, nothing on stderr, and the output file written.
# Prints PASS/FAIL per case and "N passed, M failed"; exits 1 on a failure.

: "${TAPC:?set TAPC to the tapc binary}"
: "${srcdir:=.}"
diagdir=$srcdir/test/diag
[ -d "$diagdir" ] || { echo "diag.sh: no directory $diagdir" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tapc-diag.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' HUP INT TERM

pass=0
fail=0
for exp in "$diagdir"/*.expected; do
	[ -f "$exp" ] || continue
	name=${exp##*/}
	name=${name%.expected}
	if [ -d "$diagdir/$name" ]; then
		model=$name/model.onnx
		if [ -f "$diagdir/$name/model.ir" ] ||
		    grep -qx model.ir "$diagdir/$name/FIFOS" 2>/dev/null; then
			model=$name/model.ir
		fi
	elif [ -f "$diagdir/$name.ir" ]; then
		model=$name.ir
	else
		model=$name.onnx
	fi
	out=$work/out
	rm -rf "$out"
	mkdir "$out" || exit 1

	set -- "$model"
	if [ -f "$diagdir/$name.args" ]; then
		while IFS= read -r a || [ -n "$a" ]; do
			[ -n "$a" ] && set -- "$@" "$a"
		done < "$diagdir/$name.args"
	fi
	set -- "$@" -emit=ir -o "$out/result.ir"

	# CASE/SYMLINKS lists "LINK TARGET" pairs, CASE/FIFOS names, to make
	# in a copy of the case
	rundir=$diagdir
	if [ -f "$diagdir/$name/SYMLINKS" ] || [ -f "$diagdir/$name/FIFOS" ]; then
		rundir=$work/cases
		rm -rf "$rundir" && mkdir -p "$rundir" && cp -R "$diagdir/$name" "$rundir/" || exit 1
		if [ -f "$diagdir/$name/SYMLINKS" ]; then
			while read -r link target; do
				ln -s "$target" "$rundir/$name/$link" || exit 1
			done < "$diagdir/$name/SYMLINKS"
		fi
		if [ -f "$diagdir/$name/FIFOS" ]; then
			while read -r fifo; do
				mkfifo "$rundir/$name/$fifo" || exit 1
			done < "$diagdir/$name/FIFOS"
		fi
	fi
	(cd "$rundir" && exec timeout 20 "$TAPC" "$@") > "$work/stdout" 2> "$work/stderr"
	rc=$?
	[ "$rc" = 124 ] && echo "tapc: timed out (a hang)" >> "$work/stderr"
	first=$(sed -n 1p "$work/stderr")
	want=$(cat "$exp")
	why=
	if [ -z "$want" ]; then
		[ "$rc" -eq 0 ] || why="exit status $rc, expected 0"
		[ -z "$why" ] && [ -s "$work/stderr" ] && why="unexpected output on stderr"
		[ -z "$why" ] && [ ! -s "$out/result.ir" ] && why="no output written"
	else
		[ "$rc" -eq 1 ] || why="exit status $rc, expected 1"
		[ -z "$why" ] && [ "$first" != "$want" ] && why="first line of stderr differs"
		if [ -z "$why" ] && [ -n "$(ls -A "$out")" ]; then
			why="output left behind: $(ls -A "$out" | tr '\n' ' ')"
		fi
	fi
	if [ -z "$why" ]; then
		echo "PASS: $name"
		pass=$((pass + 1))
	else
		echo "FAIL: $name: $why"
		echo "  expected: $want"
		echo "  got:      $first"
		if [ "$(wc -l < "$work/stderr")" -gt 1 ]; then
			echo "  (stderr, first 5 lines)"
			sed -n '1,5s/^/    /p' "$work/stderr"
		fi
		fail=$((fail + 1))
	fi
done

echo "$pass passed, $fail failed"
[ "$pass" -gt 0 ] && [ "$fail" -eq 0 ]
