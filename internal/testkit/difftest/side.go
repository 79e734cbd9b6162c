package difftest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file builds one side of a session: its topology (nettest), fw's
// VLAN device, routes and sysctls, quiet gen and sink, the observers, and
// the sending of probes.

// side is one topology with its firewall and observers.
type side struct {
	name   string
	kernel bool
	topo   *nettest.Topology
	// vlan is set when fw has its VLAN device.
	vlan bool
	log  eventLog
	caps []*nettest.Capture
	raws []*rawReader
	// genFD and sinkFD are AF_PACKET sockets in gen and sink for
	// injection.
	genFD, sinkFD int
	// out is the raw IP socket fw sends from: the reader of protocol 255
	// among raws (rawSendProto).
	out             *rawReader
	genIdx, sinkIdx int
	// logCmd is `xfw log` in fw (xfw side), started after the first load.
	logCmd  *exec.Cmd
	logDone chan struct{}
	// hasSets is set while fw holds ipsets a ruleset brought (SetLines).
	hasSets bool
}

// setup builds one side's topology, configures it and starts its observers.
func (s *Session) setup(sd *side) error {
	tp, err := nettest.Build(nettest.WithBase(namespaceBase), nettest.WithSubnet(s.cfg.Subnet), nettest.WithStaticNeighbors())
	if err != nil {
		return fmt.Errorf("%s topology: %w", sd.name, err)
	}
	sd.topo = tp
	if err := s.plan.check(tp); err != nil {
		return err
	}
	x := s.cfg.Subnet
	fw := tp.FwNS
	v4, v6 := NewPlan(ir.IPv4, x), NewPlan(ir.IPv6, x)
	cmds := s.addVLAN(sd, v4, v6)
	cmds = append(cmds, s.routeCmds(fw, v4, v6)...)
	cmds = append(cmds, [][]string{
		// A smaller MTU towards sink: forwarded packets can be too big.
		{"-n", fw, "link", "set", nettest.FwOutIfname, "mtu", strconv.Itoa(outMTU)},
		{"-n", tp.SinkNS, "link", "set", nettest.SinkIfname, "mtu", strconv.Itoa(outMTU)},
	}...)
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: ip %s: %v: %s", sd.name, strings.Join(c, " "), err, out)
		}
	}
	if err := tuneFw(sd); err != nil {
		return err
	}
	if err := quietEnds(sd); err != nil {
		return err
	}
	return s.startObservers(sd)
}

// addVLAN adds fw's VLAN device, when the kernel has VLAN devices, and
// returns the ip commands that give it its addresses and neighbours.
func (s *Session) addVLAN(sd *side, v4, v6 Plan) [][]string {
	fw := sd.topo.FwNS
	var cmds [][]string
	// The VLAN device, its addresses and gen's (raw) neighbour on it, when
	// the kernel has VLAN devices (else tagged frames are the stack's to
	// drop, and rules naming the device match nothing: still compared).
	vlan := []string{"-n", fw, "link", "add", "link", nettest.FwInIfname, "name", VLANIfname, "type", "vlan", "id", strconv.Itoa(VLANID)}
	if out, err := exec.Command("ip", vlan...).CombinedOutput(); err != nil {
		s.cfg.Logf("%s: no VLAN device (%v: %s); tagged frames go to in0", sd.name, err, strings.TrimSpace(string(out)))
	} else {
		cmds = append(cmds, [][]string{
			{"-n", fw, "addr", "add", v4.FwVLAN.String() + "/24", "dev", VLANIfname},
			{"-n", fw, "addr", "add", v6.FwVLAN.String() + "/64", "dev", VLANIfname, "nodad"},
			{"-n", fw, "link", "set", VLANIfname, "up"},
			{"-n", fw, "neigh", "replace", v4.GenVLAN.String(), "lladdr", v4.GenMAC.String(), "dev", VLANIfname, "nud", "permanent"},
			{"-n", fw, "neigh", "replace", v6.GenVLAN.String(), "lladdr", v6.GenMAC.String(), "dev", VLANIfname, "nud", "permanent"},
		}...)
		sd.vlan = true
	}
	return cmds
}

