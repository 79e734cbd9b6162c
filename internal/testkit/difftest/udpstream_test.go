package difftest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestUDPStreamGuard checks when a step continuing a UDP conversation may
// be sent: not within udpStreamMargin of 2 s after the batch that sent the
// flow's first packet, in either direction and from fw too; other flows,
// other protocols, step 0 and rulesets without ASSURED never wait.
func TestUDPStreamGuard(t *testing.T) {
	gen, sink := netip.MustParseAddr("10.1.1.2"), netip.MustParseAddr("10.1.2.2")
	udp := func(from Origin, src, dst netip.Addr, sport, dport uint16, step int) Probe {
		pkt := nettest.IPv4{Src: src, Dst: dst}.Packet(nettest.UDP{SrcPort: sport, DstPort: dport, Payload: []byte("x")})
		if from != FromFw {
			pkt = nettest.Ethernet{}.Frame(pkt)
		}
		return Probe{From: from, Frames: [][]byte{pkt}, Step: step}
	}
	first := udp(FromGen, gen, sink, 4000, 53, 1)
	reply := udp(FromSink, sink, gen, 53, 4000, 3)
	fromFw := udp(FromFw, gen, sink, 4000, 53, 3) // the same ends, sent as an IP packet
	other := udp(FromGen, gen, sink, 4001, 53, 3)
	tcp := Probe{From: FromGen, Step: 3, Frames: [][]byte{nettest.Ethernet{}.Frame(
		nettest.IPv4{Src: gen, Dst: sink}.Packet(nettest.TCP{SrcPort: 4000, DstPort: 53, Flags: nettest.TCPAck}))}}
	step0 := reply
	step0.Step = 0

	t0 := time.Unix(1000, 0)
	end := t0.Add(40 * time.Millisecond)
	windowEnd := end.Add(udpStreamDelay + udpStreamMargin)
	for _, tc := range []struct {
		name    string
		ruleset string
		probe   Probe
		after   time.Duration // since t0
		want    time.Time     // zero: at once
	}{
		{"before the window", "-m conntrack --ctstatus ASSURED", reply, 1400 * time.Millisecond, time.Time{}},
		{"in the window: the reply", "-m conntrack --ctstatus ASSURED", reply, 1600 * time.Millisecond, windowEnd},
		{"at the delay", "-m conntrack --ctstatus SEEN_REPLY,assured", reply, 2 * time.Second, windowEnd},
		{"from fw", "--ctstatus ASSURED", fromFw, 2100 * time.Millisecond, windowEnd},
		{"after the window", "--ctstatus ASSURED", reply, 2600 * time.Millisecond, time.Time{}},
		{"another flow", "--ctstatus ASSURED", other, 2 * time.Second, time.Time{}},
		{"tcp", "--ctstatus ASSURED", tcp, 2 * time.Second, time.Time{}},
		{"step 0", "--ctstatus ASSURED", step0, 2 * time.Second, time.Time{}},
		{"no ASSURED in the ruleset", "--ctstatus SEEN_REPLY", reply, 2 * time.Second, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newUDPStreamGuard(tc.ruleset)
			g.sent([]Probe{first}, t0, end)
			now := t0.Add(tc.after)
			want := tc.want
			if want.IsZero() {
				want = now
			}
			if !g.on {
				if len(g.first) != 0 {
					t.Errorf("a guard that is off recorded %d flows", len(g.first))
				}
				return
			}
			if got := g.resumeAt([]Probe{tc.probe}, now); !got.Equal(want) {
				t.Errorf("resume at %v after t0, want %v", got.Sub(t0), want.Sub(t0))
			}
		})
	}
}
