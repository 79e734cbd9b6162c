package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m dscp, -m tos, -m ecn and -m tcpmss against the kernel: the same
// counting rules in INPUT and FORWARD of both families through xfw and
// through iptables-legacy in twin topologies, TCP segments with chosen
// TOS / traffic class bytes, flags and options injected at gen, and every
// rule's counters compared after each segment.

// headerRuleset returns the counting rules: every option, inverted and
// combined, each rule restricted to the probes' TCP port; the tcpmss rules
// come last (their hotdrops end the chain's walk in both).
func headerRuleset() string {
	specs := []string{
		"-m dscp --dscp 0x2e", "-m dscp ! --dscp 0", "-m dscp --dscp-class AF21", "-m dscp ! --dscp-class CS1",
		"-m tos --tos 0xb8/0xff", "-m tos --tos Minimize-Delay", "-m tos ! --tos 0x02/0x03", "-m tos --tos 0x20/0xe0",
		"-m ecn --ecn-ip-ect 0", "-m ecn --ecn-ip-ect 3", "-m ecn ! --ecn-ip-ect 2", "-m ecn --ecn-tcp-ece",
		"-m ecn ! --ecn-tcp-cwr", "-m ecn --ecn-tcp-ece --ecn-tcp-cwr --ecn-ip-ect 3", "-m ecn ! --ecn-tcp-ece ! --ecn-ip-ect 0",
		"-m dscp --dscp 0x2e -m ecn --ecn-ip-ect 0 -m tos ! --tos 0/0xfc",
		"-m tcpmss --mss 1460", "-m tcpmss --mss 500:1300", "-m tcpmss ! --mss 1460", "-m tcpmss --mss 0:65535",
		"-m dscp ! --dscp 0x0a -m tcpmss --mss 1400:1500",
	}
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, chain := range []string{"INPUT", "FORWARD"} {
		for _, s := range specs {
			fmt.Fprintf(&b, "-A %s -p tcp --dport 9999 %s\n", chain, s)
		}
		fmt.Fprintf(&b, "-A %s -p tcp --dport 9999\n", chain)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// headerProbe is one TCP segment of the test.
type headerProbe struct {
	name    string
	fam     int
	forward bool // to sink (FORWARD), else to fw (INPUT)
	tos     uint8
	tcp     nettest.TCP
}

// mss is a maximum segment size option.
func mss(v uint16) []byte { return []byte{2, 4, byte(v >> 8), byte(v)} }

func headerProbes() []headerProbe {
	syn := func(opts ...[]byte) nettest.TCP {
		var o []byte
		for _, x := range opts {
			o = append(o, x...)
		}
		return nettest.TCP{SrcPort: 4000, DstPort: 9999, Seq: 1, Flags: nettest.TCPSyn, Window: 1024, Options: o}
	}
	ack := func(flags uint16) nettest.TCP {
		return nettest.TCP{SrcPort: 4000, DstPort: 9999, Seq: 1, Ack: 1, Flags: nettest.TCPAck | flags, Window: 1024, Payload: []byte("x")}
	}
	nops := []byte{1, 1}
	var out []headerProbe
	for _, fam := range []int{4, 6} {
		for _, fwd := range []bool{false, true} {
			where := fmt.Sprintf("v%d to fw", fam)
			if fwd {
				where = fmt.Sprintf("v%d forwarded", fam)
			}
			bad := syn()
			bad.DataOffset = 10 // options beyond the segment
			short := syn(mss(1460))
			short.DataOffset = 4
			out = append(out,
				headerProbe{where + ", EF, SYN MSS 1460", fam, fwd, 0xb8, syn(mss(1460))},
				headerProbe{where + ", AF21 ECT(0), SYN NOP NOP MSS 536", fam, fwd, 0x4a, syn(nops, mss(536))},
				headerProbe{where + ", CE, ACK ECE CWR", fam, fwd, 0x03, ack(nettest.TCPEce | nettest.TCPCwr)},
				headerProbe{where + ", ECT(1), ACK ECE", fam, fwd, 0x11, ack(nettest.TCPEce)},
				headerProbe{where + ", CS1, SYN without options", fam, fwd, 0x20, syn()},
				headerProbe{where + ", SYN options cut short", fam, fwd, 0x10, bad},
				headerProbe{where + ", SYN data offset 4", fam, fwd, 0x10, short},
				headerProbe{where + ", SYN MSS of length 3, then MSS 1400", fam, fwd, 0xb8, syn([]byte{2, 3, 0}, nops, []byte{1}, mss(1400))},
				headerProbe{where + ", SYN End of Options, then MSS 1460", fam, fwd, 0x02, syn([]byte{0, 0, 0, 0}, mss(1460))},
				headerProbe{where + ", SYN window scale, MSS at the end cut to 3", fam, fwd, 0x28, syn([]byte{3, 3, 7, 1, 1, 1, 1, 1}, []byte{2, 4, 5})},
			)
		}
	}
	return out
}

// headerFrame builds the probe's frame in tp.
func headerFrame(tp *nettest.Topology, pr headerProbe) []byte {
	var src, dst netip.Addr
	if pr.fam == 4 {
		src, dst = tp.Gen.IPv4, in4(tp, 1, 1)
		if pr.forward {
			dst = in4(tp, 2, 2)
		}
		return tp.GenToFw().Frame(nettest.IPv4{Src: src, Dst: dst, TOS: pr.tos, TTL: 64}.Packet(pr.tcp))
	}
	src, dst = tp.Gen.IPv6, in6(tp, 1, 1)
	if pr.forward {
		dst = in6(tp, 2, 2)
	}
	return tp.GenToFw().Frame(nettest.IPv6{Src: src, Dst: dst, TrafficClass: pr.tos, HopLimit: 64}.Packet(pr.tcp))
}

// TestHeaderMatchesAgainstKernel checks -m dscp, tos, ecn and tcpmss in
// INPUT and FORWARD of both families against the kernel, packet by packet.
func TestHeaderMatchesAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, headerRuleset())
		fw.restore(t, tp, 6, headerRuleset())
	})
	if t.Failed() {
		return
	}
	for _, pr := range headerProbes() {
		t.Run(pr.name, func(t *testing.T) {
			k := compareAfterProbe(t, tw, pr.fam, func(t *testing.T, tp *nettest.Topology) {
				if err := tp.InjectFromGen(headerFrame(tp, pr)); err != nil {
					t.Errorf("inject: %v", err)
				}
			})
			t.Logf("%d rules counted the packet", countedRules(k))
		})
	}
}

// compareAfterProbe zeroes the counters of family fam in both twins, sends
// one probe in each, and reports every rule whose counters differ; it
// returns the kernel's rule counters.
func compareAfterProbe(t *testing.T, tw *twins, fam int, send func(*testing.T, *nettest.Topology)) map[string]counter {
	t.Helper()
	saves := map[string]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, append(fw.cmd(fam, ""), "-w", lockWait, "-Z")...)
		send(t, tp)
		drainFw(t, tp)
		save := fw.save(t, tp, fam)
		mu.Lock()
		saves[kind] = save
		mu.Unlock()
	})
	if t.Failed() {
		return nil
	}
	k, x := ruleCountersOf(t, saves["kernel"]), ruleCountersOf(t, saves["xfw"])
	compareTypeCounters(t, k, x)
	return k
}
