package e2e

// IPv4 reverse-path filtering (net.ipv4.conf.{all,<dev>}.rp_filter)
// against the kernel: ip_route_input_slow drops, after PREROUTING and
// before INPUT or FORWARD, a packet whose source fib_validate_source
// refuses: strict (1) when the route back to the source leaves by another
// device than the packet came in on, loose (2) when there is no route back
// at all; the kernel takes the larger of "all"'s and the device's value.
// xfw mirrors them at each sync and the agent when one changes
// (internal/dataplane/insysctl.go) and does the reverse lookup at XDP
// (bpf/route.h xfw_rpf): what the kernel drops must not be forwarded by
// the fast path, nor counted in INPUT or FORWARD.

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// rpfOtherNet is a prefix fw routes by out0 (towards sink): a source in it
// arriving on in0 comes in by another device than its route back.
const rpfOtherNet = "198.51.100.0/24"

// rpfMarkNet is a prefix fw routes by out0 in its main table and by in0
// in table rpfMarkTable, which mark rpfMark selects (ip rule fwmark);
// mangle PREROUTING marks datagrams from it. Its sources pass strict
// reverse-path filtering only when the lookup takes the mark
// (src_valid_mark).
const (
	rpfMarkNet   = "192.0.2.0/24"
	rpfMarkTable = "100"
	rpfMark      = "7"
)

// rpfTables count every UDP datagram in raw and mangle PREROUTING, which
// the kernel runs before its reverse-path check, and mark rpfMarkNet's.
const rpfTables = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p udp\nCOMMIT\n" +
	"*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
	"-A PREROUTING -p udp\n-A PREROUTING -s " + rpfMarkNet + " -j MARK --set-xmark 0x" + rpfMark + "/0xffffffff\nCOMMIT\n"

// rpfSetup routes rpfOtherNet by out0 in fw and turns GRO on for sink's
// interface, whose veth then takes XDP frames: the fast path's target.
func rpfSetup(t *testing.T, tw *ctTwin) string {
	nettest.MustExec(t, tw.tp.FwNS, "ip", "route", "add", rpfOtherNet, "via", tw.tp.Sink.IPv4.String(), "dev", nettest.FwOutIfname)
	nettest.MustExec(t, tw.tp.FwNS, "ip", "route", "add", rpfMarkNet, "via", tw.tp.Sink.IPv4.String(), "dev", nettest.FwOutIfname)
	nettest.MustExec(t, tw.tp.FwNS, "ip", "route", "add", rpfMarkNet, "via", tw.tp.Gen.IPv4.String(), "dev", nettest.FwInIfname, "table", rpfMarkTable)
	nettest.MustExec(t, tw.tp.FwNS, "ip", "rule", "add", "fwmark", rpfMark, "lookup", rpfMarkTable)
	nettest.MustExec(t, tw.tp.SinkNS, "ethtool", "-K", tw.tp.Sink.Ifname, "gro", "on")
	if tw.fw.kind == "xfw" {
		nettest.MustExec(t, tw.tp.FwNS, tw.fw.bin, "sync") // the target decided afresh
	}
	return "set"
}

// rpfFwd sends a datagram from src ("": gen's address) through fw to sink and reports whether
// it arrived; fast: the xfw twin must have forwarded it on its fast path
// (the path whose check is tested), else not.
func rpfFwd(src string, sport uint16, fast bool) func(t *testing.T, tw *ctTwin) string {
	return func(t *testing.T, tw *ctTwin) string {
		var before map[string]uint64
		if tw.fw.kind == "xfw" {
			before, _ = fpStats(t, tw.fw.bin, tw.tp)
		}
		s := tw.genAddr()
		if src != "" {
			s = netip.MustParseAddr(src)
		}
		out := tw.sendSeen(t, udpOpts4(s, tw.tp.Sink.IPv4, sport, "rpf-fwd", nil), "rpf-fwd", tw.tp.SinkNS, nettest.SinkIfname)
		if tw.fw.kind == "xfw" {
			after, _ := fpStats(t, tw.fw.bin, tw.tp)
			taken := fpDelta(before, after)["taken"]
			if fast && taken == 0 {
				t.Errorf("source %s: the fast path took no datagram, want it (changes: %v)", s, fpDelta(before, after))
			}
			if !fast && taken != 0 {
				t.Errorf("source %s: the fast path took %d datagrams, want none", s, taken)
			}
		}
		return out
	}
}

