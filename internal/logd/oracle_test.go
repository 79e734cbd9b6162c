package logd

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file asks the kernel: it sends real packets through namespaces where
// iptables-legacy LOG rules log them, reads the lines from the kernel log
// and compares them with Format fed with the same bytes.

// kernelLineTimeout bounds the wait for one LOG line.
const kernelLineTimeout = 3 * time.Second

// Test VLAN of the VLAN scenarios.
const (
	testVLAN   = 100
	vlanIfname = "in0.100"
	vlanSubnet = 100
)

// Ports of the scenarios.
const (
	portSrc  = 40000
	portDst  = 5001
	portDisc = 9 // discard: nothing listens
)

// oracleEnv is the topology of the live comparison.
type oracleEnv struct {
	topo *nettest.Topology
	// vlanIndex is the ifindex of fw's VLAN device.
	vlanIndex uint32
	// vlanGen4, vlanFw4, vlanGen6 and vlanFw6 are the addresses on the VLAN.
	vlanGen4, vlanFw4, vlanGen6, vlanFw6 netip.Addr
}

// scenario is one kind of packet logged by one LOG rule.
type scenario struct {
	name  string
	fam   ir.Family
	chain string
	// match restricts the LOG rule to the scenario's packet.
	match []string
	// flagsets are the LOG option sets to try (nil: defaultFlagsets).
	flagsets []uint8
	// timestamps is true when the kernel writes its clock into the
	// packet's first option (an IPv4 timestamp option).
	timestamps bool
	// send makes the packet cross fw and returns the frame the data plane
	// sees, with the interfaces of the event.
	send func(t *testing.T, e *oracleEnv) sent
}

// sent is the frame the data plane would log and its interfaces.
type sent struct {
	frame           []byte
	inIdx, outIdx   uint32
	inName, outName string
}

const (
	flagsAll = ir.LogFlagTCPSeq | ir.LogFlagTCPOpt | ir.LogFlagIPOpt
)

// defaultFlagsets are the LOG option sets tried for each scenario.
var defaultFlagsets = []uint8{0, ir.LogFlagTCPSeq, ir.LogFlagTCPOpt, ir.LogFlagIPOpt, flagsAll, ir.LogFlagMACDecode}

// logOptions returns the LOG target options for flags.
func logOptions(flags uint8) []string {
	var o []string
	for _, f := range []struct {
		bit uint8
		opt string
	}{
		{ir.LogFlagTCPSeq, "--log-tcp-sequence"},
		{ir.LogFlagTCPOpt, "--log-tcp-options"},
		{ir.LogFlagIPOpt, "--log-ip-options"},
		{ir.LogFlagUID, "--log-uid"},
		{ir.LogFlagMACDecode, "--log-macdecode"},
	} {
		if flags&f.bit != 0 {
			o = append(o, f.opt)
		}
	}
	return o
}

// ipt returns the iptables command of fam.
func ipt(fam ir.Family) string {
	if fam == ir.IPv6 {
		return "ip6tables-legacy"
	}
	return "iptables-legacy"
}

