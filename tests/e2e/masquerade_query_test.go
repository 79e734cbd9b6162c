package e2e

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// MASQUERADE in a rule of any protocol (Docker's `! -o docker0 -j
// MASQUERADE`) against the kernel: gen's ping to sink and a datagram of a
// protocol without ports masqueraded behind fw's sink-side address and
// their answers translated back (bpf/nat_query.h), through xfw and
// iptables-legacy in twin topologies; what each end saw, the counters and
// `conntrack -L`.

// masqAnyRuleset is TestMasqueradeAnyProtocolAgainstKernel's ruleset; X
// is the topology's subnet, OUT fw's sink-side interface.
const masqAnyRuleset = natTableStart + `-A POSTROUTING -s 10.X.1.0/24 -o OUT -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s 10.X.1.2/32 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
COMMIT
`

// protoExperimental is an IP protocol without ports (RFC 3692's
// experimentation number): the kernel's generic tracker, address-only NAT.
const protoExperimental = 253

// masqAnySteps are TestMasqueradeAnyProtocolAgainstKernel's steps.
var masqAnySteps = []natStep{
	{"ping from gen masqueraded, the identifier kept", func(t *testing.T, tp *nettest.Topology) string {
		var ids []uint16
		capture := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMP
		})
		sent := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, func(c nettest.Captured) bool {
			return c.Outgoing && c.Protocol == nettest.ProtoICMP
		})
		a := nettest.Ping(tp.GenNS, tp.Sink.IPv4, nettest.WithTimeout(2*time.Second))
		out := string(a.Outcome)
		// Both captures hold their frame before they stop (a loaded
		// machine delivers them late).
		sent.WaitFor(func(nettest.Captured) bool { return true }, time.Second)
		capture.WaitFor(func(nettest.Captured) bool { return true }, time.Second)
		for _, f := range append(sent.Stop(), capture.Stop()...) {
			ids = append(ids, echoID(f))
		}
		for _, f := range capture.Frames() {
			out += fmt.Sprintf("; sink saw %s to %s", natName(tp, f.Src), natName(tp, f.Dst))
		}
		return out + fmt.Sprintf("; identifier kept %v", len(ids) == 2 && ids[0] == ids[1])
	}},
	{"a protocol without ports masqueraded, the answer translated back", func(t *testing.T, tp *nettest.Topology) string {
		isExp := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == protoExperimental }
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, isExp)
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isExp)
		raw := nettest.Raw{Proto: protoExperimental, Data: []byte("no ports")}
		if err := tp.InjectFromGen(tp.GenToFw().Frame(nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4}.Packet(raw))); err != nil {
			t.Fatal(err)
		}
		out := ""
		if f, ok := atSink.WaitFor(func(nettest.Captured) bool { return true }, 2*time.Second); ok {
			out += fmt.Sprintf("sink saw %s to %s", natName(tp, f.Src), natName(tp, f.Dst))
			answer := nettest.IPv4{Src: tp.Sink.IPv4, Dst: f.Src}.Packet(raw)
			if err := tp.InjectFromSink(tp.SinkToFw().Frame(answer)); err != nil {
				t.Fatal(err)
			}
		}
		if f, ok := atGen.WaitFor(func(nettest.Captured) bool { return true }, 2*time.Second); ok {
			out += fmt.Sprintf("; gen saw %s to %s", natName(tp, f.Src), natName(tp, f.Dst))
		}
		return out
	}},
}

// echoID returns the identifier of the ICMP echo in captured frame f (0
// when it has none).
func echoID(f nettest.Captured) uint16 {
	const ethIPv4, idOff = 14 + 20, 4 // Ethernet and an option-less IPv4 header; the id in ICMP
	if len(f.Raw) < ethIPv4+idOff+2 {
		return 0
	}
	return binary.BigEndian.Uint16(f.Raw[ethIPv4+idOff:])
}

// TestMasqueradeAnyProtocolAgainstKernel runs masqAnySteps through both
// twins and compares the outcomes, the counters and the connection tables.
func TestMasqueradeAnyProtocolAgainstKernel(t *testing.T) {
	tw := masqTwins(t, masqAnyRuleset)
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, masqAnySteps)
	compareNatCounters(t, tw, 2)
	compareNatConntrack(t, tw, func(key string, _ int) bool { return key == "id" }, 2)
}