// rpfConns reports how many UDP connections fw tracks from each of the
// source ports: a packet the check drops after PREROUTING leaves none (the
// kernel's unconfirmed entry goes with it).
func rpfConns(sports ...uint16) func(t *testing.T, tw *ctTwin) string {
	return func(t *testing.T, tw *ctTwin) string {
		var out []string
		for _, p := range sports {
			n := 0
			for _, l := range strings.Split(tw.conntrack(t, "-L", "-p", "udp", "--sport", strconv.Itoa(int(p))), "\n") {
				if strings.HasPrefix(l, "udp") {
					n++
				}
			}
			out = append(out, fmt.Sprintf("%d: %d", p, n))
		}
		return strings.Join(out, ", ")
	}
}

// rpfAddr deletes ("del") or adds ("add") fw's IPv4 address on in0 and
// makes xfw see it (`xfw sync`).
func rpfAddr(op string) func(t *testing.T, tw *ctTwin) string {
	return func(t *testing.T, tw *ctTwin) string {
		nettest.MustExec(t, tw.tp.FwNS, "ip", "addr", op, tw.tp.FwIn.IPv4.String()+"/24", "dev", nettest.FwInIfname)
		if tw.fw.kind == "xfw" {
			nettest.MustExec(t, tw.tp.FwNS, tw.fw.bin, "sync")
		}
		return op
	}
}

// rpfLocal sends a datagram from src ("": gen's address) to fw's in0
// address (INPUT).
func rpfLocal(src string, sport uint16) func(t *testing.T, tw *ctTwin) string {
	return func(t *testing.T, tw *ctTwin) string {
		s := tw.genAddr()
		if src != "" {
			s = netip.MustParseAddr(src)
		}
		tw.inject(t, udpOpts4(s, tw.fwAddr(), sport, "rpf-local", nil))
		return "injected"
	}
}

// TestRPFilterAgainstKernel sends datagrams through fw and to fw with a
// proper source (gen's), one whose route back leaves by out0, and one with
// no route back, with rp_filter off, strict and loose, set for in0, for
// "all" and for both, mirrored by `xfw sync` and then by the agent, and
// compares with the kernel what arrived at sink and every rule's counter
// (raw and mangle PREROUTING count what the check drops; INPUT and FORWARD
// must not).
func TestRPFilterAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "conntrack", "ethtool")
	in := "net/ipv4/conf/" + nettest.FwInIfname + "/rp_filter"
	all := "net/ipv4/conf/all/rp_filter"
	const other, none = "198.51.100.7", "203.0.113.9" // by out0; no route
	fwdNew := "cfwd -p udp -m conntrack --ctstate NEW"
	inNew := "cin -p udp -m conntrack --ctstate NEW"
	pre := "PREROUTING -p udp"
	rp := func(dev, a string) func(t *testing.T, tw *ctTwin) string {
		return sysctlStep(map[string]string{in: dev, all: a})
	}
	scenarios := []ctScenario{
		{name: "setup: route by out0, GRO on sink", run: rpfSetup},
		{name: "rp_filter 0: proper source, forwarded", run: rpfFwd("", 41001, true), want: []string{fwdNew}},
		{name: "rp_filter 0: source routed by out0, forwarded", run: rpfFwd(other, 41002, true), want: []string{fwdNew}},
		{name: "rp_filter 0: source without route, forwarded", run: rpfFwd(none, 41003, true), want: []string{fwdNew}},
		{name: "rp_filter 0: source routed by out0, to fw", run: rpfLocal(other, 41004), want: []string{inNew}},
		{name: "rp_filter 1 for in0", run: rp("1", "0")},
		{name: "strict: proper source, forwarded", run: rpfFwd("", 41011, true), want: []string{fwdNew}},
		{name: "strict: source routed by out0, forwarded", run: rpfFwd(other, 41012, false), want: []string{pre}},
		{name: "strict: source without route, forwarded", run: rpfFwd(none, 41013, false), want: []string{pre}},
		{name: "strict: source routed by out0, to fw", run: rpfLocal(other, 41014), want: []string{pre}},
		{name: "strict: proper source, to fw", run: rpfLocal("", 41015), want: []string{inNew}},
		{name: "strict: connections tracked (proper, refused sources)", run: rpfConns(41011, 41012, 41013, 41014, 41015)},
		{name: "rp_filter 2 for in0", run: rp("2", "0")},
		{name: "loose: source routed by out0, forwarded", run: rpfFwd(other, 41021, true), want: []string{fwdNew}},
		{name: "loose: source without route, forwarded", run: rpfFwd(none, 41022, false), want: []string{pre}},
		{name: "loose: source routed by out0, to fw", run: rpfLocal(other, 41023), want: []string{inNew}},
		{name: "loose: source without route, to fw", run: rpfLocal(none, 41024), want: []string{pre}},
		{name: "rp_filter 1 for all, 0 for in0 (strict)", run: rp("0", "1")},
		{name: "all strict: source routed by out0, forwarded", run: rpfFwd(other, 41031, false), want: []string{pre}},
		{name: "all strict: proper source, forwarded", run: rpfFwd("", 41032, true), want: []string{fwdNew}},
		{name: "rp_filter 1 for all, 2 for in0 (loose: the larger)", run: rp("2", "1")},
		{name: "all strict, in0 loose: source routed by out0, forwarded", run: rpfFwd(other, 41041, true), want: []string{fwdNew}},
		{name: "all strict, in0 loose: source without route, forwarded", run: rpfFwd(none, 41042, false), want: []string{pre}},
		// src_valid_mark: the reverse lookup with PREROUTING's mark.
		{name: "rp_filter 1 for in0 and all", run: rp("1", "1")},
		{name: "strict, src_valid_mark 0: marked source routed by in0 with the mark, forwarded", run: rpfFwd("192.0.2.9", 41061, false), want: []string{pre}},
		{name: "src_valid_mark 1 for in0", run: sysctlStep(map[string]string{"net/ipv4/conf/" + nettest.FwInIfname + "/src_valid_mark": "1"})},
		{name: "strict, src_valid_mark 1: marked source routed by in0 with the mark, forwarded", run: rpfFwd("192.0.2.9", 41062, false), want: []string{fwdNew}},
		{name: "strict, src_valid_mark 1: source routed by out0, forwarded", run: rpfFwd(other, 41063, false), want: []string{pre}},
		// Loose on a device without IPv4 address fails what strict does
		// (removing it removes table 100's route by in0 too: last).
		{name: "rp_filter 1 for all, 2 for in0 again", run: rp("2", "1")},
		{name: "in0's IPv4 address removed", run: rpfAddr("del")},
		{name: "loose, in0 without address: source routed by out0, forwarded", run: rpfFwd(other, 41043, false), want: []string{pre}},
		{name: "in0's IPv4 address back", run: rpfAddr("add")},
		{name: "loose, in0's address back: source routed by out0, forwarded", run: rpfFwd(other, 41044, true), want: []string{fwdNew}},
		// The agent's watch from here on.
		{name: "xfw agent started", run: startAgentStep},
		{name: "rp_filter 1 for in0, 0 for all (agent)", run: rp("1", "0")},
		{name: "agent, strict: source routed by out0, forwarded", run: rpfFwd(other, 41051, false), want: []string{pre}},
		{name: "agent, strict: proper source, forwarded", run: rpfFwd("", 41052, true), want: []string{fwdNew}},
		{name: "rp_filter off again (agent)", run: rp("0", "0")},
		{name: "agent, off: source routed by out0, forwarded", run: rpfFwd(other, 41053, true), want: []string{fwdNew}},
	}
	runCtScenarios(t, 4, ctOptions{tables: rpfTables}, scenarios)
}