// routeCmds returns the ip commands of fw's routes (and its neighbour for
// link-local probe sources).
func (s *Session) routeCmds(fw string, v4, v6 Plan) [][]string {
	var cmds [][]string
	// Far networks: one behind gen, much of the rest behind sink; no
	// default route, so some destinations have no route at all.
	for _, p := range []Plan{v4, v6} {
		cmds = append(cmds, []string{"-n", fw, "route", "add", p.FarGen.String(), "via", p.Gen.String()})
		for _, n := range p.ViaSink {
			cmds = append(cmds, []string{"-n", fw, "route", "add", n.String(), "via", p.Sink.String()})
		}
		// Every other address of the links is behind gen or sink (the
		// two halves of each link prefix, more specific than it): what fw
		// sends them needs no neighbour resolution, which would never
		// succeed for made-up addresses (a packet waiting for it passed
		// OUTPUT in the kernel but never reaches xfw's egress hook:
		// docs/differences.md).
		for _, h := range []struct {
			n      netip.Prefix
			via    netip.Addr
			ifname string
		}{{p.GenNet, p.Gen, nettest.FwInIfname}, {p.SinkNet, p.Sink, nettest.FwOutIfname}} {
			for _, half := range halves(h.n) {
				// onlink: the gateway is in the half it routes.
				cmds = append(cmds, []string{"-n", fw, "route", "add", half.String(), "via", h.via.String(), "dev", h.ifname, "onlink"})
			}
		}
	}
	if s.cfg.Family == ir.IPv4 {
		// IPv4 destinations without a route are dropped silently (a
		// blackhole default, before any chain, as a missing route is):
		// the "network unreachable" errors ip_error sends otherwise are
		// rate-limited per source by net.ipv4.route.error_cost, a global
		// sysctl a namespace cannot turn off, so how many go out depends
		// on timing. (IPv6's are ICMPv6 errors, rate-limited by
		// net.ipv6.icmp.ratelimit, which nettest turns off.)
		cmds = append(cmds, []string{"-n", fw, "route", "add", "blackhole", "default"})
	}
	// Link-local sources of probes (fe80::1) are gen's.
	cmds = append(cmds, []string{"-n", fw, "neigh", "replace", "fe80::1", "lladdr", v6.GenMAC.String(), "dev", nettest.FwInIfname, "nud", "permanent"})
	return cmds
}

