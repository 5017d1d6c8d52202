#!/bin/sh
# golden.sh - `tapc FIXTURE -emit=ir` for every test/e2e fixture.
#
# Each fixture must load, come out fully shaped (no unknown "[?]" types, no
# Shape/ConstantOfShape/Range chains left after fold-constants) and equal
# its reviewed dump test/e2e/NAME/expected.ir byte for byte; the dump must
# also be identical between two runs.  UPDATE=1 rewrites the dumps.  The
# dumps are standard output's, every value inline; the same IR written with
# -o (big values in FILE.ir.weights) must read back to the same text.
. "$srcdir/test/lib.sh"
cd "$srcdir"
for m in test/e2e/*/model.onnx; do
	name=$(basename "$(dirname "$m")")
	out="$tmp/$name.ir"
	args=$(fixture_args "$(dirname "$m")")
	if ! "$TAPC" "$m" $args -emit=ir >"$out" 2>"$tmp/err"; then
		fail "$name: tapc exited non-zero: $(head -1 "$tmp/err")"
		continue
	fi
	check "$name: every tensor shaped" sh -c "! grep -q '\\[?\\]' '$out'"
	check "$name: shape arithmetic folded" \
	    sh -c "! grep -Eq '= (Shape|ConstantOfShape|Range|Constant) ' '$out'"
	"$TAPC" "$m" $args -emit=ir > "$tmp/again.ir"
	check "$name: deterministic" cmp -s "$out" "$tmp/again.ir"
	"$TAPC" "$m" $args -emit=ir -o "$tmp/file.ir" &&
	    "$TAPC" "$tmp/file.ir" -passes=verify -emit=ir >"$tmp/back.ir" 2>"$tmp/err"
	check "$name: written with a data file, reads back the same" cmp -s "$out" "$tmp/back.ir"
	exp="test/e2e/$name/expected.ir"
	[ "${UPDATE:-}" = 1 ] && cp "$out" "$exp"
	if cmp -s "$out" "$exp"; then
		pass "$name: matches expected.ir"
	else
		fail "$name: differs from expected.ir"
		diff -u "$exp" "$out" | head -20
	fi
done
finish
