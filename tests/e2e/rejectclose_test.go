package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// A TCP reset REJECT sends closes the connection it answered, against the
// kernel (nf_send_reset's nf_ct_set_closing: a confirmed connection goes
// to CLOSE, bpf/ct_hook.h xfw_ct_rst_close). Gen opens a connection
// through fw to sink (SYN, sink's SYN,ACK), then sends an ACK that FORWARD
// REJECTs with a reset, then a SYN,FIN (INVALID) that it REJECTs too: the
// second reset, which carries no connection, is tracked at OUTPUT in the
// connection the first one closed, where CLOSE's RST transition takes it
// (ESTABLISHED); in the connection left open its sequence number 0 is out
// of the window (INVALID), and OUTPUT drops INVALID resets. Gen and sink
// drop TCP in INPUT so that their stacks answer nothing.

// rejectCloseRules is the ruleset; GEN stands for gen's address.
const rejectCloseRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate INVALID
-A FORWARD -m conntrack --ctstate NEW
-A FORWARD -m conntrack --ctstate ESTABLISHED
-A FORWARD -p tcp --dport 7311 ! --syn -j REJECT --reject-with tcp-reset
-A OUTPUT -d GEN -p tcp -m conntrack --ctstate RELATED
-A OUTPUT -d GEN -p tcp -m conntrack --ctstate ESTABLISHED
-A OUTPUT -d GEN -p tcp -m conntrack --ctstate INVALID -j DROP
-A OUTPUT -d GEN
COMMIT
`

// rejectCloseRound sends the conversation (each packet once the one
// before has settled) and counts the resets gen receives.
func rejectCloseRound(t *testing.T, tp *nettest.Topology, fam, _ int) int {
	t.Helper()
	gen, _, sink := familyAddrs(tp, fam)
	ipt := "iptables-legacy"
	if fam == 6 {
		ipt = "ip6tables-legacy"
	}
	for _, ns := range []string{tp.GenNS, tp.SinkNS} {
		nettest.MustExec(t, ns, ipt, "-w", "-A", "INPUT", "-p", "tcp", "-j", "DROP")
	}
	g, s := netip.AddrPortFrom(gen, 5311), netip.AddrPortFrom(sink, 7311)
	fromGen := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	fromSink := nettest.Ethernet{Dst: tp.FwOut.MAC, Src: tp.Sink.MAC}
	const isnGen, isnSink = 1000, 5000
	seg := func(src, dst netip.AddrPort, flags uint16, seq, ack uint32) []byte {
		return nettest.IPPacket(src.Addr(), dst.Addr(), nettest.TCP{
			SrcPort: src.Port(), DstPort: dst.Port(), Seq: seq, Ack: ack, Flags: flags, Window: 512,
		})
	}
	c := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam
	})
	steps := []struct {
		ns, dev string
		frame   []byte
	}{
		{tp.GenNS, nettest.GenIfname, fromGen.Frame(seg(g, s, nettest.TCPSyn, isnGen, 0))},
		{tp.SinkNS, nettest.SinkIfname, fromSink.Frame(seg(s, g, nettest.TCPSyn|nettest.TCPAck, isnSink, isnGen+1))},
		{tp.GenNS, nettest.GenIfname, fromGen.Frame(seg(g, s, nettest.TCPAck, isnGen+1, isnSink+1))},
		{tp.GenNS, nettest.GenIfname, fromGen.Frame(seg(g, s, nettest.TCPSyn|nettest.TCPFin, isnGen+1, 0))},
	}
	for _, st := range steps {
		if err := nettest.Inject(st.ns, st.dev, st.frame); err != nil {
			t.Fatalf("inject: %v", err)
		}
		time.Sleep(rejectOutSettle)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	resets := 0
	for _, f := range c.Stop() {
		if f.IsTCPReset() {
			resets++
		}
	}
	return resets
}

// TestRejectResetClosesAgainstKernel compares the resets gen receives and
// every rule's counters (bpf/ct_hook.h xfw_ct_rst_close).
func TestRejectResetClosesAgainstKernel(t *testing.T) {
	twinsPerFamily(t, func(t *testing.T, tw *twins, fam int) {
		seen, saves := twinRejectRounds(t, tw, fam, []string{rejectCloseRules}, rejectCloseRound)
		if t.Failed() {
			return
		}
		kc := compareRejectRound(t, "reset closes", seen["kernel"][0], seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
		// Meaningful only if the kernel's second reset passed OUTPUT
		// in the closed connection.
		if seen["kernel"][0] != 2 {
			t.Errorf("the kernel's fw sent gen %d resets, want 2", seen["kernel"][0])
		}
		for key, c := range kc {
			if strings.Contains(key, "INVALID -j DROP") && c.packets != 0 {
				t.Errorf("the kernel's OUTPUT dropped %d INVALID resets, want none", c.packets)
			}
		}
	})
}