// tuneFw sets fw's sysctls and turns its checksum offload off.
func tuneFw(sd *side) error {
	fw := sd.topo.FwNS
	// No global ICMP rate limit in fw (nettest turns the per-destination
	// one off): every error a probe causes must be sent, on both sides.
	// send_redirects stays at the kernel's default: xfw lets the kernel
	// send its redirects for packets FORWARD drops too (bpf/redirect.h).
	// fw sends no IPv4 redirect in this topology all the same: the rest
	// of each link is routed via gen or sink (routeCmds), so a source is
	// never directly on the link (fib_validate_source), which the kernel
	// requires; the redirects' rate limit (per source, with backoff) would
	// make their number depend on timing. (The generator leaves IPv6
	// hairpin forwarding out, see packetgen.go.) And no IPv4 path
	// MTU learning (ip_no_pmtu_disc 2: "fragmentation needed" errors do
	// not lower a route's MTU): a probe quoting fw's packet to gen with a
	// small MTU would make fw fragment, or refuse, its later big packets
	// to gen after the OUTPUT hook, where xfw's egress hook sees a first
	// fragment or nothing (docs/differences.md; found by the stateful
	// campaign, whose ICMP errors quote fw's own earlier packets).
	err := nettest.InNamespace(fw, func() error {
		for _, kv := range [][2]string{{"net/ipv4/icmp_msgs_per_sec", "1000000000"}, {"net/ipv4/icmp_msgs_burst", "1000000000"},
			{"net/ipv4/ip_no_pmtu_disc", "2"}} {
			if err := os.WriteFile("/proc/sys/"+kv[0], []byte(kv[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", kv[0], err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", sd.name, err)
	}
	// fw computes checksums in software, so replies carry complete ones,
	// as on a wire, rather than the partial ones veth never completes.
	ifnames := []string{nettest.FwInIfname, nettest.FwOutIfname, "lo"}
	if sd.vlan {
		ifnames = append(ifnames, VLANIfname)
	}
	for _, ifname := range ifnames {
		if res, err := nettest.Exec(fw, "ethtool", "-K", ifname, "tx", "off"); err != nil {
			return fmt.Errorf("%s: ethtool -K %s tx off: %v %s", sd.name, ifname, err, res.Stderr)
		}
	}
	return nil
}

// quietEnds readies gen and sink: no traffic through their stacks. They
// run no XDP program, as a container's end of a veth does not: xfw's
// REJECT replies must reach them as the kernel's do. Sink's interface has
// GRO on (both sides): its veth then takes XDP frames, so xfw's fast path
// forwards what FORWARD accepts (bpf/fastpath.h) and is compared too.
func quietEnds(sd *side) error {
	tp := sd.topo
	if res, err := nettest.Exec(tp.SinkNS, "ethtool", "-K", nettest.SinkIfname, "gro", "on"); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("%s: ethtool -K %s gro on: %v %s", sd.name, nettest.SinkIfname, err, res.Stderr)
	}
	for _, ns := range []string{tp.GenNS, tp.SinkNS} {
		// Quiet: gen and sink neither receive nor send anything through
		// their stacks (no replies, no neighbour solicitations, no
		// listener reports); the probes leave by AF_PACKET, which
		// netfilter does not see.
		for _, prog := range []string{"iptables-legacy", "ip6tables-legacy"} {
			for _, chain := range []string{"INPUT", "FORWARD", "OUTPUT"} {
				if res, err := nettest.Exec(ns, prog, "-w", "-P", chain, "DROP"); err != nil {
					return fmt.Errorf("%s: quiet %s: %v %s", sd.name, ns, err, res.Stderr)
				}
			}
		}
	}
	return nil
}

// halves returns the two prefixes one bit longer that make up n.
func halves(n netip.Prefix) [2]netip.Prefix {
	lo := netip.PrefixFrom(n.Masked().Addr(), n.Bits()+1)
	b := n.Masked().Addr().AsSlice()
	b[n.Bits()/8] |= 0x80 >> uint(n.Bits()%8)
	hi, _ := netip.AddrFromSlice(b)
	return [2]netip.Prefix{lo, netip.PrefixFrom(hi, n.Bits()+1)}
}

// captureLife bounds a capture; a session's runs end long before.
const captureLife = 7 * 24 * time.Hour

// startObservers starts the captures at gen and sink, fw's raw sockets, and
// opens the injection sockets.
func (s *Session) startObservers(sd *side) error {
	tp := sd.topo
	for _, c := range []struct {
		ns, ifname string
		kind       eventKind
	}{{tp.GenNS, tp.Gen.Ifname, evGen}, {tp.SinkNS, tp.Sink.Ifname, evSink}} {
		kind := c.kind
		capt, err := nettest.StartCaptureFunc(c.ns, c.ifname, captureLife,
			func(f nettest.Captured) bool { return !f.Outgoing },
			func(f nettest.Captured) { sd.log.add(frameEvent(kind, f)) })
		if err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		sd.caps = append(sd.caps, capt)
	}
	if s.cfg.Debug != nil {
		// What fw's own interfaces see (after XDP), for debugging only.
		for _, ifname := range []string{nettest.FwInIfname, nettest.FwOutIfname} {
			ifname := ifname
			capt, err := nettest.StartCaptureFunc(tp.FwNS, ifname, captureLife, nil, func(f nettest.Captured) {
				dir := "in"
				if f.Outgoing {
					dir = "out"
				}
				s.cfg.Debug("%s fw %s %s: %s", sd.name, ifname, dir, describePacket(f.Packet))
			})
			if err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
			sd.caps = append(sd.caps, capt)
		}
	}
	err := nettest.InNamespace(tp.FwNS, func() error {
		raws, err := openRawReaders(s.cfg.Family == ir.IPv6)
		if err != nil {
			return err
		}
		sd.raws = raws
		for _, r := range raws {
			if r.proto == rawSendProto {
				sd.out = r
			}
		}
		if sd.out == nil {
			return errors.New("no raw sending socket")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: fw sockets: %w", sd.name, err)
	}
	for _, r := range sd.raws {
		go r.run(&sd.log)
	}
	for _, c := range []struct {
		ns, ifname string
		fd, idx    *int
	}{{tp.GenNS, tp.Gen.Ifname, &sd.genFD, &sd.genIdx}, {tp.SinkNS, tp.Sink.Ifname, &sd.sinkFD, &sd.sinkIdx}} {
		err := nettest.InNamespace(c.ns, func() error {
			ifi, err := net.InterfaceByName(c.ifname)
			if err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("AF_PACKET socket: %w", err)
			}
			*c.fd, *c.idx = fd, ifi.Index
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: injection socket in %s: %w", sd.name, c.ns, err)
		}
	}
	return nil
}

// send sends one frame or packet of a probe from its origin.
func (sd *side) send(from Origin, b []byte, v6 bool) error {
	switch from {
	case FromGen, FromSink:
		fd, idx := sd.genFD, sd.genIdx
		if from == FromSink {
			fd, idx = sd.sinkFD, sd.sinkIdx
		}
		et := uint16(b[12])<<8 | uint16(b[13])
		sa := &unix.SockaddrLinklayer{Ifindex: idx, Halen: 6, Protocol: et<<8 | et>>8} // network order
		copy(sa.Addr[:], b[:6])
		return unix.Sendto(fd, b, 0, sa)
	default:
		// The destination address routes the packet; IP_HDRINCL keeps the
		// rest of the header as written.
		p, _ := nettest.ParseIP(b)
		if p == nil || !p.Dst.IsValid() {
			return errors.New("no destination address")
		}
		if v6 {
			return sd.out.sendTo(b, &unix.SockaddrInet6{Addr: p.Dst.As16()})
		}
		return sd.out.sendTo(b, &unix.SockaddrInet4{Addr: p.Dst.As4()})
	}
}
