package e2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestHeaderMatchesSurviveAppend: a ruleset whose rules test transport
// header conditions (--tcp-option) or IPv6 extension header ones (-m dst),
// then `iptables -A` and `-D` of plain rules (which xfw may apply to the
// running generation in place): the header rules still drop what they
// match, as in the kernel. (The running generation, read back for an
// in-place change, kept no header conditions: the rules then matched
// nothing; found by the differential test's appended rulesets.)
func TestHeaderMatchesSurviveAppend(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	for _, tp := range tw.tps {
		quietSink(t, tp)
	}
	mss := []byte{2, 4, 5, 0xb4}
	cases := []struct {
		fam     int
		rule    string
		matched probe
		other   probe
	}{
		{4, "-p tcp -m tcp --tcp-option 2", p("SYN with an MSS option", func(tp *nettest.Topology) []byte {
			h := nettest.IPv4{Src: v4(tp, 0x10), Dst: tp.Sink.IPv4}
			return frame(tp, h.Packet(nettest.TCP{SrcPort: 7400, DstPort: 7401, Flags: nettest.TCPSyn, Seq: 1, Window: 512, Options: mss}))
		}), p("SYN without options", tcp4(0x10, 7400, 7401, nettest.TCPSyn, nettest.IPv4{}))},
		{6, "-m dst --dst-len 8", p("UDP behind destination options", udp6(0x10, 7400, 7401, ext6(nettest.DestOpts(nettest.PadNOption(4))))),
			p("UDP without extension headers", udp6(0x10, 7400, 7401, nettest.IPv6{}))},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("IPv%d %s", c.fam, c.rule), func(t *testing.T) {
			arrived := map[string][2]bool{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				fw.restore(t, tp, c.fam, fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD %s -j DROP\nCOMMIT\n", c.rule))
				src := "192.0.2.1"
				if c.fam == 6 {
					src = "2001:db8::1"
				}
				for _, op := range []string{"-A", "-A", "-D"} {
					nettest.MustExec(t, tp.FwNS, append(fw.cmd(c.fam, ""), "-w", lockWait, op, "FORWARD", "-s", src, "-j", "ACCEPT")...)
				}
				a := [2]bool{sendProbe(t, tp, c.matched, 0), sendProbe(t, tp, c.other, arrivalRecheckWait)}
				mu.Lock()
				arrived[kind] = a
				mu.Unlock()
			})
			if t.Failed() {
				return
			}
			k, x := arrived["kernel"], arrived["xfw"]
			if k != [2]bool{false, true} {
				t.Fatalf("kernel: matched probe arrived %v, other %v: the case expects false, true", k[0], k[1])
			}
			if x != k {
				t.Errorf("xfw: matched probe arrived %v, other %v; kernel %v, %v", x[0], x[1], k[0], k[1])
			}
		})
	}
}
