package e2e

// The input device's sysctls the kernel's checks before any chain follow,
// against the kernel: accept_local (a source of fw's own from outside),
// route_localnet (127.0.0.0/8 from outside) and accept_source_route (an
// IPv4 source route option), each off and on, set for the device or for
// "all" (the kernel ORs the first two with "all", ANDs the third). xfw
// mirrors them at each sync, and the agent when one changes
// (internal/dataplane/insysctl.go, bpf/route.h).

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// optSSRR is the strict source route option (optLSRR the loose one).
const optSSRR = 137

// sysctlStep returns a scenario step that sets kv in fw, then makes xfw
// mirror them: `xfw sync`, or, once the agent runs (startAgentStep), the
// agent's own watch, waited for in its log.
func sysctlStep(kv map[string]string) func(t *testing.T, tw *ctTwin) string {
	return func(t *testing.T, tw *ctTwin) string {
		setSysctls(t, tw.tp.FwNS, kv)
		if tw.fw.kind != "xfw" {
			return "set"
		}
		if out, ok := tw.vars["agent"].(*syncBuffer); ok {
			const line = "input sysctls changed"
			n := strings.Count(out.String(), line)
			waitFor(t, "the agent to mirror the sysctls", func() bool { return strings.Count(out.String(), line) > n })
			return "set"
		}
		nettest.MustExec(t, tw.tp.FwNS, tw.fw.bin, "sync")
		return "set"
	}
}

// startAgentStep starts xfw agent in the xfw twin's fw.
func startAgentStep(t *testing.T, tw *ctTwin) string {
	if tw.fw.kind == "xfw" {
		_, out := startAgent(t, tw.fw.bin, tw.tp, "--no-commands")
		tw.vars["agent"] = out
	}
	return "started"
}

// sendSeen injects pkt from gen and reports whether a UDP datagram with
// its payload arrived in namespace ns on ifname.
func (tw *ctTwin) sendSeen(t *testing.T, pkt []byte, payload, ns, ifname string) string {
	t.Helper()
	capture := nettest.StartCapture(t, ns, ifname, func(c nettest.Captured) bool {
		return c.Packet != nil && !c.Outgoing && c.Protocol == nettest.ProtoUDP && strings.Contains(string(c.Raw), payload)
	})
	tw.inject(t, pkt)
	_, ok := capture.WaitFor(func(nettest.Captured) bool { return true }, arrivalWait)
	capture.Stop()
	if ok {
		return "arrived"
	}
	return "not arrived"
}

// udpOpts4 returns a UDP datagram src:sport → dst:7100 with IPv4 options.
func udpOpts4(src, dst netip.Addr, sport uint16, payload string, opts []byte) []byte {
	udp := nettest.UDP{SrcPort: sport, DstPort: 7100, Payload: []byte(payload)}
	return nettest.IPv4{Src: src, Dst: dst, Options: opts}.Packet(udp)
}

// srcRoute returns a source route option of type typ listing addr, its
// pointer at ptr (4: the address is still to visit; 8: the route is at
// its end).
func srcRoute(typ, ptr byte, addr netip.Addr) []byte {
	a := addr.As4()
	return []byte{typ, 7, ptr, a[0], a[1], a[2], a[3]}
}

