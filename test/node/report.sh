#!/bin/sh
# report.sh RESULTS [OPS_MD] - print docs/ops.md with its "node tests passed" and "node tests
# existing" columns regenerated from RESULTS (run.sh -r; `make check` leaves it in
# BUILDDIR/node-tests/results.txt).  OPS_MD defaults to docs/ops.md of this source tree.
# Table rows `| \`Op\` | class | notes |` get the two columns appended; rows that already have
# them (5 cells) get them replaced; the header and separator rows likewise.  An operator
# missing from RESULTS gets 0 and 0.  Writes to stdout:
#   sh test/node/report.sh build/node-tests/results.txt > /tmp/ops.md && mv /tmp/ops.md docs/ops.md
# Needs awk.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: report.sh RESULTS [OPS_MD]" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
md=${2:-$here/../../docs/ops.md}
awk '
	FILENAME == ARGV[1] { passed[$1] = $2; existing[$1] = $4; next }
	# the first three cells of a table row, or "" when the line is not a row
	function cells3(line,    n, c, i, s) {
		n = split(line, c, "|")
		if (n < 5 || c[1] != "" ) return ""
		s = "|"
		for (i = 2; i <= 4; i++) s = s c[i] "|"
		return s
	}
	/^\| operator \|/ && (head = cells3($0)) != "" {
		print head " node tests passed | node tests existing |"; intable = 1; next
	}
	intable && /^\|[-: ]*\|/ && (head = cells3($0)) != "" { print head "---:|---:|"; next }
	intable && /^\| `[A-Za-z0-9]*` \|/ && (head = cells3($0)) != "" {
		op = $0; sub(/^\| `/, "", op); sub(/`.*/, "", op)
		print head " " (op in passed ? passed[op] : 0) " | " (op in existing ? existing[op] : 0) " |"
		next
	}
	!/^\|/ { intable = 0 }
	{ print }
' "$1" "$md"