// TestFastPathRPFilterUnsure: where xfw cannot make the reverse-path check
// (forwarding off for the device the lookup asks from, the forward
// route's output device: bpf_fib_lookup answers FWD_DISABLED), a packet
// FORWARD accepts goes to the stack, which makes the check itself, never
// to the fast path: a proper source arrives, a spoofed one does not.
// With forwarding back on, the check is made and the fast path taken.
func TestFastPathRPFilterUnsure(t *testing.T) {
	tp, fw := fpTopology(t, true)
	outFwd := "net/ipv4/conf/" + nettest.FwOutIfname + "/forwarding"
	setSysctls(t, tp.FwNS, map[string]string{"net/ipv4/conf/" + nettest.FwInIfname + "/rp_filter": "1", outFwd: "0"})
	nettest.MustExec(t, tp.FwNS, "ip", "route", "add", rpfOtherNet, "via", tp.Sink.IPv4.String(), "dev", nettest.FwOutIfname)
	nettest.MustExec(t, tp.FwNS, fw.bin, "sync")

	before, _ := fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "check not made, proper source", fpDelta(before, after), map[string]uint64{"mark-or-mangle": fpDatagram})

	// A source routed by out0: FORWARD accepts it, the stack drops it.
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	udp := nettest.UDP{SrcPort: fpSport, DstPort: fpPort, Payload: []byte("spoofed")}
	pkt := nettest.IPv4{Src: netip.MustParseAddr("198.51.100.7"), Dst: tp.Sink.IPv4}.Packet(udp)
	before = after
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}.Frame(pkt)); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(1, fpWait); len(got) != 0 {
		t.Errorf("check not made: a spoofed source arrived at sink (%d datagrams)", len(got))
	}
	srv.Close()
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "check not made, spoofed source", fpDelta(before, after), map[string]uint64{"mark-or-mangle": 1})

	setSysctls(t, tp.FwNS, map[string]string{outFwd: "1"})
	nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
	before, _ = fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "check made, proper source", fpDelta(before, after), map[string]uint64{"taken": fpDatagram})
}
