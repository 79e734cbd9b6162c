package e2e

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The XDP fast path for FORWARD (bpf/fastpath.h): packets FORWARD accepts
// are rewritten and redirected at XDP when the output device takes XDP
// frames, and everything the kernel must see goes to the stack. These tests
// forward through fw and read `xfw fastpath`'s outcome counts.

const (
	fpPort     = 7777
	fpSport    = 40002
	fpWait     = 3 * time.Second
	fpDatagram = 5 // datagrams per step
	fpTTL      = 64
	fpMTU      = 1280 // out0's MTU in the MTU steps
	fpBig      = 1400 // a payload over it
)

// fpRules accepts UDP to fpPort in FORWARD (a counted rule: the classifier's
// walk) and drops the rest, both families.
const fpRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A FORWARD -p udp -m udp --dport 7777 -j ACCEPT\n" +
	"-A FORWARD -p icmp -j ACCEPT\n-A FORWARD -p ipv6-icmp -j ACCEPT\nCOMMIT\n"

// fpStats returns `xfw fastpath`'s outcome counts and its target list.
func fpStats(t *testing.T, bin string, tp *nettest.Topology) (map[string]uint64, string) {
	t.Helper()
	out := nettest.MustExec(t, tp.FwNS, bin, "fastpath")
	stats := map[string]uint64{}
	targets := ""
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "fast path targets: "); ok {
			targets = rest
			continue
		}
		f := strings.Fields(line)
		if !strings.HasPrefix(line, "  ") || len(f) != 2 {
			continue // not a count: a reason, a note
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("xfw fastpath: bad line %q", line)
		}
		stats[f[0]] = n
	}
	if _, ok := stats["taken"]; !ok {
		t.Fatalf("xfw fastpath printed no counts:\n%s", out)
	}
	return stats, targets
}

// fpTopology builds gen — fw — sink with xfw and fpRules in fw; gro turns
// GRO on sink's interface on first (its veth then takes XDP frames).
func fpTopology(t *testing.T, gro bool, env ...string) (*nettest.Topology, firewall) {
	t.Helper()
	nettest.RequireRoot(t)
	requireTools(t, "ip", "ethtool")
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: xfwPath(t)}
	t.Cleanup(func() { fw.stop(t, tp) })
	if gro {
		nettest.MustExec(t, tp.SinkNS, "ethtool", "-K", tp.Sink.Ifname, "gro", "on")
	}
	for _, fam := range []int{4, 6} {
		fw.restore(t, tp, fam, fpRules)
	}
	if len(env) > 0 {
		nettest.MustExec(t, tp.FwNS, append(append([]string{"env"}, env...), fw.bin, "sync")...)
	}
	return tp, fw
}

// fpSend injects n datagrams gen → sink (fam 4 or 6) with the given
// payload size, as frames with finished checksums (a router's traffic; a
// local socket's through a veth leaves its checksum to offload, which the
// fast path passes), and checks that sink's socket receives them all.
func fpSend(t *testing.T, tp *nettest.Topology, fam, n, size int) {
	t.Helper()
	dst := tp.Sink.IPv4
	if fam == 6 {
		dst = tp.Sink.IPv6
	}
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(dst, fpPort))
	defer srv.Close()
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = fpFrame(tp, fam, nettest.IPv4{ID: uint16(i + 1)}, size)
	}
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, frames...); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(n, fpWait); len(got) != n {
		t.Fatalf("IPv%d: sink received %d of %d datagrams", fam, len(got), n)
	}
}

// fpSocketSend sends n datagrams gen → sink from a socket of gen and checks
// that sink's socket receives them all.
func fpSocketSend(t *testing.T, tp *nettest.Topology, n int, payload string) []nettest.Datagram {
	t.Helper()
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	for i := 0; i < n; i++ {
		if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort), []byte(payload),
			nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, fpSport))); a.Outcome != nettest.OK {
			t.Fatalf("send: %v", a.Outcome)
		}
	}
	got := srv.Wait(n, fpWait)
	if len(got) != n {
		t.Fatalf("sink received %d of %d datagrams", len(got), n)
	}
	return got
}

