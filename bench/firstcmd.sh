#!/bin/bash
# The first iptables command in a fresh network namespace (as root):
# `iptables -w -A INPUT -p tcp --dport 22 -j ACCEPT` in xfw's own process
# (it loads and verifies the programs) and served by an agent that loaded
# them ahead (started in the namespace before, as its unit would be; the
# command waits until the agent logged its load ahead), against
# iptables-nft and iptables-legacy, each in a namespace of its own with
# loopback and a veth pair, the four alternating round by round.
#
#   bench/firstcmd.sh [-n ROUNDS] BINDIR   (BINDIR holds xfw and xfw-cmd)
#
# Runs in a private mount namespace whose /run/xfw.lock is a file of its
# own, so other work's xfw commands do not hold it. Prints the median and
# min–max of each.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
N=7
if [ "${1:-}" = -n ]; then N=$2; shift 2; fi
[ $# -eq 1 ] || { echo "usage: $0 [-n ROUNDS] BINDIR" >&2; exit 2; }
B=$(cd "$1" && pwd)
if [ -z "${FIRSTCMD_PRIVATE:-}" ]; then
	lock=$(mktemp)
	trap 'rm -f "$lock"' EXIT
	FIRSTCMD_PRIVATE=1 unshare -m bash -c 'mount --make-rprivate / && mount --bind "$1" /run/xfw.lock && exec "$2" -n "$3" "$4"' \
		_ "$lock" "$0" "$N" "$B"
	exit
fi
NS=
TMP=$(mktemp -d)
AGENT_PID=
trap 'ns_clean "$NS" "$B/xfw"; rm -rf "$TMP"' EXIT
rule=(-w -A INPUT -p tcp --dport 22 -j ACCEPT)
kinds=(own served iptables-nft iptables-legacy)
for ((r = 0; r < N; r++)); do
	for ((j = 0; j < ${#kinds[@]}; j++)); do
		kind=${kinds[$(((j + r) % ${#kinds[@]}))]}
		NS=firstcmd$$-$r-$j
		ns_make "$NS"
		case $kind in
		own) cmd=("$B/xfw" iptables) ;;
		served)
			cmd=("$B/xfw-cmd" iptables)
			agent_start "$NS" "$B/xfw" "$TMP/agent.log"
			for _ in $(seq 100); do
				grep -q "loaded and verified ahead" "$TMP/agent.log" && break
				sleep 0.1
			done
			grep -q "loaded and verified ahead" "$TMP/agent.log" ||
				{ echo "the agent did not load ahead" >&2; cat "$TMP/agent.log" >&2; exit 1; } ;;
		*) cmd=("$kind") ;;
		esac
		# XFW_CMDSERVER=only: the served command fails unless the agent serves it.
		XFW_CMDSERVER=$([ "$kind" = served ] && echo only || echo off) ip netns exec "$NS" bash -c '
			s=${EPOCHREALTIME/./}; "$@" >/dev/null || exit 1; e=${EPOCHREALTIME/./}; echo $((e - s))' _ "${cmd[@]}" "${rule[@]}" \
			>>"$TMP/t.$kind" || { echo "$kind: the first command failed" >&2; exit 1; }
		ns_clean "$NS" "$B/xfw"
		NS=
	done
done
for kind in "${kinds[@]}"; do
	latstats "$kind" 18 <"$TMP/t.$kind"
done
