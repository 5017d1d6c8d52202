#!/bin/sh
# passes.sh - one pass on a small IR file: test/passes/PASS/CASE.ir run with
# `tapc CASE.ir -passes=PASS` must print CASE.expected exactly.  An expected
# file starting "tapc: error:" is the expected first error line instead
# (and the exit status must be 1).  Runs from test/passes so the paths in
# messages are relative.
. "$srcdir/test/lib.sh"
cd "$srcdir/test/passes"
for case in */*.ir; do
	pass=$(dirname "$case")
	exp="${case%.ir}.expected"
	[ -f "$exp" ] || { fail "$case: no $exp"; continue; }
	"$TAPC" "$case" -passes="$pass" -emit=ir -o "$tmp/out.ir" 2>"$tmp/err"
	status=$?
	if head -1 "$exp" | grep -q '^tapc: error:'; then
		if [ $status = 1 ] && [ "$(head -1 "$tmp/err")" = "$(head -1 "$exp")" ]; then
			pass "$case"
		else
			fail "$case (exit $status)"; echo "  want: $(head -1 "$exp")"; echo "  got:  $(head -1 "$tmp/err")"
		fi
	elif [ $status = 0 ] && cmp -s "$tmp/out.ir" "$exp"; then
		pass "$case"
	else
		fail "$case (exit $status)"; head -3 "$tmp/err"; diff -u "$exp" "$tmp/out.ir" | head -20
	fi
done
finish
