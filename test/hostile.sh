#!/bin/sh
# hostile.sh - models whose every name is an attack on the files tapc writes.
#
# test/hostile/gen.py writes two models in a scratch directory whose names
# (graph, nodes, inputs, outputs, weights, external data files, the model's
# file and directory) hold comment closers, backslash-CR splices, trigraphs,
# quotes, make's specials and payloads that print INJECTED if they ever run
# (issue 11).  Each is compiled at several meshes and built with
# -std=c11 (trigraphs on) -Werror=comment, and the program must pass --check
# against numpy's references and print nothing injected; the IR dump must
# read back; plan.json and the schedule SVG must parse and hold the names;
# a -MD depfile must list the exact files as GNU make reads them, and a
# name make cannot spell must be refused with nothing written.
. "$srcdir/test/lib.sh"
py=${PYTHON:-/usr/bin/python3}
cd "$tmp" || exit 1
if ! "$py" "$srcdir/test/hostile/gen.py" . 2>"$tmp/err"; then
	fail "gen.py: $(tail -1 "$tmp/err")"
	finish
	exit 1
fi
nasty=$(cat nasty.path)
plain=$(cat plain.path)
n=0

# build OUT WHAT: make the program with strict flags; true if it built
build() {
	if make -s -C "$1" CFLAGS="-std=c11 -O1 -Wcomment -Wtrigraphs -Werror" >"$tmp/log" 2>&1; then
		return 0
	fi
	fail "$2: make"
	head -5 "$tmp/log"
	return 1
}

# program OUT: the executable the Makefile builds
program() {
	echo "$1/$(sed -n 's/^PROGRAM = //p' "$1/Makefile")"
}

