#!/bin/sh
# run.sh [-j N] [-k REGEX] [-r RESULTS] [-K] NODEDIR - run the ONNX backend node tests in
# NODEDIR/test_*/ (made by test/node/gen.sh) through tapc.
#
# Each case whose operators are all listed in docs/ops.md is compiled with
# `tapc model.onnx -mesh 1x1 -half=exact` (the ONNX result of a half model: each node's result
# rounded to its half type, as the references are), built with `make -s` and run with
# `--check test_data_set_0`
# (rtol 1e-4, atol 1e-5 unless test/node/tolerances.txt says otherwise); a case using any
# other operator is "not applicable" and not counted.  A counted case must pass unless
# test/node/expected_failures.txt lists it (`test_name  reason`); a listed case that passes
# is an unexpected pass (XPASS) and fails the run, and so does a listed case that no longer
# exists or is no longer applicable (a stale entry).  Cases run in parallel (-j, default
# nproc), each in its own scratch directory, deleted afterwards (-K keeps failing ones).
#
# Prints one line per counted case (PASS / FAIL / XFAIL / XPASS), a per-operator table
# (passed, counted, existing = cases whose graph uses the operator), and last
# `N passed, M failed`; exits 1 on any failure.  -k REGEX runs only the matching cases
# (no stale-entry check); -r RESULTS also writes the table as `op passed counted existing`
# lines for test/node/report.sh.
#
# Needs: TAPC (the built tapc; default: tapc on PATH), srcdir (the source tree; default:
# two levels above this script), /usr/bin/python3 with python3-onnx (PYTHON overrides),
# make, a C compiler, timeout(1).
set -u
self=$0

# ------------------------------------------------------------------ one case (worker)
# run.sh --one NAME: compile, build and check one case; writes NODE_WORK/r/NAME (and
# NODE_WORK/r/NAME+frozen when it made a frozen variant) as `name<TAB>PASS|FAIL<TAB>why`.
if [ "${1:-}" = --one ]; then
	name=$2
	rtol=1e-4
	atol=1e-5
	if [ -f "$NODE_TOL" ]; then
		tol=$(awk -v n="$name" '$1 == n { print $2, $3; exit }' "$NODE_TOL")
		[ -n "$tol" ] && { rtol=${tol% *}; atol=${tol#* }; }
	fi
	# result NAME DIR PASS|FAIL WHY
	result() {
		printf '%s\t%s\t%s\n' "$1" "$3" "$4" >"$NODE_WORK/r/$1"
		if [ "$3" = PASS ] || [ -z "$NODE_KEEP" ]; then rm -rf "$2"; fi
	}
	# try NAME CASEDIR: compile CASEDIR/model.onnx into NODE_WORK/b/NAME, build, check
	try() {
		w="$NODE_WORK/b/$1"
		log="$NODE_WORK/l/$1"
		rm -rf "$w"
		if ! timeout 60 "$TAPC" "$2/model.onnx" -mesh 1x1 -half=exact -o "$w" >"$log" 2>&1; then
			result "$1" "$w" FAIL "tapc: $(grep -m1 . "$log")"
		elif ! timeout 300 make -s -C "$w" >"$log" 2>&1; then
			result "$1" "$w" FAIL "make: $(grep -m1 -e 'error' -e 'Error' "$log" || head -1 "$log")"
		elif timeout 60 "$w/model" --check "$2/test_data_set_0" --rtol "$rtol" --atol "$atol" >"$log" 2>&1; then
			result "$1" "$w" PASS ""
		else
			rc=$?
			msg=$(grep -v -m1 ': ok$' "$log")
			[ $rc -ge 124 ] && msg="exit $rc (timeout or signal) $msg"
			result "$1" "$w" FAIL "check: $msg"
		fi
	}
	# the graph input tapc wanted as a compile-time constant, from its error line
	wanted() {
		sed -n "s/.*: input [0-9]* '\([^']*\)' is not a compile-time constant.*/\1/p" "$NODE_WORK/l/$1" | head -1
	}
	try "$name" "$NODE_DIR/$name"
	# a frozen variant: the inputs tapc needs at compile time become initializers
	names=
	n=$(wanted "$name")
	fz="$NODE_WORK/f/$name"
	while [ -n "$n" ]; do
		case " $names " in *" $n "*) break ;; esac
		names="$names $n"
		rm -rf "$fz"
		# shellcheck disable=SC2086 # tensor names are single words in these tests
		"$NODE_PY" -W ignore "$NODE_HERE/freeze.py" "$NODE_DIR/$name" "$fz" $names 2>/dev/null || break
		try "$name+frozen" "$fz"
		n=$(wanted "$name+frozen")
	done
	[ -z "$NODE_KEEP" ] && rm -rf "$fz"
	exit 0
fi

# ------------------------------------------------------------------ driver
jobs=$(nproc 2>/dev/null || echo 2)
filter=
results=
keep=
while [ $# -gt 1 ]; do
	case $1 in
	-j) jobs=$2; shift 2 ;;
	-k) filter=$2; shift 2 ;;
	-r) results=$2; shift 2 ;;
	-K) keep=1; shift ;;
	*) break ;;
	esac
