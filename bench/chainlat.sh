#!/bin/bash
# fail2ban's ban and unban command latency (as root): `iptables -I f2b-sshd
# 1 -s ADDR -j REJECT …` and the `-D` of it, in a network namespace of its
# own holding fail2ban's chain (RETURN, the multiport jump from INPUT, one
# address banned), through xfw-cmd served by xfw's agent, xfw in its own
# process (XFW_CMDSERVER=off) and iptables-legacy, in rounds of 10 pairs
# alternating.
#
#   bench/chainlat.sh [-n N] BINDIR   (BINDIR holds xfw and xfw-cmd)
#
# Prints the median and min–max over N bans and N unbans of each.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
N=40
if [ "${1:-}" = -n ]; then N=$2; shift 2; fi
[ $# -eq 1 ] || { echo "usage: $0 [-n N] BINDIR" >&2; exit 2; }
B=$1
NS=chainlat$$
TMP=$(mktemp -d)
AGENT_PID=
trap 'ns_clean "$NS" "$B/xfw"; rm -rf "$TMP"' EXIT
ns_make "$NS"
for ipt in "$B/xfw iptables" iptables-legacy; do
	ip netns exec "$NS" $ipt -w -N f2b-sshd
	ip netns exec "$NS" $ipt -w -A f2b-sshd -j RETURN
	ip netns exec "$NS" $ipt -w -I INPUT -p tcp -m multiport --dports 22 -j f2b-sshd
	ip netns exec "$NS" $ipt -w -I f2b-sshd 1 -s 10.77.0.1 -j REJECT --reject-with icmp-port-unreachable
done
agent_start "$NS" "$B/xfw" "$TMP/agent.log"
XFW_CMDSERVER=only ip netns exec "$NS" "$B/xfw-cmd" iptables -w -S >/dev/null ||
	{ echo "the agent does not serve the commands" >&2; cat "$TMP/agent.log" >&2; exit 1; }

# run LABEL CMD...: 10 ban/unban pairs inside the namespace, one time (µs)
# per command on stdout as "LABEL ban T" / "LABEL unban T".
run() {
	local label=$1
	shift
	ip netns exec "$NS" bash -c '
		us() { local s=${EPOCHREALTIME/./}; "$@" >/dev/null; local e=${EPOCHREALTIME/./}; echo $((e - s)); }
		for ((i = 1; i <= 10; i++)); do
			echo "ban $(us "$@" -w -I f2b-sshd 1 -s 192.0.2.$i -j REJECT --reject-with icmp-port-unreachable)"
			echo "unban $(us "$@" -w -D f2b-sshd -s 192.0.2.$i -j REJECT --reject-with icmp-port-unreachable)"
		done' _ "$@" | sed "s/^/$label /"
}
for ((r = 0; r < (N + 9) / 10; r++)); do
	run served "$B/xfw-cmd" iptables >>"$TMP/data"
	XFW_CMDSERVER=off run own "$B/xfw" iptables >>"$TMP/data"
	run kernel iptables-legacy >>"$TMP/data"
done
for l in served own kernel; do
	for op in ban unban; do
		awk -v l=$l -v op=$op '$1 == l && $2 == op { print $3 }' "$TMP/data" | latstats "$l $op" 14
	done
done