// TestFormatMatchesKernel compares Format with the kernel's LOG target on
// live packets (root). With -update it rewrites kernelLinesFile.
func TestFormatMatchesKernel(t *testing.T) {
	topo := nettest.New(t, nettest.WithBase("xfwlogd"), nettest.WithStaticNeighbors())
	enableNetnsLogging(t)
	env := setupVLAN(t, topo)
	tail, err := openKmsgTail()
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()

	tag := make([]byte, 3) // run-unique prefix: other runs share the log
	if _, err := rand.Read(tag); err != nil {
		t.Fatal(err)
	}
	var captured []kernelLine
	n := 0
	for _, sc := range scenarios(env) {
		sets := sc.flagsets
		if sets == nil {
			sets = defaultFlagsets
		}
		for _, flags := range sets {
			n++
			name := fmt.Sprintf("%s/flags=%#02x", sc.name, flags)
			prefix := fmt.Sprintf("xfwt%s-%d ", hex.EncodeToString(tag), n)
			kl, ok := runScenario(t, env, tail, sc, flags, prefix)
			if !ok {
				continue
			}
			kl.Name = name
			got, err := formatLive(env, &kl, sc.timestamps && flags&ir.LogFlagIPOpt != 0)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			captured = append(captured, kl)
			if got != kl.Line {
				t.Errorf("%s: Format differs from the kernel\n got: %q\nwant: %q\nframe: %s", name, got, kl.Line, kl.Frame)
			}
		}
	}
	if *update {
		b, err := json.MarshalIndent(captured, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kernelLinesFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d cases to %s", len(captured), kernelLinesFile)
	}
}

// timestampTolerance bounds the difference between the kernel's clock in a
// timestamp option and the test's.
const timestampTolerance = 5 * time.Second

// formatLive formats the case in fw's namespace, where the routing table
// answers what the kernel looked up, and records those answers in kl. When
// timestamps is true the kernel filled the first slot of a timestamp option
// (the first option): its clock is taken from the line.
func formatLive(e *oracleEnv, kl *kernelLine, timestamps bool) (string, error) {
	ev, err := kl.event()
	if err != nil {
		return "", err
	}
	h := liveTestHost{at: time.Now()}
	if timestamps {
		ms, err := kernelTimestamp(kl.Line)
		if err != nil {
			return "", err
		}
		diff := time.Duration(int64(ms)-int64(msSinceMidnight(time.Now()))) * time.Millisecond
		if diff.Abs() > timestampTolerance {
			return "", fmt.Errorf("kernel timestamp %d ms is %v away from the clock", ms, diff)
		}
		kl.NowMs = &ms
		h.at = atMs(ms)
	}
	var line string
	err = nettest.InNamespace(e.topo.FwNS, func() error {
		if ev.Chain == ir.ChainForward && ev.Family == ir.IPv4 && ev.Flags&ir.LogFlagIPOpt != 0 {
			src := netip.AddrFrom4([4]byte(ev.Frame[ev.L3Off+12 : ev.L3Off+16]))
			if a, ok := (liveHost{}).specDst(src); ok {
				kl.SpecDst = a.String()
			}
		}
		line = formatEvent(ev, kl.names(), h)
		return nil
	})
	return line, err
}

// liveTestHost is liveHost with a chosen clock.
type liveTestHost struct {
	liveHost
	at time.Time
}

func (h liveTestHost) now() time.Time { return h.at }

// kernelTimestamp returns the first timestamp of the timestamp option that
// starts the options of a kernel line.
func kernelTimestamp(line string) (uint32, error) {
	_, rest, ok := strings.Cut(line, "OPT (")
	if !ok {
		return 0, fmt.Errorf("no options in %q", line)
	}
	opt, _, _ := strings.Cut(rest, ")")
	b, err := hex.DecodeString(opt)
	slot := 4 // type, length, pointer, flags, then the first slot
	if err == nil && len(b) > 3 && b[3]&ipoptTSFlags != ipoptTSOnly {
		slot += ipAddrLen // an address, then its timestamp
	}
	if err != nil || len(b) < slot+4 || b[0] != ipoptTimestamp {
		return 0, fmt.Errorf("no timestamp option in %q", line)
	}
	return binary.BigEndian.Uint32(b[slot:]), nil
}

// runScenario installs the LOG rule, sends the packet and returns the
// kernel's line with the frame.
func runScenario(t *testing.T, e *oracleEnv, tail *kmsgTail, sc scenario, flags uint8, prefix string) (kernelLine, bool) {
	t.Helper()
	fw := e.topo.FwNS
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		nettest.MustExec(t, fw, ipt(fam), "-F")
	}
	rule := append([]string{ipt(sc.fam), "-A", sc.chain}, sc.match...)
	rule = append(rule, "-j", "LOG", "--log-prefix", prefix)
	rule = append(rule, logOptions(flags)...)
	nettest.MustExec(t, fw, rule...)
	s := sc.send(t, e)
	if s.frame == nil {
		return kernelLine{}, false
	}
	rec, err := tail.waitLine(prefix, kernelLineTimeout)
	if err != nil {
		t.Errorf("%s flags=%#02x: %v", sc.name, flags, err)
		return kernelLine{}, false
	}
	if rec.level != defaultLevel {
		t.Errorf("%s: kernel level %d, want %d", sc.name, rec.level, defaultLevel)
	}
	l3 := ethHeaderLen
	if binary.BigEndian.Uint16(s.frame[2*ethAddrLen:]) == nettest.EtherTypeVLAN {
		l3 += 4 // one 802.1Q tag
	}
	return kernelLine{
		Family:   uint8(sc.fam),
		Chain:    sc.chain,
		InIndex:  s.inIdx,
		In:       s.inName,
		OutIndex: s.outIdx,
		Out:      s.outName,
		Flags:    flags,
		Prefix:   prefix,
		HasMAC:   sc.chain != ir.ChainOutput,
		L3Off:    l3,
		Frame:    hex.EncodeToString(s.frame),
		Line:     rec.text,
	}, true
}

// enableNetnsLogging sets nf_log_all_netns for the test and restores it
// when the test and every other user of it have ended
// (nettest.EnableNetnsLogging).
func enableNetnsLogging(t *testing.T) {
	t.Helper()
	restore, err := nettest.EnableNetnsLogging()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Errorf("restore nf_log_all_netns: %v", err)
		}
	})
}