done
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
	echo "usage: run.sh [-j N] [-k REGEX] [-r RESULTS] [-K] NODEDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$self")" && pwd)
NODE_DIR=$(cd "$1" && pwd)
: "${srcdir:=$here/../..}"
: "${TAPC:=tapc}"
py=${PYTHON:-/usr/bin/python3}
expected="$here/expected_failures.txt"
NODE_TOL="$here/tolerances.txt"
NODE_WORK=$(mktemp -d "${TMPDIR:-/tmp}/tapc-node.XXXXXX")
NODE_KEEP=$keep
NODE_PY=$py
NODE_HERE=$here
export NODE_DIR NODE_WORK NODE_TOL NODE_KEEP NODE_PY NODE_HERE TAPC
[ -n "$keep" ] || trap 'rm -rf "$NODE_WORK"' EXIT
trap 'exit 1' INT TERM
mkdir -p "$NODE_WORK/b" "$NODE_WORK/f" "$NODE_WORK/l" "$NODE_WORK/r"
if [ ! -f "$expected" ]; then
	expected="$NODE_WORK/empty"
	: >"$expected"
fi

# the supported operators, in the order of docs/ops.md
# shellcheck disable=SC2016 # the backquotes are markdown
sed -n 's/^| `\([A-Za-z0-9]*\)` |.*/\1/p' "$srcdir/docs/ops.md" >"$NODE_WORK/supported"
if [ ! -s "$NODE_WORK/supported" ]; then
	echo "run.sh: no operators found in $srcdir/docs/ops.md" >&2
	exit 1
fi
# case<TAB>ops, for every case
if ! "$py" -W ignore "$here/ops.py" "$NODE_DIR" >"$NODE_WORK/ops"; then
	echo "run.sh: $py $here/ops.py failed (needs python3-onnx)" >&2
	exit 1
fi
# the counted cases: every operator supported (and matching -k)
awk -F '\t' -v re="$filter" '
	FILENAME == ARGV[1] { ok[$1] = 1; next }
	re != "" && $1 !~ re { next }
	{ n = split($2, o, " "); for (i = 1; i <= n; i++) if (!(o[i] in ok)) next; print $1 }
' "$NODE_WORK/supported" "$NODE_WORK/ops" >"$NODE_WORK/counted"