// TestInputSysctlsAgainstKernel sends, from gen, datagrams the kernel's
// input routing or option check refuses with the default sysctls and
// admits with one set, with each sysctl off and on, and compares with the
// kernel where they went (sink, fw's INPUT) and the rules' counters.
func TestInputSysctlsAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "conntrack")
	loop := netip.MustParseAddr("127.0.0.1")
	in := "net/ipv4/conf/" + nettest.FwInIfname + "/"
	all := "net/ipv4/conf/all/"
	// gen → sink, forwarded, from fw's own out0 address.
	fwdFromOurs := func(sport uint16) func(t *testing.T, tw *ctTwin) string {
		return func(t *testing.T, tw *ctTwin) string {
			return tw.sendSeen(t, udpOpts4(tw.tp.FwOut.IPv4, tw.tp.Sink.IPv4, sport, "ours-fwd", nil), "ours-fwd", tw.tp.SinkNS, nettest.SinkIfname)
		}
	}
	// gen → fw's in0 address, from fw's own out0 address.
	localFromOurs := func(sport uint16) func(t *testing.T, tw *ctTwin) string {
		return func(t *testing.T, tw *ctTwin) string {
			tw.inject(t, udpOpts4(tw.tp.FwOut.IPv4, tw.fwAddr(), sport, "ours-local", nil))
			return "injected"
		}
	}
	// gen → 127.0.0.1 (fw's loopback address).
	toLoopback := func(sport uint16) func(t *testing.T, tw *ctTwin) string {
		return func(t *testing.T, tw *ctTwin) string {
			tw.inject(t, udpOpts4(tw.genAddr(), loop, sport, "to-loopback", nil))
			return "injected"
		}
	}
	// gen → sink through fw, with a source route option.
	fwdRouted := func(typ byte, sport uint16) func(t *testing.T, tw *ctTwin) string {
		return func(t *testing.T, tw *ctTwin) string {
			opt := srcRoute(typ, 4, tw.tp.Sink.IPv4)
			return tw.sendSeen(t, udpOpts4(tw.genAddr(), tw.tp.Sink.IPv4, sport, "srr-fwd", opt), "srr-fwd", tw.tp.SinkNS, nettest.SinkIfname)
		}
	}
	// gen → fw, a source route at its end (fw was its last hop).
	localRouted := func(typ byte, sport uint16) func(t *testing.T, tw *ctTwin) string {
		return func(t *testing.T, tw *ctTwin) string {
			tw.inject(t, udpOpts4(tw.genAddr(), tw.fwAddr(), sport, "srr-local", srcRoute(typ, 8, tw.fwAddr())))
			return "injected"
		}
	}
	fwdNew := "cfwd -p udp -m conntrack --ctstate NEW"
	inNew := "cin -p udp -m conntrack --ctstate NEW"
	scenarios := []ctScenario{
		{name: "accept_local off: forwarded, source fw's own", run: fwdFromOurs(40411)},
		{name: "accept_local off: to fw, source fw's own", run: localFromOurs(40412)},
		{name: "accept_local on for in0", run: sysctlStep(map[string]string{in + "accept_local": "1"})},
		{name: "accept_local on: forwarded, source fw's own", run: fwdFromOurs(40401), want: []string{fwdNew}},
		{name: "accept_local on: to fw, source fw's own", run: localFromOurs(40402), want: []string{inNew}},
		{name: "route_localnet off: to 127.0.0.1", run: toLoopback(40413)},
		{name: "route_localnet on for all", run: sysctlStep(map[string]string{all + "route_localnet": "1"})},
		{name: "route_localnet on: to 127.0.0.1", run: toLoopback(40403), want: []string{inNew}},
		{name: "accept_source_route off (all 0): loose, forwarded", run: fwdRouted(optLSRR, 40404)},
		{name: "accept_source_route on for all (in0 1 by default)", run: sysctlStep(map[string]string{all + "accept_source_route": "1"})},
		{name: "accept_source_route on: loose, forwarded", run: fwdRouted(optLSRR, 40405), want: []string{fwdNew}},
		{name: "accept_source_route on: strict, forwarded (parameter problem)", run: fwdRouted(optSSRR, 40406), want: []string{"cout -p icmp -m conntrack --ctstate RELATED"}},
		{name: "accept_source_route on: loose, at its end at fw", run: localRouted(optLSRR, 40490), want: []string{inNew}},
		{name: "accept_source_route on: strict, at its end at fw", run: localRouted(optSSRR, 40491), want: []string{inNew}},
		// The agent's watch from here on.
		{name: "xfw agent started", run: startAgentStep},
		{name: "accept_source_route off for in0 (all 1: and)", run: sysctlStep(map[string]string{in + "accept_source_route": "0"})},
		{name: "accept_source_route off: loose, forwarded", run: fwdRouted(optLSRR, 40407)},
		{name: "accept_local off for in0", run: sysctlStep(map[string]string{in + "accept_local": "0"})},
		{name: "accept_local off again: forwarded, source fw's own", run: fwdFromOurs(40414)},
		{name: "accept_local on for all", run: sysctlStep(map[string]string{all + "accept_local": "1"})},
		{name: "accept_local on for all: forwarded, source fw's own", run: fwdFromOurs(40408), want: []string{fwdNew}},
		{name: "route_localnet off for all", run: sysctlStep(map[string]string{all + "route_localnet": "0"})},
		{name: "route_localnet off again: to 127.0.0.1", run: toLoopback(40415)},
		{name: "route_localnet on for in0 only", run: sysctlStep(map[string]string{in + "route_localnet": "1"})},
		{name: "route_localnet on for in0: to 127.0.0.1", run: toLoopback(40499), want: []string{inNew}},
	}
	runCtScenarios(t, 4, ctOptions{}, scenarios)
}
