package e2e

// raw PREROUTING's notrack rules judged before xfw's route lookup
// (compiler/rawpre.go, bpf/xfw.c xfw_xdp_rawpre), against the kernel: the
// kernel runs raw PREROUTING before conntrack and its routing, so a packet
// NOTRACK or CT --notrack exempts is tracked by neither its conntrack nor
// its routing's drops (bpf/ct_unrouted.h tracks the others): a reply the
// routing drops (TTL ending, a broadcast frame, a refused IPv4 option)
// leaves its connection without SEEN_REPLY, and one it forwards goes
// through FORWARD as UNTRACKED, its connection unchanged. Counters of
// every table compared after each step (runCtScenarios).

import (
	"net"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// notrackPreTables is TestNotrackPreroutingAgainstKernel's raw table:
// replies from sink:7100 to the flows' ports exempted by NOTRACK (40350,
// 40370, 40390) and CT --notrack (40360, 40380), counted by state before
// and after (raw sees INVALID before a notrack rule, UNTRACKED after).
const notrackPreTables = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p udp -m conntrack --ctstate INVALID
-A PREROUTING -p udp -m udp --sport 7100 --dport 40350 -j NOTRACK
-A PREROUTING -p udp -m udp --sport 7100 --dport 40370 -j NOTRACK
-A PREROUTING -p udp -m udp --sport 7100 --dport 40360 -j CT --notrack
-A PREROUTING -p udp -m udp --sport 7100 --dport 40380 -j CT --notrack
-A PREROUTING -p udp -m udp --sport 7100 --dport 40390 -j NOTRACK
-A PREROUTING -p udp -m state --state UNTRACKED
-A PREROUTING -p udp -m conntrack --ctstate INVALID
COMMIT
`

// TestNotrackPreroutingAgainstKernel: forwarded UDP flows gen → sink whose
// replies raw PREROUTING exempts from tracking; the replies the kernel's
// routing drops and the ones it forwards, then each flow's next datagram,
// which shows whether its connection saw a reply.
func TestNotrackPreroutingAgainstKernel(t *testing.T) {
	ctFamilies(t, func(t *testing.T, fam int) {
		notSeen := []string{"cfwd -p udp -m conntrack ! --ctstatus SEEN_REPLY"}
		newFlow := []string{"cfwd -p udp -m conntrack --ctstate NEW"}
		reply := func(dport uint16, ttl uint8, dst net.HardwareAddr) func(t *testing.T, tw *ctTwin) string {
			return func(t *testing.T, tw *ctTwin) string {
				tw.sinkInject(t, dst, tw.sinkPacket(dport, ttl))
				return "injected"
			}
		}
		broadcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		scenarios := []ctScenario{
			{name: "udp gen → sink (NOTRACK replies)", run: forwardDatagram(40350), want: newFlow},
			{name: "its reply with TTL 1, NOTRACK (time exceeded before FORWARD)", run: reply(40350, 1, nil)},
			{name: "its reply in a broadcast frame, NOTRACK (ip_forward drops it)", run: reply(40350, 0, broadcast)},
			{name: "the flow's next datagram (no SEEN_REPLY)", run: forwardDatagram(40350), want: notSeen},
			{name: "udp gen → sink (CT --notrack replies)", run: forwardDatagram(40360), want: newFlow},
			{name: "its reply with TTL 1, CT --notrack", run: reply(40360, 1, nil)},
			{name: "the second flow's next datagram (no SEEN_REPLY)", run: forwardDatagram(40360), want: notSeen},
			{name: "udp gen → sink (NOTRACK replies, forwarded)", run: forwardDatagram(40370), want: newFlow},
			{name: "its reply, NOTRACK, forwarded UNTRACKED", run: reply(40370, 0, nil),
				want: []string{"cfwd -p udp -m conntrack --ctstate UNTRACKED"}},
			{name: "the third flow's next datagram (no SEEN_REPLY)", run: forwardDatagram(40370), want: notSeen},
			{name: "udp gen → sink (CT --notrack replies, forwarded)", run: forwardDatagram(40380), want: newFlow},
			{name: "its reply, CT --notrack, forwarded UNTRACKED", run: reply(40380, 0, nil),
				want: []string{"cfwd -p udp -m conntrack --ctstate UNTRACKED"}},
			{name: "the fourth flow's next datagram (no SEEN_REPLY)", run: forwardDatagram(40380), want: notSeen},
		}
		if fam == 4 {
			// A flow of its own: the first flow's connection, last
			// seen ten scenarios before (9 s on an idle machine), is
			// gone or not depending on whether those took the UDP
			// timeout (30 s) in each twin.
			scenarios = append(scenarios,
				ctScenario{name: "udp gen → sink, a fifth flow (NOTRACK replies)", run: forwardDatagram(40390), want: newFlow},
				ctScenario{name: "its reply with a bad record route option, NOTRACK", run: func(t *testing.T, tw *ctTwin) string {
					const recordRoute = 7 // too short: ip_rcv_options drops it after PREROUTING
					udp := nettest.UDP{SrcPort: 7100, DstPort: 40390, Payload: []byte("reply")}
					tw.sinkInject(t, nil, nettest.IPv4{Src: tw.sinkAddr(), Dst: tw.genAddr(),
						Options: []byte{recordRoute, 2}}.Packet(udp))
					return "injected"
				}},
				ctScenario{name: "the fifth flow's next datagram (no SEEN_REPLY)", run: forwardDatagram(40390), want: notSeen},
			)
		}
		tables := notrackPreTables
		if fam == 6 {
			// IPv6 multicast (neighbour discovery, MLD), whose chatter
			// depends on timing, accepted first and not compared (as
			// ctRuleset's filter chains do).
			tables = strings.Replace(tables, ":OUTPUT ACCEPT [0:0]\n",
				":OUTPUT ACCEPT [0:0]\n-A PREROUTING -d ff00::/8 -j ACCEPT\n", 1)
		}
		runCtScenarios(t, fam, ctOptions{tables: tables}, scenarios)
	})
}