// fpDelta returns the change of each outcome between two readings.
func fpDelta(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// fpExpect compares an outcome delta with want (outcomes not named: 0).
func fpExpect(t *testing.T, step string, got, want map[string]uint64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: fast path %s counted %d, want %d (all changes: %v)", step, k, got[k], v, got)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: fast path %s counted %d, want 0 (all changes: %v)", step, k, v, got)
		}
	}
}

// fpCheckFrames checks the frames sink received: TTL / hop limit one less
// than sent, Ethernet addresses fw out0 → sink, a valid IPv4 header
// checksum.
func fpCheckFrames(t *testing.T, tp *nettest.Topology, frames []nettest.Captured, n int) {
	t.Helper()
	if len(frames) != n {
		t.Fatalf("sink captured %d frames, want %d", len(frames), n)
	}
	for _, f := range frames {
		if f.TTL != fpTTL-1 {
			t.Errorf("IPv%d frame arrived with TTL %d, want %d", f.IPVersion, f.TTL, fpTTL-1)
		}
		if f.SrcMAC.String() != tp.FwOut.MAC.String() || f.DstMAC.String() != tp.Sink.MAC.String() {
			t.Errorf("IPv%d frame %s → %s, want %s → %s", f.IPVersion, f.SrcMAC, f.DstMAC, tp.FwOut.MAC, tp.Sink.MAC)
		}
		if f.IPVersion == 4 {
			ihl := int(f.Raw[14]&0xf) * 4
			if c := nettest.Checksum(f.Raw[14 : 14+ihl]); c != 0 {
				t.Errorf("IPv4 header checksum wrong after forwarding (%#04x)", c)
			}
		}
	}
}

// TestFastPathForwards forwards accepted datagrams of both families to a
// sink whose veth takes XDP frames (GRO on): they arrive through the fast
// path with the TTL decremented, checksums right (the sink's socket takes
// them) and the rule counters exact.
func TestFastPathForwards(t *testing.T) {
	tp, fw := fpTopology(t, true)
	if _, targets := fpStats(t, fw.bin, tp); targets != tp.FwOut.Ifname {
		t.Fatalf("fast path targets %q, want %q", targets, tp.FwOut.Ifname)
	}
	for _, fam := range []int{4, 6} {
		isUDP := func(c nettest.Captured) bool {
			return !c.Outgoing && c.IPVersion == fam && c.DstPort == fpPort
		}
		capt := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, isUDP)
		before, _ := fpStats(t, fw.bin, tp)
		fpSend(t, tp, fam, fpDatagram, 32)
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, "IPv"+strconv.Itoa(fam), fpDelta(before, after), map[string]uint64{"taken": fpDatagram})
		fpCheckFrames(t, tp, capt.Wait(fpDatagram, fpWait), fpDatagram)
		got := counters(t, fw.save(t, tp, fam))
		if c := got["FORWARD -p udp -m udp --dport 7777 -j ACCEPT"]; c.packets != fpDatagram {
			t.Errorf("IPv%d: FORWARD rule counted %d packets, want %d", fam, c.packets, fpDatagram)
		}
	}
}

