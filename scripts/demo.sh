#!/usr/bin/env bash
# xfw demo: three namespaces gen — fw — sink joined by veth pairs, an
# example ruleset loaded into xfw inside fw, traffic to, through and from
# fw, and the per-rule counters. Everything it creates is removed on exit.
# Run as root from the repository root (make demo).
set -euo pipefail

XFW="$(pwd)/bin/xfw"
P="xfwdemo"
GEN="$P-gen" FW="$P-fw" SINK="$P-sink"
LOGPID=""

cleanup() {
	set +e
	[ -n "$LOGPID" ] && kill "$LOGPID" 2>/dev/null && wait "$LOGPID" 2>/dev/null
	for ns in "$GEN" "$FW" "$SINK"; do ip netns exec "$ns" "$XFW" stop 2>/dev/null; done
	for ns in "$GEN" "$FW" "$SINK"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
cleanup
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

say "topology: $GEN (10.10.1.2) — $FW (10.10.1.1 | 10.10.2.1) — $SINK (10.10.2.2)"
for ns in "$GEN" "$FW" "$SINK"; do
	ip netns add "$ns"
	nsx "$ns" ip link set lo up
done
ip link add veth-gen netns "$GEN" type veth peer name fw-in netns "$FW"
ip link add fw-out netns "$FW" type veth peer name veth-sink netns "$SINK"
nsx "$GEN" ip addr add 10.10.1.2/24 dev veth-gen
nsx "$GEN" ip -6 addr add fd10:1::2/64 dev veth-gen nodad
nsx "$FW" ip addr add 10.10.1.1/24 dev fw-in
nsx "$FW" ip -6 addr add fd10:1::1/64 dev fw-in nodad
nsx "$FW" ip addr add 10.10.2.1/24 dev fw-out
nsx "$FW" ip -6 addr add fd10:2::1/64 dev fw-out nodad
nsx "$SINK" ip addr add 10.10.2.2/24 dev veth-sink
nsx "$SINK" ip -6 addr add fd10:2::2/64 dev veth-sink nodad
nsx "$GEN" ip link set veth-gen up
nsx "$FW" ip link set fw-in up
nsx "$FW" ip link set fw-out up
nsx "$SINK" ip link set veth-sink up
nsx "$GEN" ip route add default via 10.10.1.1
nsx "$GEN" ip -6 route add default via fd10:1::1
nsx "$SINK" ip route add default via 10.10.2.1
nsx "$SINK" ip -6 route add default via fd10:2::1
nsx "$FW" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1

RULES=$(mktemp)
cat >"$RULES" <<'EOF'
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:web - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -p udp -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable
-A FORWARD -p tcp -m multiport --dports 80,443 -j web
-A FORWARD -p udp -m udp --dport 5000:5010 -j ACCEPT
-A FORWARD -p tcp -m tcp --sport 80 -j ACCEPT
-A FORWARD -j LOG --log-prefix "xfw-demo-drop: "
-A OUTPUT -p udp -m udp --dport 9 -j DROP
-A web -s 10.10.1.0/25 -p tcp -m tcp --dport 80 -j ACCEPT
-A web -p tcp -j REJECT --reject-with tcp-reset
COMMIT
EOF
say "ruleset (iptables-restore format)"
cat "$RULES"
if ! nsx "$FW" "$XFW" iptables-restore -w 30 "$RULES"; then
	echo "demo: loading the ruleset failed" >&2
	exit 1
fi
rm -f "$RULES"
# On veth, a native-XDP reply (XDP_TX, used by REJECT) reaches the peer
# promptly only if the peer runs XDP too: give gen and sink an accept-all
# xfw (real NICs do not need this).
nsx "$GEN" "$XFW" iptables-restore -w 30 /dev/null
nsx "$SINK" "$XFW" iptables-restore -w 30 /dev/null
# Not through nsx: a backgrounded function is a subshell whose pid is not
# xfw's, and killing it would leave `xfw log` running. `ip netns exec`
# execs the command, so $! is xfw itself.
ip netns exec "$FW" "$XFW" log >"/tmp/$P-log.txt" 2>&1 &
LOGPID=$!

say "programs attached in $FW (xfw status)"
nsx "$FW" "$XFW" status

say "traffic"
try() { # description, expected, command…
	local what=$1 want=$2; shift 2
	if "$@" >/dev/null 2>&1; then got=ok; else got=blocked; fi
	printf '  %-56s %-8s (expected %s)\n' "$what" "$got" "$want"
}
# udp_arrives NS-FROM NS-TO ADDR PORT: does a datagram arrive?
udp_arrives() {
	local from=$1 to=$2 addr=$3 port=$4 out
	out=$(mktemp)
	nsx "$to" timeout 2 nc -u -l -p "$port" >"$out" 2>/dev/null &
	local pid=$!
	sleep 0.3
	echo "xfw-demo" | nsx "$from" nc -u -w1 "$addr" "$port" >/dev/null 2>&1 || true
	wait "$pid" 2>/dev/null || true
	grep -q xfw-demo "$out"; local rc=$?
	rm -f "$out"
	return $rc
}
nsx "$FW" bash -c 'exec timeout 20 nc -lk -p 22 >/dev/null' & L22=$!
nsx "$SINK" bash -c 'exec timeout 20 nc -lk -p 80 >/dev/null' & L80=$!
sleep 0.5
try "ping gen → fw (INPUT ACCEPT icmp 8)" ok nsx "$GEN" ping -c1 -W1 10.10.1.1
try "tcp gen → fw:22 (INPUT ACCEPT)" ok nsx "$GEN" nc -z -w2 10.10.1.1 22
try "tcp gen → fw:23 (INPUT policy DROP)" blocked nsx "$GEN" nc -z -w1 10.10.1.1 23
try "udp gen → fw:53 (INPUT REJECT port-unreachable)" blocked udp_arrives "$GEN" "$FW" 10.10.1.1 53
try "tcp gen → sink:80 from .2 (FORWARD → web ACCEPT)" ok nsx "$GEN" nc -z -w2 10.10.2.2 80
try "tcp gen → sink:443 (FORWARD → web REJECT tcp-reset)" blocked nsx "$GEN" nc -z -w2 10.10.2.2 443
try "udp gen → sink:5001 (FORWARD ACCEPT)" ok udp_arrives "$GEN" "$SINK" 10.10.2.2 5001
try "udp gen → sink:6000 (FORWARD LOG, policy DROP)" blocked udp_arrives "$GEN" "$SINK" 10.10.2.2 6000
try "ping gen → sink (FORWARD LOG, policy DROP)" blocked nsx "$GEN" ping -c1 -W1 10.10.2.2
try "udp fw → sink:9 (OUTPUT DROP)" blocked udp_arrives "$FW" "$SINK" 10.10.2.2 9
try "udp fw → sink:10 (OUTPUT policy ACCEPT)" ok udp_arrives "$FW" "$SINK" 10.10.2.2 10
kill "$L22" "$L80" 2>/dev/null || true
wait "$L22" "$L80" 2>/dev/null || true

say "a blocklist (xfw ipset + -m set)"
nsx "$FW" "$XFW" ipset create blocklist hash:net
nsx "$FW" "$XFW" ipset add blocklist 10.10.1.0/30
nsx "$FW" "$XFW" iptables -w 30 -I INPUT 1 -m set --match-set blocklist src -j DROP
try "ping gen → fw (gen in blocklist: INPUT DROP)" blocked nsx "$GEN" ping -c1 -W1 10.10.1.1
nsx "$FW" "$XFW" ipset add blocklist 10.10.1.2 nomatch
try "ping gen → fw (gen excepted: nomatch entry)" ok nsx "$GEN" ping -c1 -W1 10.10.1.1
nsx "$FW" "$XFW" ipset list blocklist

say "stateful FORWARD (-m conntrack): replies only for connections gen opened"
nsx "$FW" "$XFW" iptables -w 30 -I FORWARD 1 -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
nsx "$FW" "$XFW" iptables -w 30 -I FORWARD 2 -i fw-in -p tcp --dport 8080 -m conntrack --ctstate NEW -j ACCEPT
nsx "$SINK" bash -c 'exec timeout 20 nc -lk -p 8080 >/dev/null' & L8080=$!
nsx "$GEN" bash -c 'exec timeout 20 nc -lk -p 8081 >/dev/null' & L8081=$!
sleep 0.5
try "tcp gen → sink:8080 (NEW, then ESTABLISHED both ways)" ok nsx "$GEN" nc -z -w2 10.10.2.2 8080
try "tcp sink → gen:8081 (NEW from the wrong side: policy DROP)" blocked nsx "$SINK" nc -z -w2 10.10.1.2 8081
kill "$L8080" "$L8081" 2>/dev/null || true
wait "$L8080" "$L8081" 2>/dev/null || true
say "tracked connections (xfw conntrack -L)"
nsx "$FW" "$XFW" conntrack -L || true

say "counters (xfw iptables -L -v -n)"
nsx "$FW" "$XFW" iptables -w 30 -L -v -n
say "counters (xfw iptables-save -c)"
nsx "$FW" "$XFW" iptables-save -c
sleep 0.3
say "LOG lines (xfw log, kernel LOG format)"
cat "/tmp/$P-log.txt" || true
rm -f "/tmp/$P-log.txt"
say "stop"
nsx "$FW" "$XFW" stop
nsx "$FW" ip link show fw-in | grep -c xdp >/dev/null && echo "  still attached?!" || echo "  xfw removed from $FW"
