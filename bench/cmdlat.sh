#!/bin/bash
# Served iptables command latency (as root): `iptables -w -A/-I/-D/-N` run
# through the agent's C client (xfw-cmd, XFW_CMDSERVER=only) on an empty
# ruleset and on 10,000 FORWARD 5-tuple rules, against iptables-nft in a
# namespace of its own with the same rules, interleaved command by command.
#
#   bench/cmdlat.sh [-n ROUNDS] DIR...   (DIR holds an xfw and its xfw-cmd;
#                                         several DIRs alternate, for A/B)
#
# Each round runs, per command kind (-A, -I, -D of the rule -A added, -N of
# a new chain), per size and per DIR and iptables-nft (their order turning
# round by round), one command, timed by bash inside the namespace (fork
# and exec included), after two rounds not counted. Prints the median and
# min–max per cell.
set -euo pipefail
N=25
if [ "${1:-}" = -n ]; then N=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [-n ROUNDS] DIR..." >&2; exit 2; }
TMP=$(mktemp -d)
STOP=$1/xfw
NSS=()
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	for ns in "${NSS[@]}"; do
		ip netns exec "$ns" "$STOP" stop >/dev/null 2>&1 || true
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
python3 - "$TMP" <<'PY'
import sys
d = sys.argv[1]
head = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
open(d + "/0", "w").write(head + "COMMIT\n")
rules = "".join("-A FORWARD -s 10.1.%d.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT\n"
                % (i // 250, i % 250 + 1, 1024 + i) for i in range(10000))
open(d + "/10000", "w").write(head + rules + "COMMIT\n")
PY
PEER=cmdlat$$p
ip netns add "$PEER"
NSS+=("$PEER")
k=0
# setup NS KIND SIZE: a namespace with a veth to the peer, SIZE rules
# loaded by KIND (a DIR or nft), the agent started for a DIR.
setup() {
	local ns=$1 kind=$2 size=$3
	k=$((k + 1))
	ip netns add "$ns"
	NSS+=("$ns")
	ip link add c$$x$k netns "$ns" type veth peer name c$$y$k netns "$PEER"
	ip -n "$ns" link set lo up
	ip -n "$ns" link set c$$x$k up
	ip -n "$PEER" link set c$$y$k up
	ip -n "$ns" addr add 192.0.2.$k/24 dev c$$x$k
	if [ "$kind" = nft ]; then
		ip netns exec "$ns" iptables-nft-restore -w <"$TMP/$size"
		return
	fi
	ip netns exec "$ns" "$kind/xfw" iptables-restore -w <"$TMP/$size"
	ip netns exec "$ns" "$kind/xfw" agent --no-log >"$TMP/agent.$ns" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do
		grep -q "following the interfaces" "$TMP/agent.$ns" && return
		sleep 0.1
	done
	echo "$ns: the agent did not start" >&2
	exit 1
}
kinds=("$@" nft)
for i in "${!kinds[@]}"; do
	for size in 0 10000; do
		setup cmdlat$$-$i-$size "${kinds[$i]}" $size
	done
done
# timed NS KIND ARGS...: one command's wall time (µs) inside NS.
timed() {
	local ns=$1 kind=$2
	shift 2
	local cmd=(iptables-nft)
	[ "$kind" = nft ] || cmd=("$kind/xfw-cmd" iptables)
	XFW_CMDSERVER=only ip netns exec "$ns" bash -c '
		s=${EPOCHREALTIME/./}; "$@" >/dev/null || exit 1; e=${EPOCHREALTIME/./}; echo $((e - s))' _ "${cmd[@]}" "$@"
}
# Two rounds first that are not counted: an agent's first commands read
# the running state it keeps from then on.
for ((w = 0; w < N + 2; w++)); do
	r=$((w - 2))
	out=/dev/null
	rule=(-s 10.97.$((w / 250)).$((w % 250 + 1))/32 -d 10.2.0.1/32 -p udp -m udp --sport $((1000 + w)) --dport 53 -j ACCEPT)
	for op in A I D N; do
		case $op in
		A) args=(-w -A FORWARD "${rule[@]}") ;;
		I) args=(-w -I FORWARD "${rule[@]}") ;;
		D) args=(-w -D FORWARD "${rule[@]}") ;;
		N) args=(-w -N CMDLAT$w) ;;
		esac
		for size in 0 10000; do
			# The kinds' order turns round by round, so none is
			# always first. (The first DIR was still 0.6–1.3 ms
			# slower at 10K rules than a second copy of the same
			# build in 2026-11-28's runs: compare A/B with the DIRs
			# both ways round.)
			order=("${!kinds[@]}")
			for ((j = 0; j < ${#kinds[@]}; j++)); do
				i=${order[$(((j + w) % ${#kinds[@]}))]}
				[ $r -ge 0 ] && out=$TMP/t.$i.$size.$op
				timed cmdlat$$-$i-$size "${kinds[$i]}" "${args[@]}" >>"$out" ||
					{ echo "${kinds[$i]} $size: iptables ${args[*]} failed" >&2; exit 1; }
			done
		done
	done
done
for op in A I D N; do
	for size in 0 10000; do
		for i in "${!kinds[@]}"; do
			sort -n "$TMP/t.$i.$size.$op" | awk -v l="-$op rules=$size ${kinds[$i]}" '
				{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
				printf "%-50s median %6.2f ms  (min %.2f – max %.2f, n=%d)\n", l, m / 1000, v[1] / 1000, v[NR] / 1000, NR }'
		done
	done
done