// TestFastPathFrameEdges: a frame with bytes after its IP packet is
// forwarded at XDP without them (ip_rcv trims them); a frame with a VLAN
// priority tag (VLAN 0) goes to the stack, which takes the tag off. Both
// arrive as the kernel forwards them: untagged, as long as their packet.
func TestFastPathFrameEdges(t *testing.T) {
	tp, fw := fpTopology(t, true)
	udp := nettest.UDP{SrcPort: fpSport, DstPort: fpPort, Payload: make([]byte, 32)}
	pkt := nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4, ID: 9}.Packet(udp)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	// A socket takes the datagrams: no port unreachable goes back.
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	for _, c := range []struct {
		name  string
		frame []byte
		want  string // the outcome counted
	}{
		{"trailing bytes", append(eth.Frame(pkt), make([]byte, 20)...), "taken"},
		{"priority tag", eth.WithVLAN(nettest.VLANTag{ID: 0}).Frame(pkt), "header"},
	} {
		isUDP := func(c nettest.Captured) bool { return !c.Outgoing && c.DstPort == fpPort }
		capt := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, isUDP)
		before, _ := fpStats(t, fw.bin, tp)
		if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, c.frame); err != nil {
			t.Fatal(err)
		}
		got := capt.Wait(1, fpWait)
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, c.name, fpDelta(before, after), map[string]uint64{c.want: 1})
		if len(got) != 1 {
			t.Errorf("%s: sink captured %d frames, want 1", c.name, len(got))
			continue
		}
		if n := len(got[0].Raw); n != 14+len(pkt) || len(got[0].VLANs) != 0 {
			t.Errorf("%s: sink got a %d-byte frame with tags %v, want an untagged %d-byte one", c.name, n, got[0].VLANs, 14+len(pkt))
		}
	}
}

// TestFastPathTrivialWalk: with FORWARD empty and its policy ACCEPT (the
// walk the data plane skips, trivial.h) the fast path forwards too, and
// the policy counts every packet.
func TestFastPathTrivialWalk(t *testing.T) {
	tp, fw := fpTopology(t, true)
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	before, _ := fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "trivial walk", fpDelta(before, after), map[string]uint64{"taken": fpDatagram})
	if c := counters(t, fw.save(t, tp, 4))[":FORWARD"]; c.packets != fpDatagram {
		t.Errorf("FORWARD policy counted %d packets, want %d", c.packets, fpDatagram)
	}
}

// TestFastPathNotTaken: what the stack must handle goes to it (and
// arrives, or is answered, as without the fast path): a peer that cannot
// take XDP frames, the fast path switched off, TTL 1, a datagram over the
// route's MTU with and without DF, an unresolved neighbour, fragments, a
// checksum left to offload, a translated connection.
func TestFastPathNotTaken(t *testing.T) {
	t.Run("peer without XDP", func(t *testing.T) {
		tp, fw := fpTopology(t, false)
		before, targets := fpStats(t, fw.bin, tp)
		if !strings.HasPrefix(targets, "none") {
			t.Errorf("fast path targets %q, want none", targets)
		}
		fpSend(t, tp, 4, fpDatagram, 32)
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, "peer without XDP", fpDelta(before, after), map[string]uint64{"no-target": fpDatagram})
	})
	t.Run("switched off", func(t *testing.T) {
		tp, fw := fpTopology(t, true, "XFW_FASTPATH=off")
		before, _ := fpStats(t, fw.bin, tp)
		fpSend(t, tp, 6, fpDatagram, 32)
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, "switched off", fpDelta(before, after), map[string]uint64{"no-target": fpDatagram})
	})
	tp, fw := fpTopology(t, true)
	t.Run("TTL 1", func(t *testing.T) { fpTTLOne(t, tp, fw) })
	t.Run("MTU", func(t *testing.T) { fpOverMTU(t, tp, fw) })
	t.Run("no neighbour", func(t *testing.T) { fpNoNeighbour(t, tp, fw) })
	t.Run("fragments", func(t *testing.T) { fpFragments(t, tp, fw) })
	// A local socket's datagram through a veth: its checksum is left to
	// offload (CHECKSUM_PARTIAL), which an XDP frame cannot carry.
	t.Run("checksum left to offload", func(t *testing.T) {
		before, _ := fpStats(t, fw.bin, tp)
		fpSocketSend(t, tp, fpDatagram, "partial")
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, "checksum left to offload", fpDelta(before, after), map[string]uint64{"checksum": fpDatagram})
	})
	// Last: a translated connection keeps the fast path out for good.
	t.Run("NAT", func(t *testing.T) { fpNAT(t, tp, fw) })
}

