#!/usr/bin/env bash
# e2e-shards.sh — deal tests/e2e's tests into shards of about equal time.
#
#   e2e-shards.sh SHARDS DURATIONS < names   prints SHARDS lines, each the
#                                            '|'-joined names of one shard
#   e2e-shards.sh --record LOG > DURATIONS   writes the durations file from
#                                            the output of a `go test -v` run
#
# DURATIONS holds one "TestName seconds" line per test, as measured by a
# `make test TEST_FLAGS=-v` run (--record keeps the top-level tests' "---
# PASS" lines of the e2e-N streams, without the prefix make adds). The names are dealt longest
# first, each to the shard with the least time so far (the longest-
# processing-time rule); a test the file does not know (new, or the file
# missing) counts as the median of those it knows, or 1 s if it knows none,
# and ties go to the lower shard, so the output depends on the names and
# the file only. A name list with duplicates or an empty one is refused.
set -euo pipefail

if [ "${1:-}" = --record ]; then
	[ $# -eq 2 ] || { echo "usage: $0 --record LOG" >&2; exit 2; }
	# "e2e-0: --- PASS: TestX (12.34s)" from the shards' streams only (not
	# the other packages' or the alone tests'); subtests are indented.
	sed -nE 's/^e2e-[0-9]+: //p' "$2" |
		awk '/^--- (PASS|FAIL): Test/ { d = $4; gsub(/[()s]/, "", d); print $3, d }' |
		LC_ALL=C sort -u -k1,1
	exit 0
fi

[ $# -eq 2 ] || { echo "usage: $0 SHARDS DURATIONS < names" >&2; exit 2; }
shards=$1 durations=$2
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "$0: SHARDS must be a positive number, not '$shards'" >&2; exit 2; }
[ -e "$durations" ] || durations=/dev/null

awk -v n="$shards" '
	# First file: the known durations.
	FILENAME == ARGV[1] { if (NF == 2 && $2 ~ /^[0-9.]+$/) known[$1] = $2 + 0; next }
	NF == 0 { next }
	{
		if ($1 in seen) { print "e2e-shards: duplicate test name " $1 > "/dev/stderr"; bad = 1; exit 2 }
		seen[$1] = 1; names[++count] = $1
	}
	END {
		if (bad) exit 2
		if (count == 0) { print "e2e-shards: no test names" > "/dev/stderr"; exit 2 }
		# The median of the known durations stands in for the unknown.
		m = 0; for (t in known) vals[++m] = known[t]
		for (i = 2; i <= m; i++) for (j = i; j > 1 && vals[j-1] > vals[j]; j--) { x = vals[j]; vals[j] = vals[j-1]; vals[j-1] = x }
		fallback = m ? vals[int((m + 1) / 2)] : 1
		for (i = 1; i <= count; i++) cost[i] = (names[i] in known) ? known[names[i]] : fallback
		# Longest first (by name on equal time), each to the least loaded shard.
		for (i = 1; i <= count; i++) order[i] = i
		for (i = 2; i <= count; i++)
			for (j = i; j > 1; j--) {
				a = order[j-1]; b = order[j]
				if (cost[a] > cost[b] || (cost[a] == cost[b] && names[a] < names[b])) break
				order[j-1] = b; order[j] = a
			}
		for (s = 0; s < n; s++) load[s] = 0
		for (i = 1; i <= count; i++) {
			k = order[i]; best = 0
			for (s = 1; s < n; s++) if (load[s] < load[best]) best = s
			load[best] += cost[k]
			line[best] = line[best] (line[best] == "" ? "" : "|") names[k]
		}
		for (s = 0; s < n; s++) print line[s]
	}
' "$durations" -
