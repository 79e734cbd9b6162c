#!/bin/bash
# ipset command latency (as root): `xfw ipset add/del` of one member, timed
# in a network namespace of its own, against the kernel's ipset in the same
# namespace. Cases: a hash:ip set of 1M members used by a rule (DXR patch),
# a hash:ip,port set used by a rule (hash patch), a set no rule uses.
#
#   bench/ipsetlat.sh [-n N] [-agent] BIN...   (several BINs alternate, for A/B)
#
# Prints, per binary and case, the median and min–max over N add/del
# commands (each run by bash inside the namespace, fork and exec included,
# as for the kernel's ipset). With -agent, xfw's agent (the xfw beside the
# first BIN) runs in the namespace and serves the commands that ask it: a
# BIN may be the C client (bin/xfw-cmd, run as `xfw-cmd ipset …`), and a
# BIN written BIN=own runs with XFW_CMDSERVER=off (in its own process).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
N=60
AGENT=
while [ $# -gt 0 ]; do
	case $1 in
	-n) N=$2; shift 2 ;;
	-agent) AGENT=1; shift ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [-n N] [-agent] BIN..." >&2; exit 2; }
XFW=$(dirname "${1%=own}")/xfw
NS=ipsetlat$$
TMP=$(mktemp -d)
AGENT_PID=
trap 'ns_clean "$NS" "$XFW"; rm -rf "$TMP"' EXIT
ns_make "$NS"
ip -n "$NS" addr add 192.0.2.254/24 dev v0

# The sets: "big" 1,000,000 random hosts (seeded), "ports" 1,000 ip,port
# members, "unused" 1,000 hosts; rules use big and ports.
python3 - "$TMP/sets" <<'PY'
import random, sys
random.seed(1)
out = ["create big hash:ip family inet hashsize 1048576 maxelem 2000000",
       "create ports hash:ip,port family inet",
       "create unused hash:ip family inet"]
seen = set()
while len(seen) < 1000000:
    a = random.getrandbits(32)
    if (a >> 24) in (0, 10, 127) or (a >> 24) >= 224:
        continue
    seen.add(a)
out += ["add big %d.%d.%d.%d" % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255) for a in sorted(seen)]
out += ["add ports 192.0.2.%d,tcp:%d" % (i % 250 + 1, 1000 + i) for i in range(1000)]
out += ["add unused 198.51.%d.%d" % (i // 250, i % 250 + 1) for i in range(1000)]
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
cat > "$TMP/rules" <<'R'
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m set --match-set big src -j DROP
-A FORWARD -p tcp -m set --match-set ports src,dst -j DROP
COMMIT
R
ip netns exec "$NS" "$XFW" ipset restore -file "$TMP/sets"
ip netns exec "$NS" "$XFW" iptables-restore -w < "$TMP/rules"
ip netns exec "$NS" ipset restore -file "$TMP/sets"
# The kernel's sets used by rules too (iptables of the namespace).
ip netns exec "$NS" iptables -A FORWARD -m set --match-set big src -j DROP
ip netns exec "$NS" iptables -A FORWARD -p tcp -m set --match-set ports src,dst -j DROP
for b in "$@"; do
	b=${b%=own}
	XFW_CMDSERVER=off XFW_TRACE=1 ip netns exec "$NS" "$b" ipset add big 10.1.2.3 2>&1 | grep -q 'patch set tables (true, <nil>)' ||
		{ echo "$b: add to big was not patched" >&2; exit 1; }
	XFW_CMDSERVER=off ip netns exec "$NS" "$b" ipset del big 10.1.2.3
done
if [ -n "$AGENT" ]; then
	agent_start "$NS" "$XFW" "$TMP/agent.log"
	XFW_CMDSERVER=only ip netns exec "$NS" "$XFW" ipset list -n >/dev/null ||
		{ echo "the agent does not serve ipset" >&2; cat "$TMP/agent.log" >&2; exit 1; }
fi

# run LABEL CMD...: N add/del pairs inside the namespace, one time (µs)
# per command on stdout as "add T" / "del T".
run() {
	local mode=
	case ${4:-} in *=own) mode=off; set -- "$1" "$2" "$3" "${4%=own}" "${@:5}" ;; esac
	XFW_CMDSERVER=$mode ip netns exec "$NS" bash -c '
		n=$1; set=$2; el=$3; shift 3
		us() { local s=${EPOCHREALTIME/./}; "$@" >/dev/null; local e=${EPOCHREALTIME/./}; echo $((e - s)); }
		for ((i = 0; i < n; i++)); do
			echo "add $(us "$@" add $set $el)"
			echo "del $(us "$@" del $set $el)"
		done' _ "$@"
}
stats() { # label file op
	awk -v op="$3" '$1 == op { print $2 }' "$2" | latstats "$1 $3" 34
}
cases="big:10.1.2.3 ports:192.0.2.1,udp:5000 unused:10.9.9.9"
# Alternate the binaries in rounds of 10 pairs, so that load from other jobs
# falls on all alike.
rounds=$(( (N + 9) / 10 ))
for ((r = 0; r < rounds; r++)); do
	for c in $cases; do
		set=${c%%:*} el=${c#*:}
		for b in "$@"; do
			run 10 "$set" "$el" "$b" ipset >>"$TMP/$(basename "$b").$set"
		done
		run 10 "$set" "$el" ipset >>"$TMP/kernel.$set"
	done
done
for c in $cases; do
	set=${c%%:*}
	for b in "$@" kernel; do
		for op in add del; do
			stats "$(basename "$b") $set" "$TMP/$(basename "$b").$set" $op
		done
	done
done
