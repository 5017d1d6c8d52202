#!/bin/sh
# roundtrip.sh - print -> read -> print is byte-identical.
#
# For every fixture, the IR straight after loading (-passes=verify) and
# after the default pipeline is read back by `tapc FILE.ir` and printed
# again; the two texts must be the same bytes.  So are -ir-dump-dir files.
. "$srcdir/test/lib.sh"
cd "$srcdir"
for m in test/e2e/*/model.onnx; do
	name=$(basename "$(dirname "$m")")
	args=$(fixture_args "$(dirname "$m")")
	for stage in verify default; do
		a="$tmp/$name.$stage.ir"
		b="$tmp/$name.$stage.back.ir"
		if [ $stage = verify ]; then
			"$TAPC" "$m" $args -passes=verify -emit=ir -o "$a" || { fail "$name/$stage: load"; continue; }
		else
			"$TAPC" "$m" $args -emit=ir -o "$a" || { fail "$name/$stage: load"; continue; }
		fi
		if "$TAPC" "$a" -passes=verify -emit=ir -o "$b"; then
			check "$name/$stage: print-read-print identical" cmp -s "$a" "$b"
		else
			fail "$name/$stage: reading the IR back"
		fi
	done
	rm -rf "$tmp/dump"
	"$TAPC" "$m" $args -ir-dump-dir="$tmp/dump" -emit=ir -o /dev/null
	for f in "$tmp"/dump/*.ir; do
		"$TAPC" "$f" -passes=verify -emit=ir -o "$tmp/x.ir" && cmp -s "$f" "$tmp/x.ir" ||
			{ fail "$name: dump $(basename "$f") does not read back"; continue 2; }
	done
	pass "$name: every -ir-dump-dir file reads back"
done
finish