// fpNAT: once nat POSTROUTING has translated a connection, forwarded
// packets go to the stack (xfw_tc_egress may have to translate them), and
// arrive translated.
func fpNAT(t *testing.T, tp *nettest.Topology, fw firewall) {
	fw.restore(t, tp, 4, fpRules+"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		":POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o "+tp.FwOut.Ifname+" -j MASQUERADE\nCOMMIT\n")
	before, _ := fpStats(t, fw.bin, tp)
	for _, d := range fpSocketSend(t, tp, fpDatagram, "nat") {
		if d.From.Addr() != tp.FwOut.IPv4 {
			t.Errorf("NAT: datagram from %v, want fw's %v", d.From, tp.FwOut.IPv4)
		}
	}
	after, _ := fpStats(t, fw.bin, tp)
	// The first packet makes the translation (translations may be on
	// or not yet when it is accepted); the others find them on.
	d := fpDelta(before, after)
	if d["taken"] != 0 || d["nat"] < fpDatagram-1 {
		t.Errorf("NAT: fast path outcomes %v, want none taken and %d or more nat", d, fpDatagram-1)
	}
}

// fpFrame is a UDP frame gen → sink to fpPort (fam 4: with IPv4 header
// h's flags, TTL, ID; 6: hop limit 64) as gen sends it.
func fpFrame(tp *nettest.Topology, fam int, h nettest.IPv4, size int) []byte {
	udp := nettest.UDP{SrcPort: fpSport, DstPort: fpPort, Payload: make([]byte, size)}
	var pkt []byte
	if fam == 6 {
		pkt = nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.Sink.IPv6}.Packet(udp)
	} else {
		h.Src, h.Dst = tp.Gen.IPv4, tp.Sink.IPv4
		pkt = h.Packet(udp)
	}
	return nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}.Frame(pkt)
}

// fpTTLOne: TTL 1 is answered "time exceeded" by the stack, before FORWARD.
func fpTTLOne(t *testing.T, tp *nettest.Topology, fw firewall) {
	isTE := func(c nettest.Captured) bool { return !c.Outgoing && c.ICMPType == 11 }
	capt := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isTE)
	before, _ := fpStats(t, fw.bin, tp)
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, fpFrame(tp, 4, nettest.IPv4{TTL: 1}, 32)); err != nil {
		t.Fatal(err)
	}
	if _, ok := capt.WaitFor(isTE, fpWait); !ok {
		t.Error("TTL 1: no time exceeded from fw")
	}
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "TTL 1", fpDelta(before, after), map[string]uint64{})
}

// fpOverMTU: with out0's MTU lowered, a datagram over it without DF is
// accepted, passed and fragmented by the stack; with DF it is answered
// "fragmentation needed" before FORWARD.
func fpOverMTU(t *testing.T, tp *nettest.Topology, fw firewall) {
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", tp.FwOut.Ifname, "mtu", strconv.Itoa(fpMTU))
	defer nettest.MustExec(t, tp.FwNS, "ip", "link", "set", tp.FwOut.Ifname, "mtu", "1500")
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	isFN := func(c nettest.Captured) bool { return !c.Outgoing && c.ICMPType == 3 && c.ICMPCode == 4 }
	capt := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isFN)
	before, _ := fpStats(t, fw.bin, tp)
	frames := [][]byte{fpFrame(tp, 4, nettest.IPv4{ID: 1}, fpBig), fpFrame(tp, 4, nettest.IPv4{ID: 2, DontFragment: true}, fpBig)}
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, frames...); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(1, fpWait); len(got) != 1 {
		t.Errorf("over the MTU without DF: sink received %d datagrams, want 1", len(got))
	}
	if _, ok := capt.WaitFor(isFN, fpWait); !ok {
		t.Error("over the MTU with DF: no fragmentation needed from fw")
	}
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "over the MTU", fpDelta(before, after), map[string]uint64{"mtu": 1})
}

