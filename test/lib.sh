# lib.sh - shared by the shell tests: counters and the closing summary.
# Needs TAPC (the built tapc) and srcdir (the source tree) from make check.
: "${TAPC:?TAPC must name the tapc binary}"
: "${srcdir:?srcdir must name the source tree}"
npass=0
nfail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tapc-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

pass() { npass=$((npass + 1)); echo "PASS: $*"; }
fail() { nfail=$((nfail + 1)); echo "FAIL: $*"; }
# check NAME COMMAND...: pass when the command succeeds
check() { _what=$1; shift; if "$@"; then pass "$_what"; else fail "$_what"; fi; }
finish() {
	echo "$npass passed, $nfail failed"
	[ "$nfail" = 0 ]
}
# fixture_args DIR: the options a fixture needs on every compilation (its
# DIR/args, e.g. -dim for a model with symbolic non-batch dims), one line
fixture_args() { [ -f "$1/args" ] && cat "$1/args"; true; }
