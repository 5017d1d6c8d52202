#!/bin/sh
# roundtrip.sh - print -> read -> print is byte-identical.
#
# For every fixture, the IR straight after loading (-passes=verify) and
# after the default pipeline is read back by `tapc FILE.ir` and printed
# again; the two texts must be the same bytes, and so must the data files
# that hold their big values (FILE.ir.weights).  So are -ir-dump-dir files.
. "$srcdir/test/lib.sh"
cd "$srcdir"
mkdir "$tmp/back"
# same -> A B: A and B are the same bytes, and so are their data files or
# neither has one (B is written under the same name in another directory,
# so that the data file's name in the header is the same)
same() {
	cmp -s "$1" "$2" || return 1
	[ -e "$1.weights" ] || { [ ! -e "$2.weights" ]; return; }
	cmp -s "$1.weights" "$2.weights"
}
for m in test/e2e/*/model.onnx; do
	name=$(basename "$(dirname "$m")")
	args=$(fixture_args "$(dirname "$m")")
	for stage in verify default; do
		rm -f "$tmp/back"/*
		a="$tmp/$name.$stage.ir"
		b="$tmp/back/$name.$stage.ir"
		if [ $stage = verify ]; then
			"$TAPC" "$m" $args -passes=verify -emit=ir -o "$a" || { fail "$name/$stage: load"; continue; }
		else
			"$TAPC" "$m" $args -emit=ir -o "$a" || { fail "$name/$stage: load"; continue; }
		fi
		if "$TAPC" "$a" -passes=verify -emit=ir -o "$b"; then
			check "$name/$stage: print-read-print identical" same "$a" "$b"
		else
			fail "$name/$stage: reading the IR back"
		fi
	done
	rm -rf "$tmp/dump" "$tmp/back"/*
	"$TAPC" "$m" $args -ir-dump-dir="$tmp/dump" -emit=ir -o /dev/null
	for f in "$tmp"/dump/*.ir; do
		x="$tmp/back/$(basename "$f")"
		"$TAPC" "$f" -passes=verify -emit=ir -o "$x" && same "$f" "$x" ||
			{ fail "$name: dump $(basename "$f") does not read back"; continue 2; }
	done
	pass "$name: every -ir-dump-dir file reads back"
done
finish