// fpNoNeighbour: without fw's neighbour entry for sink the first datagram
// goes to the stack, which resolves it; the next one takes the fast path.
func fpNoNeighbour(t *testing.T, tp *nettest.Topology, fw firewall) {
	nettest.MustExec(t, tp.FwNS, "ip", "neigh", "del", tp.Sink.IPv4.String(), "dev", tp.FwOut.Ifname)
	before, _ := fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, 1, 32)
	mid, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "no neighbour", fpDelta(before, mid), map[string]uint64{"no-neighbour": 1})
	fpSend(t, tp, 4, 1, 32)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "neighbour resolved", fpDelta(mid, after), map[string]uint64{"taken": 1})
}

// fpFragments: every fragment of a datagram is judged in FORWARD (no
// connection tracking: `-p udp` accepts the later ones too) and goes to the
// stack.
func fpFragments(t *testing.T, tp *nettest.Topology, fw firewall) {
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A FORWARD -p udp -j ACCEPT\nCOMMIT\n")
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	h := nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4, ID: 7}
	pkt := h.Packet(nettest.UDP{SrcPort: fpSport, DstPort: fpPort, Payload: make([]byte, 600)})
	frs, err := nettest.FragmentIPv4(pkt, 256)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for _, fr := range frs {
		frames = append(frames, nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}.Frame(fr))
	}
	before, _ := fpStats(t, fw.bin, tp)
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, frames...); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(1, fpWait); len(got) != 1 {
		t.Errorf("fragments: sink received %d datagrams, want 1", len(got))
	}
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "fragments", fpDelta(before, after), map[string]uint64{"fragment": uint64(len(frs))})
}

// TestFastPathHeaderChecksum: ip_rcv drops an IPv4 packet whose header
// checksum is wrong before any chain, so xfw neither counts nor forwards
// one, with or without options (the parser sums a header without options
// in 32-bit words, a longer one word by word: parse.h); the same frames
// with the right checksum are counted and forwarded, at XDP when the
// header has no options.
func TestFastPathHeaderChecksum(t *testing.T) {
	tp, fw := fpTopology(t, true)
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	const rule = "FORWARD -p udp -m udp --dport 7777 -j ACCEPT"
	nop4 := []byte{1, 1, 1, 1} // four NOP options: a 24-byte header
	total := 0                 // datagrams the sink's server received
	for i, c := range []struct {
		name string
		h    nettest.IPv4
		want map[string]uint64 // fast path outcomes; nil: dropped
	}{
		{"no options, bad checksum", nettest.IPv4{BadChecksum: true}, nil},
		{"options, bad checksum", nettest.IPv4{Options: nop4, BadChecksum: true}, nil},
		{"no options", nettest.IPv4{}, map[string]uint64{"taken": 1}},
		{"options", nettest.IPv4{Options: nop4}, map[string]uint64{"header": 1}},
	} {
		c.h.ID = uint16(i + 1)
		before, _ := fpStats(t, fw.bin, tp)
		ctrBefore := counters(t, fw.save(t, tp, 4))[rule].packets
		if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, fpFrame(tp, 4, c.h, 32)); err != nil {
			t.Fatal(err)
		}
		// The server's datagrams so far: one more, or none more for a
		// second.
		wantN, wait := 1, fpWait
		if c.want == nil {
			wantN, wait = 0, time.Second
		}
		if got := srv.Wait(total+1, wait); len(got) != total+wantN {
			t.Errorf("%s: sink received %d datagrams, want %d", c.name, len(got)-total, wantN)
		}
		total += wantN
		after, _ := fpStats(t, fw.bin, tp)
		fpExpect(t, c.name, fpDelta(before, after), c.want)
		if n := counters(t, fw.save(t, tp, 4))[rule].packets - ctrBefore; n != uint64(wantN) {
			t.Errorf("%s: the FORWARD rule counted %d packets, want %d", c.name, n, wantN)
		}
	}
}