# compile WHAT MODEL SET FLAGS...: tapc, make, --check DIR/test_data_set_SET
compile() {
	what=$1 model=$2 set=$3
	shift 3
	n=$((n + 1))
	out="$tmp/out$n"
	if ! "$TAPC" "$model" "$@" -o "$out" 2>"$tmp/err"; then
		fail "$what: tapc: $(head -1 "$tmp/err")"
		return
	fi
	build "$out" "$what" || return
	"$(program "$out")" --check "${model%/*}/test_data_set_$set" >"$tmp/log" 2>&1
	rc=$?
	if grep -q INJECTED "$tmp/log"; then
		fail "$what: the program printed INJECTED"
	elif [ $rc != 0 ]; then
		fail "$what: --check exit $rc"
		cat "$tmp/log"
	elif nm "$out"/*.o | grep -q INJECTED; then
		fail "$what: a name became a symbol"
	else
		pass "$what"
	fi
}

for m in "$nasty" "$plain"; do
	which=hostile
	[ "$m" = "$plain" ] && which=plain
	compile "$which names, 1 rank" "$m" 0 -batch=2
	compile "$which names, -tp=2" "$m" 0 -tp=2 -batch=2
	compile "$which names, -pp=2, batch 4" "$m" 1 -pp=2 -batch=4
	compile "$which names, -dp=2, batch 4" "$m" 1 -dp=2 -batch=4
done
check "the program's name is a plain file name" test -x "$tmp/out1/m_o_del_"

# the IR dump reads back, byte for byte, and compiles to the same program
"$TAPC" "$nasty" -tp=2 -batch=2 -O0 -emit=ir -o a.ir 2>"$tmp/err" || fail "-emit=ir: $(head -1 "$tmp/err")"
check "IR: no line made by a name" sh -c "! grep -v -e '^graph \"' -e '^  %' -e '^  output %' a.ir"
if "$TAPC" a.ir -passes=verify -emit=ir -o b.ir 2>"$tmp/err"; then
	check "IR: print, read, print is byte-identical" cmp -s a.ir b.ir
else
	fail "IR: reading the dump back: $(head -1 "$tmp/err")"
fi
if "$TAPC" a.ir -o outir 2>"$tmp/err" && build outir "IR: compile the dump"; then
	"$(program outir)" --check "${nasty%/*}/test_data_set_0" >"$tmp/log" 2>&1 && ! grep -q INJECTED "$tmp/log"
	check "IR: the dump's program passes --check" test $? = 0
else
	fail "IR: compiling the dump: $(head -1 "$tmp/err")"
fi
# a lying type on the Relu (whose name holds a newline): one error line
sed -E '/= Relu /s/: f32\[([0-9]+),[0-9]+\]/: f32[\1,999]/' a.ir >lie.ir
if cmp -s a.ir lie.ir; then
	fail "IR: the edit to the Relu's type changed nothing"
else
	"$TAPC" lie.ir -emit=ir -o /dev/null 2>"$tmp/err"
	check "IR: a lying type is refused" test $? = 1
	check "... in one line naming the node, its newline escaped" \
	    sh -c "[ \$(wc -l < '$tmp/err') = 1 ] && grep -q 'relu.*\\\\x0a.*declared f32\\[2,999\\]' '$tmp/err'"
fi

# plan.json is JSON and holds the names; the schedule SVG is XML
"$TAPC" "$nasty" -pp=2 -batch=4 -emit=plan -o plan.json 2>/dev/null
"$TAPC" "$nasty" -pp=2 -batch=4 -emit=schedule -o s.svg 2>/dev/null
check "plan.json parses and names every tensor as the model does" "$py" -c '
import json, sys, onnx
p = json.load(open("plan.json"))
m = onnx.load(sys.argv[1], load_external_data=False)
want = {i.name for i in m.graph.input} | {t.name for t in m.graph.initializer}
got = {t["name"] for t in p["tensors"]}
sys.exit(0 if want <= got else "missing: %r" % (want - got))
' "$nasty"
check "the schedule SVG parses" "$py" -c 'import xml.etree.ElementTree as E; E.parse("s.svg")'

# -MD: make reads back exactly the files tapc read; a name make cannot
# spell (a newline) is refused, and nothing is written
if "$TAPC" "$plain" -MD -o outmd 2>"$tmp/err"; then
	printf 'include outmd.d\noutmd/plan.json:\n\t$(file >deps.txt,$^)\n' >show.mk
	make -s -B -f show.mk outmd/plan.json >/dev/null 2>"$tmp/err"
	d=${plain%/*}
	printf '%s %s %s\n' "$plain" "$d/sub dir/w1 \$x #1 (2).bin" "$d/w2:colon.bin" >want.txt
	check "-MD: make reads the model and both data files" cmp -s deps.txt want.txt
else
	fail "-MD: $(head -1 "$tmp/err")"
fi
# the program: integer division that would trap runs to the documented
# results; its input files are regular files of a bounded size, never a
# FIFO it would wait on or a device it would read without end
if "$TAPC" divmod/model.onnx -o divprog 2>"$tmp/err" && build divprog "divmod"; then
	divprog/model --check divmod/test_data_set_0 >"$tmp/log" 2>&1
	check "integer x/0 and MIN/-1 at run time: no SIGFPE, the documented results" test $? = 0
	mkdir fifo && mkfifo fifo/input_0.pb && cp divmod/test_data_set_0/input_1.pb fifo/
	timeout 10 divprog/model --inputs fifo >/dev/null 2>"$tmp/err"
	check "a FIFO as input_0.pb: refused at once" test $? = 1
	check "... as not a regular file" grep -q "fifo/input_0.pb: not a regular file" "$tmp/err"
	mkdir zero && ln -s /dev/zero zero/input_0.pb && cp divmod/test_data_set_0/input_1.pb zero/
	timeout 10 divprog/model --inputs zero >/dev/null 2>"$tmp/err"
	check "/dev/zero as input_0.pb: refused" test $? = 1
	mkdir big && head -c 2000000 /dev/zero >big/input_0.pb && cp divmod/test_data_set_0/input_1.pb big/
	timeout 10 divprog/model --inputs big >/dev/null 2>"$tmp/err"
	check "an input file far larger than its tensor: refused" grep -q "more than a tensor of this input can take" "$tmp/err"
else
	fail "divmod: tapc: $(head -1 "$tmp/err")"
fi

# an arena whose size would overflow: refused by the planner's memory
# limit, and, with a limit past it, by the emitter; nothing written
"$TAPC" arena/model.onnx -o arenaprog 2>"$tmp/err"
check "an activation arena over any device's memory: refused" test $? = 1
check "... saying so" grep -q "no plan fits in memory" "$tmp/err"
"$TAPC" arena/model.onnx -cost=memory=1e30 -o arenaprog 2>"$tmp/err"
check "an activation arena over 2^56 bytes: refused" test $? = 1
check "... saying so" grep -q "stage 0: a rank's activations need more than 2^56 bytes" "$tmp/err"
check "... and nothing is written" sh -c "! ls -d arenaprog arenaprog.tmp* 2>/dev/null"

"$TAPC" "$nasty" -MD -o outbad 2>"$tmp/err"
check "-MD: file names with a newline and a backslash are refused" test $? = 1
check "... with a message naming the byte" grep -q "holds byte 0x5c, which a make rule cannot spell" "$tmp/err"
check "... and nothing is written" sh -c "! ls -d outbad outbad.d outbad.tmp* 2>/dev/null"
finish