// setupVLAN adds VLAN testVLAN on fw's input interface.
func setupVLAN(t *testing.T, topo *nettest.Topology) *oracleEnv {
	t.Helper()
	x := topo.Subnet
	e := &oracleEnv{
		topo:     topo,
		vlanGen4: netip.AddrFrom4([4]byte{10, x, vlanSubnet, 2}),
		vlanFw4:  netip.AddrFrom4([4]byte{10, x, vlanSubnet, 1}),
		vlanGen6: netip.MustParseAddr(fmt.Sprintf("fd00:%d:%d::2", x, vlanSubnet)),
		vlanFw6:  netip.MustParseAddr(fmt.Sprintf("fd00:%d:%d::1", x, vlanSubnet)),
	}
	fw := topo.FwNS
	if r, err := nettest.Exec(fw, "ip", "link", "add", "link", nettest.FwInIfname, "name", vlanIfname, "type", "vlan", "id", fmt.Sprint(testVLAN)); err != nil {
		t.Logf("no VLAN devices on this kernel, VLAN scenarios skipped: %v", r)
		return e
	}
	nettest.MustExec(t, fw, "ip", "addr", "add", e.vlanFw4.String()+"/24", "dev", vlanIfname)
	nettest.MustExec(t, fw, "ip", "addr", "add", e.vlanFw6.String()+"/64", "dev", vlanIfname, "nodad")
	nettest.MustExec(t, fw, "ip", "link", "set", vlanIfname, "up")
	out := nettest.MustExec(t, fw, "cat", "/sys/class/net/"+vlanIfname+"/ifindex")
	if _, err := fmt.Sscan(out, &e.vlanIndex); err != nil {
		t.Fatalf("ifindex of %s: %v", vlanIfname, err)
	}
	return e
}

// inject sends an IP packet from gen to fw's input interface and returns
// what fw received on it (INPUT).
func (e *oracleEnv) inject(t *testing.T, pkt []byte) sent {
	return e.injectEth(t, nettest.Ethernet{Dst: e.topo.FwIn.MAC, Src: e.topo.Gen.MAC}, pkt,
		uint32(e.topo.FwIn.Ifindex), nettest.FwInIfname, 0, "")
}

// forward sends an IP packet from gen through fw (FORWARD).
func (e *oracleEnv) forward(t *testing.T, pkt []byte) sent {
	return e.injectEth(t, nettest.Ethernet{Dst: e.topo.FwIn.MAC, Src: e.topo.Gen.MAC}, pkt,
		uint32(e.topo.FwIn.Ifindex), nettest.FwInIfname, uint32(e.topo.FwOut.Ifindex), nettest.FwOutIfname)
}

// injectVLAN sends an IP packet tagged with testVLAN (INPUT on the VLAN).
func (e *oracleEnv) injectVLAN(t *testing.T, pkt []byte) sent {
	if e.vlanIndex == 0 {
		return sent{} // no VLAN device
	}
	eth := nettest.Ethernet{Dst: e.topo.FwIn.MAC, Src: e.topo.Gen.MAC}.WithVLAN(nettest.VLANTag{ID: testVLAN})
	return e.injectEth(t, eth, pkt, e.vlanIndex, vlanIfname, 0, "")
}

func (e *oracleEnv) injectEth(t *testing.T, eth nettest.Ethernet, pkt []byte, in uint32, inName string, out uint32, outName string) sent {
	t.Helper()
	frame := eth.Frame(pkt)
	if err := nettest.Inject(e.topo.GenNS, nettest.GenIfname, frame); err != nil {
		t.Fatalf("inject: %v", err)
	}
	return sent{frame: frame, inIdx: in, inName: inName, outIdx: out, outName: outName}
}

// fromFw runs act in fw and returns the first frame gen receives from fw
// for which match holds (OUTPUT).
func (e *oracleEnv) fromFw(t *testing.T, act func(), match func(p *nettest.Packet) bool) sent {
	t.Helper()
	c := nettest.StartCapture(t, e.topo.GenNS, nettest.GenIfname, func(c nettest.Captured) bool {
		return !c.Outgoing && match(c.Packet)
	})
	act()
	got, ok := c.WaitFor(func(nettest.Captured) bool { return true }, kernelLineTimeout)
	c.Stop()
	if !ok {
		t.Errorf("no frame from fw reached gen")
		return sent{}
	}
	return sent{frame: got.Raw, outIdx: uint32(e.topo.FwIn.Ifindex), outName: nettest.FwInIfname}
}