start=$(date +%s)
xargs -P "$jobs" -n 1 sh "$self" --one <"$NODE_WORK/counted"
end=$(date +%s)
cat /dev/null "$NODE_WORK"/r/* 2>/dev/null | sort >"$NODE_WORK/raw"

# verdicts: case<TAB>PASS|FAIL|XFAIL|XPASS<TAB>reason, and the report
awk -F '\t' -v re="$filter" -v results="$results" -v secs=$((end - start)) \
    -v jobs="$jobs" -v keep="$keep" -v work="$NODE_WORK" '
	FILENAME == ARGV[1] {            # expected_failures.txt: test_name  reason
		if ($0 ~ /^[ \t]*(#|$)/) next
		line = $0; sub(/^[ \t]+/, "", line)
		nm = line; sub(/[ \t].*/, "", nm)
		why = substr(line, length(nm) + 1); sub(/^[ \t]+/, "", why)
		xf[nm] = why; xorder[++nx] = nm; next
	}
	FILENAME == ARGV[2] { sup[++nsup] = $1; next }
	FILENAME == ARGV[3] {            # case<TAB>ops
		if (re != "" && $1 !~ re) next
		caseops[$1] = $2; all[++ncase] = $1; next
	}
	FILENAME == ARGV[4] { counted[$1] = 1; next }
	{                                # raw worker results
		res[$1] = $2; msg[$1] = $3
		if ($1 ~ /\+frozen$/) frozen[++nfrozen] = $1
	}
	function verdict_of(c) {
		if (!(c in res)) { why = "no result (worker died)"; return "FAIL" }
		if (res[c] == "PASS") {
			if (c in xf) { why = "listed in expected_failures.txt (" xf[c] ") but passes"; return "XPASS" }
			why = ""; return "PASS"
		}
		if (c in xf) { why = xf[c]; return "XFAIL" }
		why = msg[c]; return "FAIL"
	}
	function report(c, st) {
		verdict[c] = st
		if (st == "PASS") pass++
		else if (st == "XFAIL") xfail++
		else fail++
		print st ": " c (why != "" ? ": " why : "")
		if (st == "FAIL" && keep != "") print "    kept in " work "/b/" c
	}
	END {
		pass = fail = xfail = na = nstale = 0
		for (i = 1; i <= ncase; i++) {
			c = all[i]
			if (!(c in counted)) { na++; continue }
			report(c, verdict_of(c))
		}
		opass = pass; oxfail = xfail; ofail = fail
		if (nfrozen) {
			print "\nfrozen variants (the inputs tapc needs at compile time made initializers):"
			for (i = 1; i <= nfrozen; i++) report(frozen[i], verdict_of(frozen[i]))
		}
		if (re == "") {
			for (i = 1; i <= nx; i++) {
				c = xorder[i]
				if (c in verdict) continue
				fail++; nstale++
				if (c in caseops) print "FAIL: " c ": stale expected_failures.txt entry: not applicable (uses " caseops[c] ")"
				else print "FAIL: " c ": stale expected_failures.txt entry: no such case, or no frozen variant"
			}
		}
		# per-operator table: official cases, and frozen variants as passed/made
		printf "\n%-20s %7s %8s %9s %7s\n", "operator", "passed", "counted", "existing", "frozen"
		for (j = 1; j <= nsup; j++) {
			op = sup[j]; p = n = t = fp = fn = 0
			for (i = 1; i <= ncase; i++) {
				c = all[i]
				if ((" " caseops[c] " ") !~ (" " op " ")) continue
				t++
				if (c in verdict) { n++; if (verdict[c] == "PASS") p++ }
				if ((c "+frozen") in verdict) { fn++; if (verdict[c "+frozen"] == "PASS") fp++ }
			}
			if (re != "" && t == 0) continue
			printf "%-20s %7d %8d %9d %7s\n", op, p, n, t, fn ? fp "/" fn : ""
			if (results != "") print op, p, n, t > results
		}
		printf "\n%d cases: %d counted (%d passed, %d xfail, %d failed), %d not applicable; ", \
			ncase, ncase - na, opass, oxfail, ofail, na
		printf "%d frozen variants (%d passed, %d xfail, %d failed); %d s with -j %s\n", \
			nfrozen, pass - opass, xfail - oxfail, fail - ofail - nstale, secs, jobs
		if (nstale) printf "%d stale expected_failures.txt entries\n", nstale
		printf "%d passed, %d failed\n", pass, fail
		exit fail != 0
	}
' "$expected" "$NODE_WORK/supported" "$NODE_WORK/ops" "$NODE_WORK/counted" "$NODE_WORK/raw"
