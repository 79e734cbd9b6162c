package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m owner against the kernel: counting rules in filter OUTPUT and mangle
// POSTROUTING through xfw and through iptables-legacy in twin topologies,
// the same traffic from fw's own sockets (datagrams sent by processes of
// different users and groups, a TCP handshake over lo whose SYN-ACK comes
// from a request socket, owned by its listener) and from the kernel's
// sockets without a file (the RST answering a SYN to a closed port, the
// ICMP error answering a datagram to a closed port), every rule's counters
// compared after each.

// ownerRuleset is the ruleset of TestOwnerAgainstKernel (IPv4 spelling;
// ownerRuleset6 the IPv6 one).
const ownerRuleset = `*filter
-A OUTPUT -p udp -m owner --uid-owner 0
-A OUTPUT -p udp -m owner --uid-owner 1000-1999
-A OUTPUT -p udp -m owner ! --uid-owner 1000
-A OUTPUT -p udp -m owner --gid-owner 2000
-A OUTPUT -p udp -m owner ! --gid-owner 0-999
-A OUTPUT -p udp -m owner --uid-owner 1000 --gid-owner 2000
-A OUTPUT -p udp -m owner ! --uid-owner 0 ! --gid-owner 0
-A OUTPUT -p udp -m owner --socket-exists
-A OUTPUT -p udp -m owner ! --socket-exists
-A OUTPUT -p udp -m owner --uid-owner 65534
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN -m owner --uid-owner 0
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN,ACK -m owner --uid-owner 1000 --gid-owner 2000
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN,ACK -m owner --uid-owner 0
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,ACK SYN,ACK -m owner --socket-exists
-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -m owner --socket-exists
-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -m owner ! --socket-exists
-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -m owner --uid-owner 0
-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -m owner ! --uid-owner 0
-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -m owner ! --socket-exists ! --uid-owner 0
-A OUTPUT -p icmp -m icmp --icmp-type 3 -m owner --socket-exists
-A OUTPUT -p icmp -m icmp --icmp-type 3 -m owner --uid-owner 0
-A OUTPUT -p icmp -m icmp --icmp-type 3 -m owner ! --gid-owner 0
COMMIT
*mangle
-A POSTROUTING -p udp -m owner --uid-owner 1000
-A POSTROUTING -p udp -m owner ! --gid-owner 2000
-A POSTROUTING -p tcp -m tcp --tcp-flags RST RST -m owner ! --uid-owner 0
COMMIT
`

// ownerRuleset6 is ownerRuleset for ip6tables (ICMPv6 port unreachable).
var ownerRuleset6 = strings.NewReplacer("-p icmp -m icmp --icmp-type 3",
	"-p ipv6-icmp -m icmp6 --icmpv6-type 1").Replace(ownerRuleset)

// ownerSender sends one datagram to ADDR port 9300 as user UID and group
// GID (no supplementary groups), or as root when UID is -1.
const ownerSender = `
import os, socket, sys
uid, gid, addr = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
if uid >= 0:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
s = socket.socket(fam, socket.SOCK_DGRAM)
s.sendto(b"owner", (addr, 9300))
`

// ownerHandshake makes a TCP connection over lo to ADDR port 9301: the
// listener belongs to user 1000 group 2000 (a child that dropped root
// first), the client to root.
const ownerHandshake = `
import os, socket, sys
addr = sys.argv[1]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setgroups([])
    os.setgid(2000)
    os.setuid(1000)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind((addr, 9301))
    s.listen(1)
    os.write(w, b"x")
    s.settimeout(3)
    c, _ = s.accept()
    c.close()
    os._exit(0)
os.read(r, 1)
c = socket.create_connection((addr, 9301), timeout=3)
c.close()
os.waitpid(pid, 0)
`

// ownerSend returns the command sending ownerSender's datagram from fw to
// gen as uid and gid (-1: root).
func ownerSend(fam, uid, gid int) func(tp *nettest.Topology) []string {
	return func(tp *nettest.Topology) []string {
		addr := tp.Gen.IPv4.String()
		if fam == 6 {
			addr = tp.Gen.IPv6.String()
		}
		return []string{"python3", "-c", ownerSender, fmt.Sprint(uid), fmt.Sprint(gid), addr}
	}
}

// ownerTCPOverLo returns the command of ownerHandshake over fw's in0
// address.
func ownerTCPOverLo(fam int) func(tp *nettest.Topology) []string {
	return func(tp *nettest.Topology) []string {
		addr := in4(tp, 1, 1).String()
		if fam == 6 {
			addr = in6(tp, 1, 1).String()
		}
		return []string{"python3", "-c", ownerHandshake, addr}
	}
}

// tcpSynTo returns a TCP SYN from gen to fw's in0 address, port port.
func tcpSynTo(fam int, port uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		src, dst := tp.Gen.IPv4, in4(tp, 1, 1)
		if fam == 6 {
			src, dst = tp.Gen.IPv6, in6(tp, 1, 1)
		}
		seg := nettest.TCP{SrcPort: 4002, DstPort: port, Seq: 1000, Flags: nettest.TCPSyn, Window: 512}
		return tp.GenToFw().Frame(nettest.IPPacket(src, dst, seg))
	}
}

// TestOwnerAgainstKernel checks -m owner in filter OUTPUT and mangle
// POSTROUTING against the kernel, packet by packet, in both families.
func TestOwnerAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "python3")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		fw.restore(t, tp, 4, ownerRuleset)
		fw.restore(t, tp, 6, ownerRuleset6)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		probes := []typeProbe{
			{name: "datagram from root", fam: fam, cmd: ownerSend(fam, -1, -1)},
			{name: "datagram from uid 1000 gid 2000", fam: fam, cmd: ownerSend(fam, 1000, 2000)},
			{name: "datagram from uid 1500 gid 1000", fam: fam, cmd: ownerSend(fam, 1500, 1000)},
			{name: "datagram from uid 65534 gid 65534", fam: fam, cmd: ownerSend(fam, 65534, 65534)},
			{name: "datagram from uid 0 gid 2000", fam: fam, cmd: ownerSend(fam, 0, 2000)},
			{name: "TCP handshake over lo (SYN-ACK of a request socket)", fam: fam, cmd: ownerTCPOverLo(fam)},
			{name: "SYN to a closed port (the kernel's RST)", fam: fam, frame: tcpSynTo(fam, 9399)},
			{name: "datagram to a closed port (the kernel's ICMP error)", fam: fam, frame: udpTo(fam, 1, 1, 9398)},
		}
		for _, pr := range probes {
			compareTableCounters(t, tw, pr, false)
		}
	}
}