// onLoopback runs act in fw and returns the first frame fw's loopback
// device receives for which match holds (INPUT on lo).
func (e *oracleEnv) onLoopback(t *testing.T, act func(), match func(p *nettest.Packet) bool) sent {
	t.Helper()
	c := nettest.StartCapture(t, e.topo.FwNS, "lo", func(c nettest.Captured) bool {
		return !c.Outgoing && match(c.Packet)
	})
	act()
	got, ok := c.WaitFor(func(nettest.Captured) bool { return true }, kernelLineTimeout)
	c.Stop()
	if !ok {
		t.Errorf("no frame crossed fw's loopback device")
		return sent{}
	}
	return sent{frame: got.Raw, inIdx: loopbackIfindex, inName: "lo"}
}

// Options used by the scenarios.
var (
	// tcpSynOptions are MSS 1460, SACK permitted, timestamps, NOP, window
	// scale 7, as Linux sends them.
	tcpSynOptions = []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 1, 3, 3, 7}
	// ipRecordRoute is a record route option with room for one address,
	// then a NOP and an end of list.
	ipRecordRoute = []byte{7, 7, 4, 0, 0, 0, 0, 1}
	// ipTimestamp is a timestamp option (timestamps only) with two slots.
	ipTimestamp = []byte{68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	// ipJunkAfterEnd is a NOP, an end of list and bytes the kernel clears.
	ipJunkAfterEnd = []byte{1, 0, 0xaa, 0xbb}
	// ipRouterAlert is the router alert option (RFC 2113).
	ipRouterAlert = []byte{0x94, 4, 0, 0}
)

// ipOptOnly limits sc to the flag sets where options are printed.
func ipOptOnly(sc scenario) scenario {
	sc.flagsets = []uint8{0, ir.LogFlagIPOpt}
	return sc
}

// withTS marks sc as writing the kernel's clock in its options.
func withTS(sc scenario) scenario {
	sc = ipOptOnly(sc)
	sc.timestamps = true
	return sc
}

// hbhSkipOption is an IPv6 option type that a node skips when it does not
// know it (the two high bits are 00).
const hbhSkipOption = 0x1e

func tcpSyn(sp, dp uint16) nettest.TCP {
	return nettest.TCP{SrcPort: sp, DstPort: dp, Seq: 0x01020304, Flags: nettest.TCPSyn, Window: 64240, Options: tcpSynOptions}
}

func udp(sp, dp uint16, n int) nettest.UDP {
	return nettest.UDP{SrcPort: sp, DstPort: dp, Payload: make([]byte, n)}
}

func echo4(id, seq uint16) nettest.ICMPv4 {
	return nettest.ICMPv4{Type: nettest.ICMPv4EchoRequest, Rest: uint32(id)<<16 | uint32(seq), Payload: []byte("xfw-logd-oracle!")}
}

func echo6(id, seq uint16) nettest.ICMPv6 {
	return nettest.ICMPv6{Type: nettest.ICMPv6EchoRequest, Rest: uint32(id)<<16 | uint32(seq), Payload: []byte("xfw-logd-oracle!")}
}

// setTCPBits sets byte 12 (data offset, reserved, AE) and 13 (flags) of the
// TCP header at off in pkt.
func setTCPBits(pkt []byte, off int, b12, b13 byte) []byte {
	pkt[off+12] = b12
	pkt[off+13] = b13
	return pkt
}

// scenarios returns the packets of the live comparison.
func scenarios(e *oracleEnv) []scenario {
	topo := e.topo
	gen4, fw4, sink4 := topo.Gen.IPv4, topo.FwIn.IPv4, topo.Sink.IPv4
	gen6, fw6, sink6 := topo.Gen.IPv6, topo.FwIn.IPv6, topo.Sink.IPv6
	in4 := []string{"-s", gen4.String(), "-d", fw4.String()}
	in6 := []string{"-s", gen6.String(), "-d", fw6.String()}
	fwd4 := []string{"-s", gen4.String(), "-d", sink4.String()}
	fwd6 := []string{"-s", gen6.String(), "-d", sink6.String()}
	v4 := func(l4 nettest.Transport) []byte { return nettest.IPv4{Src: gen4, Dst: fw4, ID: 0x1234}.Packet(l4) }
	v6 := func(l4 nettest.Transport) []byte { return nettest.IPv6{Src: gen6, Dst: fw6}.Packet(l4) }
	input := func(name string, fam ir.Family, pkt func() []byte) scenario {
		m := in4
		if fam == ir.IPv6 {
			m = in6
		}
		return scenario{name: name, fam: fam, chain: ir.ChainInput, match: m,
			send: func(t *testing.T, e *oracleEnv) sent { return e.inject(t, pkt()) }}
	}
	fwd := func(name string, fam ir.Family, pkt func() []byte) scenario {
		m := fwd4
		if fam == ir.IPv6 {
			m = fwd6
		}
		return scenario{name: name, fam: fam, chain: ir.ChainForward, match: m,
			send: func(t *testing.T, e *oracleEnv) sent { return e.forward(t, pkt()) }}
	}
	// icmpError4 quotes an IPv4 TCP segment from fw to gen.
	quoted4 := func() []byte {
		q := nettest.IPv4{Src: fw4, Dst: gen4, ID: 0x4321, DontFragment: true}.Packet(tcpSyn(portDst, portSrc))
		return q[:ipv4HeaderLen+8] // the 8 bytes of transport header RFC 792 asks for
	}
	quoted6 := func() []byte {
		return nettest.IPv6{Src: fw6, Dst: gen6}.Packet(udp(portDst, portSrc, 40))
	}
	frag4 := func(dst netip.Addr, l4 nettest.Transport, idx int) []byte {
		p := nettest.IPv4{Src: gen4, Dst: dst, ID: 0x2222}.Packet(l4)
		frags, err := nettest.FragmentIPv4(p, 16)
		if err != nil {
			panic(err)
		}
		return frags[idx]
	}
	frag6 := func(dst netip.Addr, l4 nettest.Transport, idx int) []byte {
		p := nettest.IPv6{Src: gen6, Dst: dst}.Packet(l4)
		frags, err := nettest.FragmentIPv6(p, 16, 0xabcdef01)
		if err != nil {
			panic(err)
		}
		return frags[idx]
	}
	return []scenario{
		// IPv4, INPUT.
		input("v4/tcp-syn", ir.IPv4, func() []byte { return v4(tcpSyn(portSrc, portDst)) }),
		input("v4/tcp-flags-res", ir.IPv4, func() []byte {
			p := v4(nettest.TCP{SrcPort: portSrc, DstPort: portDst, Seq: 7, Ack: 9, Window: 512, Urgent: 3})
			return setTCPBits(p, ipv4HeaderLen, 5<<4|0x0f, 0xff) // all reserved bits, AE, all flags
		}),
		input("v4/tcp-ae-only", ir.IPv4, func() []byte {
			p := v4(nettest.TCP{SrcPort: portSrc, DstPort: portDst, Window: 1})
			return setTCPBits(p, ipv4HeaderLen, 5<<4|0x01, 0x10)
		}),
		input("v4/tcp-res-bit", ir.IPv4, func() []byte {
			p := v4(nettest.TCP{SrcPort: portSrc, DstPort: portDst, Window: 1})
			return setTCPBits(p, ipv4HeaderLen, 5<<4|0x02, 0x18)
		}),
		input("v4/udp", ir.IPv4, func() []byte { return v4(udp(portSrc, portDst, 12)) }),
		input("v4/udp-padded-frame", ir.IPv4, func() []byte {
			return append(v4(udp(portSrc, portDst, 2)), make([]byte, 16)...) // Ethernet padding
		}),
		input("v4/udp-big", ir.IPv4, func() []byte { return v4(udp(portSrc, portDst, 1200)) }),
		input("v4/udplite", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Protocol: protoUDPLite}.Packet(udp(portSrc, portDst, 4))
		}),
		input("v4/icmp-echo", ir.IPv4, func() []byte { return v4(echo4(0x1f, 3)) }),
		input("v4/icmp-echo-reply", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: nettest.ICMPv4EchoReply, Rest: 5<<16 | 6})
		}),
		input("v4/tos-ttl-df", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, TOS: 0xbb, TTL: 3, ID: 65535, DontFragment: true}.Packet(echo4(1, 1))
		}),
		input("v4/ce-flag", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, ReservedFlag: true}.Packet(udp(portSrc, portDst, 1))
		}),
		input("v4/options-rr-udp", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: ipRecordRoute}.Packet(udp(portSrc, portDst, 8))
		}),
		input("v4/options-junk-after-end", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: ipJunkAfterEnd}.Packet(udp(portSrc, portDst, 8))
		}),
		input("v4/options-rr-full", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: []byte{7, 7, 8, 1, 2, 3, 4, 0}}.Packet(udp(portSrc, portDst, 8))
		}),
		withTS(input("v4/options-ts", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: ipTimestamp}.Packet(udp(portSrc, portDst, 8))
		})),
		withTS(input("v4/options-ts-prespec", ir.IPv4, func() []byte {
			a := fw4.As4()
			o := append([]byte{68, 12, 5, ipoptTSPrespec}, a[:]...)
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: append(o, 0, 0, 0, 0)}.Packet(udp(portSrc, portDst, 8))
		})),
		ipOptOnly(input("v4/options-ts-prespec-other", ir.IPv4, func() []byte {
			o := []byte{68, 12, 5, ipoptTSPrespec, 192, 0, 2, 1, 0, 0, 0, 0}
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: o}.Packet(udp(portSrc, portDst, 8))
		})),
		ipOptOnly(input("v4/options-ts-overflow", ir.IPv4, func() []byte {
			o := []byte{68, 8, 9, 0x20, 0, 0, 0, 1}
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: o}.Packet(udp(portSrc, portDst, 8))
		})),
		input("v4/options-ra-tcp", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, Options: ipRouterAlert}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v4/icmp-unreach-fragneeded", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: nettest.ICMPv4DestUnreachable, Code: icmpFragNeeded, Rest: 1400, Payload: quoted4()})
		}),
		input("v4/icmp-time-exceeded", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: nettest.ICMPv4TimeExceeded, Payload: quoted4()})
		}),
		input("v4/icmp-redirect", ir.IPv4, func() []byte {
			gw := fw4.As4()
			return v4(nettest.ICMPv4{Type: icmpRedirect, Code: 1, Rest: binary.BigEndian.Uint32(gw[:]), Payload: quoted4()})
		}),
		input("v4/icmp-paramprob", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: icmpParamProb, Rest: 22 << 24, Payload: quoted4()})
		}),
		input("v4/icmp-unreach-short-quote", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: nettest.ICMPv4DestUnreachable, Code: 3, Payload: quoted4()[:12]})
		}),
		input("v4/icmp-timestamp-short", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: 13})
		}),
		input("v4/icmp-unknown-type", ir.IPv4, func() []byte {
			return v4(nettest.ICMPv4{Type: 42, Code: 7})
		}),
		input("v4/tcp-incomplete", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, TotalLength: ipv4HeaderLen + 10}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v4/tcp-options-truncated", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, TotalLength: ipv4HeaderLen + tcpHeaderLen + 8}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v4/udp-incomplete", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, TotalLength: ipv4HeaderLen + 4}.Packet(udp(portSrc, portDst, 0))
		}),
		input("v4/icmp-incomplete", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: fw4, TotalLength: ipv4HeaderLen + 4}.Packet(echo4(1, 1))
		}),
		input("v4/esp", ir.IPv4, func() []byte {
			return v4(nettest.Raw{Proto: protoESP, Data: []byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1, 9, 9}})
		}),
		input("v4/ah", ir.IPv4, func() []byte {
			return v4(nettest.Raw{Proto: protoAH, Data: []byte{protoTCP, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
		}),
		input("v4/gre", ir.IPv4, func() []byte {
			return v4(nettest.Raw{Proto: 47, Data: []byte{0, 0, 0x08, 0}}) // GRE
		}),
		// IPv4, FORWARD: the TTL is decremented before the hook.
		fwd("v4/fwd-udp", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: sink4, ID: 77}.Packet(udp(portSrc, portDst, 20))
		}),
		fwd("v4/fwd-tcp-syn", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: sink4, ID: 78, DontFragment: true}.Packet(tcpSyn(portSrc, portDst))
		}),
		fwd("v4/fwd-options-rr", ir.IPv4, func() []byte {
			return nettest.IPv4{Src: gen4, Dst: sink4, Options: ipRecordRoute}.Packet(echo4(2, 2))
		}),
		withTS(fwd("v4/fwd-options-ts-addr", ir.IPv4, func() []byte {
			o := []byte{68, 12, 5, ipoptTSAndAddr, 0, 0, 0, 0, 0, 0, 0, 0}
			return nettest.IPv4{Src: gen4, Dst: sink4, Options: o}.Packet(udp(portSrc, portDst, 8))
		})),
		fwd("v4/fwd-frag-first-tcp", ir.IPv4, func() []byte { return frag4(sink4, tcpSyn(portSrc, portDst), 0) }),
		fwd("v4/fwd-frag-later-tcp", ir.IPv4, func() []byte { return frag4(sink4, tcpSyn(portSrc, portDst), 1) }),
		fwd("v4/fwd-frag-later-udp", ir.IPv4, func() []byte { return frag4(sink4, udp(portSrc, portDst, 40), 2) }),
		fwd("v4/fwd-frag-later-icmp", ir.IPv4, func() []byte { return frag4(sink4, echo4(3, 3), 1) }),
		fwd("v4/fwd-frag-later-esp", ir.IPv4, func() []byte {
			return frag4(sink4, nettest.Raw{Proto: protoESP, Data: make([]byte, 40)}, 1)
		}),
		fwd("v4/fwd-frag-later-ah", ir.IPv4, func() []byte {
			return frag4(sink4, nettest.Raw{Proto: protoAH, Data: make([]byte, 40)}, 1)
		}),
		// IPv4 on a VLAN device.
		{name: "v4/vlan-udp", fam: ir.IPv4, chain: ir.ChainInput, match: []string{"-i", vlanIfname},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.injectVLAN(t, nettest.IPv4{Src: e.vlanGen4, Dst: e.vlanFw4}.Packet(udp(portSrc, portDst, 3)))
			}},
		// IPv4, OUTPUT.
		{name: "v4/out-icmp-echo", fam: ir.IPv4, chain: ir.ChainOutput,
			match: []string{"-d", gen4.String(), "-p", "icmp", "--icmp-type", "echo-request"},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.fromFw(t, func() { nettest.Ping(e.topo.FwNS, gen4) }, func(p *nettest.Packet) bool {
					return p.IPVersion == 4 && p.Protocol == protoICMP && p.ICMPType == nettest.ICMPv4EchoRequest
				})
			}},
		{name: "v4/out-tcp-syn", fam: ir.IPv4, chain: ir.ChainOutput,
			match: []string{"-d", gen4.String(), "-p", "tcp", "--syn"},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.fromFw(t, func() {
					nettest.TCPConnect(e.topo.FwNS, netip.AddrPortFrom(gen4, portDisc), nettest.WithTimeout(time.Second))
				}, func(p *nettest.Packet) bool {
					return p.IPVersion == 4 && p.Protocol == protoTCP && p.TCPFlags == nettest.TCPSyn
				})
			}},
		{name: "v4/out-udp", fam: ir.IPv4, chain: ir.ChainOutput,
			match: []string{"-d", gen4.String(), "-p", "udp"},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.fromFw(t, func() {
					nettest.UDPSend(e.topo.FwNS, netip.AddrPortFrom(gen4, portDisc), []byte("hello"))
				}, func(p *nettest.Packet) bool {
					return p.IPVersion == 4 && p.Protocol == protoUDP
				})
			}},

		// Loopback: a MAC header of zeros, never decoded.
		{name: "v4/lo-icmp-echo", fam: ir.IPv4, chain: ir.ChainInput,
			match:    []string{"-i", "lo", "-p", "icmp", "--icmp-type", "echo-request"},
			flagsets: []uint8{0, ir.LogFlagMACDecode},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.onLoopback(t, func() { nettest.Ping(e.topo.FwNS, netip.MustParseAddr("127.0.0.1")) }, func(p *nettest.Packet) bool {
					return p.IPVersion == 4 && p.Protocol == protoICMP && p.ICMPType == nettest.ICMPv4EchoRequest
				})
			}},

		// IPv6, INPUT.
		input("v6/tcp-syn", ir.IPv6, func() []byte { return v6(tcpSyn(portSrc, portDst)) }),
		input("v6/tcp-flags-res", ir.IPv6, func() []byte {
			p := v6(nettest.TCP{SrcPort: portSrc, DstPort: portDst, Seq: 7, Ack: 9, Window: 512, Urgent: 3})
			return setTCPBits(p, ipv6HeaderLen, 5<<4|0x0f, 0xff)
		}),
		input("v6/udp", ir.IPv6, func() []byte { return v6(udp(portSrc, portDst, 12)) }),
		input("v6/udplite", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, NextHeader: protoUDPLite}.Packet(udp(portSrc, portDst, 4))
		}),
		input("v6/tc-flowlabel-hoplimit", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, TrafficClass: 0xb9, FlowLabel: 0xabcde, HopLimit: 1}.Packet(echo6(4, 4))
		}),
		input("v6/icmpv6-echo", ir.IPv6, func() []byte { return v6(echo6(0x77, 9)) }),
		input("v6/icmpv6-echo-reply", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: nettest.ICMPv6EchoReply, Rest: 1<<16 | 2})
		}),
		input("v6/icmpv6-too-big", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: nettest.ICMPv6PacketTooBig, Rest: 1280, Payload: quoted6()})
		}),
		input("v6/icmpv6-unreach", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: nettest.ICMPv6DestUnreachable, Code: 4, Payload: quoted6()})
		}),
		input("v6/icmpv6-paramprob", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: nettest.ICMPv6ParamProblem, Code: 1, Rest: 40, Payload: quoted6()})
		}),
		input("v6/icmpv6-unreach-short-quote", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: nettest.ICMPv6TimeExceeded, Payload: quoted6()[:30]})
		}),
		input("v6/icmpv6-mld-query", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: icmp6MgmQuery, Payload: make([]byte, 16)})
		}),
		input("v6/icmpv6-ns", ir.IPv6, func() []byte {
			return v6(nettest.ICMPv6{Type: 135, Payload: make([]byte, 16)})
		}),
		input("v6/hbh-udp", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.PadNOption(4))}}.Packet(udp(portSrc, portDst, 8))
		}),
		input("v6/hbh-icmpv6-echo", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.TLVOption(hbhSkipOption, []byte{1, 2, 3, 4}))}}.Packet(echo6(5, 5))
		}),
		input("v6/hbh-dst-rt-tcp", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{
				nettest.HopByHop(nettest.PadNOption(4)),
				nettest.DestOpts(nettest.PadNOption(6)),
				nettest.RoutingHeader(0, 0, sink6),
			}}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v6/no-next-header", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{nettest.DestOpts()}}.Packet(nil)
		}),
		input("v6/frag-first-udp", ir.IPv6, func() []byte { return frag6(fw6, udp(portSrc, portDst, 40), 0) }),
		input("v6/frag-later-udp", ir.IPv6, func() []byte { return frag6(fw6, udp(portSrc, portDst, 40), 1) }),
		input("v6/frag-last-icmpv6", ir.IPv6, func() []byte { return frag6(fw6, echo6(6, 6), 1) }),
		input("v6/frag-later-dstopts", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{
				nettest.FragmentHeader(2, true, 0x55),
				nettest.DestOpts(nettest.PadNOption(4)),
			}}.Packet(udp(portSrc, portDst, 8))
		}),
		input("v6/frag-later-ah", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{
				nettest.FragmentHeader(2, false, 0x56),
				{Type: protoAH, Data: make([]byte, 10)},
			}}.Packet(udp(portSrc, portDst, 8))
		}),
		input("v6/ah-tcp", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{
				{Type: protoAH, Data: []byte{0, 0, 0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 1}},
			}}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v6/esp", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, NextHeader: protoESP}.Packet(nettest.Raw{Proto: protoESP, Data: []byte{0, 0, 0x10, 0x01, 0, 0, 0, 1, 1, 2, 3, 4}})
		}),
		input("v6/tcp-incomplete", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, PayloadLength: 10}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v6/tcp-options-truncated", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, PayloadLength: tcpHeaderLen + 4}.Packet(tcpSyn(portSrc, portDst))
		}),
		input("v6/icmpv6-incomplete", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, PayloadLength: 4}.Packet(echo6(1, 1))
		}),
		input("v6/hbh-truncated", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: fw6, Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.PadNOption(4))}, PayloadLength: 8}.Packet(udp(portSrc, portDst, 8))
		}),
		// IPv6, FORWARD.
		fwd("v6/fwd-udp", ir.IPv6, func() []byte { return nettest.IPv6{Src: gen6, Dst: sink6}.Packet(udp(portSrc, portDst, 20)) }),
		fwd("v6/fwd-tcp-syn", ir.IPv6, func() []byte {
			return nettest.IPv6{Src: gen6, Dst: sink6, FlowLabel: 0x12345}.Packet(tcpSyn(portSrc, portDst))
		}),
		fwd("v6/fwd-frag-later-tcp", ir.IPv6, func() []byte { return frag6(sink6, tcpSyn(portSrc, portDst), 1) }),
		// IPv6 on a VLAN device.
		{name: "v6/vlan-icmpv6-echo", fam: ir.IPv6, chain: ir.ChainInput, match: []string{"-i", vlanIfname},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.injectVLAN(t, nettest.IPv6{Src: e.vlanGen6, Dst: e.vlanFw6}.Packet(echo6(8, 8)))
			}},
		// IPv6, OUTPUT.
		{name: "v6/out-icmpv6-echo", fam: ir.IPv6, chain: ir.ChainOutput,
			match: []string{"-d", gen6.String(), "-p", "ipv6-icmp", "--icmpv6-type", "echo-request"},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.fromFw(t, func() { nettest.Ping(e.topo.FwNS, gen6) }, func(p *nettest.Packet) bool {
					return p.IPVersion == 6 && p.Protocol == protoICMPv6 && p.ICMPType == nettest.ICMPv6EchoRequest
				})
			}},
		{name: "v6/out-tcp-syn", fam: ir.IPv6, chain: ir.ChainOutput,
			match: []string{"-d", gen6.String(), "-p", "tcp", "--syn"},
			send: func(t *testing.T, e *oracleEnv) sent {
				return e.fromFw(t, func() {
					nettest.TCPConnect(e.topo.FwNS, netip.AddrPortFrom(gen6, portDisc), nettest.WithTimeout(time.Second))
				}, func(p *nettest.Packet) bool {
					return p.IPVersion == 6 && p.Protocol == protoTCP && p.TCPFlags == nettest.TCPSyn
				})
			}},
	}
}
