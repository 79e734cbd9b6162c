package difftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Config configures a Session.
type Config struct {
	// Family is the address family compared (one per session: xfw loads one
	// family's ruleset per namespace here, the kernel's iptables or
	// ip6tables the other).
	Family ir.Family
	// XFW is the xfw binary run inside the xfw topology's fw namespace.
	XFW string
	// XDPMode is passed to xfw as --xdp-mode when not empty.
	XDPMode string
	// Subnet is X of the addresses (0: DefaultSubnet).
	Subnet uint8
	// Logf receives progress messages (nil: none).
	Logf func(format string, args ...any)
	// Debug, when set, receives every observation of every run.
	Debug func(format string, args ...any)
	// AppendTail, when positive, makes xfw load up to that many of each
	// base chain's first rules with `iptables -I` (last first) and up to
	// that many of its last rules with `iptables -A` (each appended twice,
	// the first copies then deleted with -D) after restoring the rest, so
	// that its in-place paths (compiler.InsertRule, AppendRule, DeleteRule)
	// are what the kernel is compared with. The kernel restores the whole
	// ruleset.
	AppendTail int
	// Conntrack makes the session stateful: both sides' connection
	// tables (the kernel's nf_conntrack, xfw's) are flushed after each
	// ruleset is loaded, so that every run starts from none.
	Conntrack bool
}

// namespaceBase starts the names of the session's namespaces.
const namespaceBase = "xdt"

// settleTime lets the multicast listener reports and other traffic of
// freshly configured interfaces die down before anything is measured.
const settleTime = 2500 * time.Millisecond

// toolTimeout bounds one iptables-legacy or xfw command.
const toolTimeout = 90 * time.Second

// lockWait is the restore commands' wait for their lock (seconds, within
// toolTimeout).
const lockWait = "--wait=60"

// Session is a pair of identical topologies, one filtered by the kernel's
// iptables-legacy and one by xfw, with their observers. Run compares one
// ruleset and corpus; Close removes everything. A Session is not safe for
// concurrent use.
type Session struct {
	cfg   Config
	plan  Plan
	sides [2]*side
	kmsg  *kmsgReader
	undo  []func() error
	// next is the next probe marker.
	next uint32
	// appended and inPlace count the -A and -D commands of
	// Config.AppendTail and those done in place.
	appended, inPlace int
}

// sideKernel and sideXFW index Session.sides.
const (
	sideKernel = 0
	sideXFW    = 1
)

// sideNames name the sides in reports.
var sideNames = [2]string{"kernel", "xfw"}

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
	// injection; outFD is the raw IP socket fw sends from.
	genFD, sinkFD, outFD int
	genIdx, sinkIdx      int
	// logCmd is `xfw log` in fw (xfw side), started after the first load.
	logCmd  *exec.Cmd
	logDone chan struct{}
	// hasSets is set while fw holds ipsets a ruleset brought (SetLines).
	hasSets bool
}

// NewSession builds both topologies and starts the observers. It needs
// root, iproute2, ethtool and iptables-legacy (or ip6tables-legacy); on
// error everything it made is removed.
func NewSession(ctx context.Context, cfg Config) (_ *Session, err error) {
	if cfg.Subnet == 0 {
		cfg.Subnet = DefaultSubnet
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Family != ir.IPv4 && cfg.Family != ir.IPv6 {
		return nil, fmt.Errorf("difftest: family must be 4 or 6, not %d", cfg.Family)
	}
	if err := CheckTools(cfg); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, plan: NewPlan(cfg.Family, cfg.Subnet), next: 1}
	defer func() {
		if err != nil {
			if cerr := s.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	unlock, err := lockHost(ctx, cfg.Subnet)
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, unlock)
	restore, err := nettest.EnableNetnsLogging()
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, restore)
	if s.kmsg, err = openKmsg(); err != nil {
		return nil, err
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range s.sides {
		s.sides[i] = &side{name: sideNames[i], kernel: i == sideKernel, genFD: -1, sinkFD: -1, outFD: -1}
		wg.Add(1)
		go func(sd *side) {
			defer wg.Done()
			errs[i] = s.setup(sd)
		}(s.sides[i])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.kmsg.start(&s.sides[sideKernel].log)
	select {
	case <-time.After(settleTime):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s, nil
}

// Plan returns the session's addressing.
func (s *Session) Plan() Plan { return s.plan }

// CheckTools reports the first missing tool of a session, as an error that
// says how to install it.
func CheckTools(cfg Config) error {
	if err := nettest.CheckRoot(); err != nil {
		return fmt.Errorf("difftest: %w", err)
	}
	tools := []string{"ethtool", "iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save"}
	if cfg.Family == ir.IPv6 {
		tools = append(tools, "ip6tables-legacy", "ip6tables-legacy-restore", "ip6tables-legacy-save")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("difftest: %s is required (scripts/deps.sh installs it): %w", t, err)
		}
	}
	if cfg.Conntrack {
		if _, err := exec.LookPath("conntrack"); err != nil {
			return fmt.Errorf("difftest: conntrack (conntrack-tools) is required for stateful runs: %w", err)
		}
	}
	if cfg.XFW == "" {
		return errors.New("difftest: no xfw binary given")
	}
	if _, err := os.Stat(cfg.XFW); err != nil {
		return fmt.Errorf("difftest: xfw binary: %w (run make build)", err)
	}
	return nil
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
		// README, "Known differences from iptables").
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
	// No global ICMP rate limit in fw (nettest turns the per-destination
	// one off): every error a probe causes must be sent, on both sides.
	// No IPv4 redirects either: their rate limit (per destination, with
	// backoff) depends on timing, so two runs would send different
	// numbers of them. (IPv6 has no such switch: the generator leaves
	// IPv6 hairpin forwarding out, see packetgen.go.) And no IPv4 path
	// MTU learning (ip_no_pmtu_disc 2: "fragmentation needed" errors do
	// not lower a route's MTU): a probe quoting fw's packet to gen with a
	// small MTU would make fw fragment, or refuse, its later big packets
	// to gen after the OUTPUT hook, where xfw's egress hook sees a first
	// fragment or nothing (README, "Known differences from iptables";
	// found by the stateful campaign, whose ICMP errors quote fw's own
	// earlier packets).
	err = nettest.InNamespace(fw, func() error {
		for _, kv := range [][2]string{{"net/ipv4/icmp_msgs_per_sec", "1000000000"}, {"net/ipv4/icmp_msgs_burst", "1000000000"},
			{"net/ipv4/ip_no_pmtu_disc", "2"},
			{"net/ipv4/conf/all/send_redirects", "0"}, {"net/ipv4/conf/default/send_redirects", "0"},
			{"net/ipv4/conf/" + nettest.FwInIfname + "/send_redirects", "0"}, {"net/ipv4/conf/" + nettest.FwOutIfname + "/send_redirects", "0"}} {
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
	for _, ns := range []string{tp.GenNS, tp.SinkNS} {
		// gen and sink receive fw's native XDP_TX frames (REJECT) at once
		// only when they run XDP themselves (captures see frames before
		// netfilter).
		if err := nettest.InNamespace(ns, func() error { return attachXDPPass(nettest.GenIfname) }); err != nil {
			return fmt.Errorf("%s: XDP pass program in %s: %w", sd.name, ns, err)
		}
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
	return s.startObservers(sd)
}

// halves returns the two prefixes one bit longer that make up n.
func halves(n netip.Prefix) [2]netip.Prefix {
	lo := netip.PrefixFrom(n.Masked().Addr(), n.Bits()+1)
	b := n.Masked().Addr().AsSlice()
	b[n.Bits()/8] |= 0x80 >> uint(n.Bits()%8)
	hi, _ := netip.AddrFromSlice(b)
	return [2]netip.Prefix{lo, netip.PrefixFrom(hi, n.Bits()+1)}
}

// attachXDPPass attaches "return XDP_PASS" (native mode) to ifname in the
// calling thread's namespace; the namespace's removal frees it.
func attachXDPPass(ifname string) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "xdt_xdp_pass",
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
	})
	if err != nil {
		return fmt.Errorf("load XDP pass program: %w", err)
	}
	defer prog.Close()
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("find %s: %w", ifname, err)
	}
	if err := netlink.LinkSetXdpFdWithFlags(l, prog.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
		return fmt.Errorf("attach XDP to %s: %w", ifname, err)
	}
	return nil
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
		af, proto := unix.AF_INET, unix.IPPROTO_RAW
		if s.cfg.Family == ir.IPv6 {
			af = unix.AF_INET6
		}
		// IPPROTO_RAW: the header is ours (IP_HDRINCL; IPv6 likewise).
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return fmt.Errorf("raw sending socket: %w", err)
		}
		sd.outFD = fd
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
			return unix.Sendto(sd.outFD, b, 0, &unix.SockaddrInet6{Addr: p.Dst.As16()})
		}
		return unix.Sendto(sd.outFD, b, 0, &unix.SockaddrInet4{Addr: p.Dst.As4()})
	}
}

// firewallCmd returns the command running what (-restore, -save) of this
// side's firewall.
func (s *Session) firewallCmd(sd *side, what string) []string {
	prefix := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prefix = "ip6tables"
	}
	if sd.kernel {
		return []string{prefix + "-legacy" + what}
	}
	argv := []string{s.cfg.XFW}
	if s.cfg.XDPMode != "" {
		argv = append(argv, "--xdp-mode", s.cfg.XDPMode)
	}
	return append(argv, prefix+what)
}

// ipsetCmd returns the command running ipset on this side: the kernel's,
// or xfw's.
func (s *Session) ipsetCmd(sd *side) []string {
	if sd.kernel {
		return []string{"ipset"}
	}
	return []string{s.cfg.XFW, "ipset"}
}

// emptyFilter is a filter table without rules, all policies ACCEPT.
const emptyFilter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"

// loadSets replaces a side's ipsets with the ones text carries (SetLines):
// the rules are emptied first (a set rules use cannot be destroyed), then
// every set flushed (emptying the list:sets) and destroyed, and the new
// ones restored.
func (s *Session) loadSets(sd *side, text string) error {
	lines := SetLines(text)
	if len(lines) == 0 && !sd.hasSets {
		return nil
	}
	if err := s.restoreRules(sd, emptyFilter); err != nil {
		return err
	}
	run := func(stdin string, args ...string) error {
		argv := append(s.ipsetCmd(sd), args...)
		res, err := nettest.ExecStdin(toolTimeout, sd.topo.FwNS, stdin, argv...)
		if err != nil {
			return fmt.Errorf("%s: exit %d: %s", strings.Join(argv, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		return nil
	}
	// Flush first: a list:set's members cannot be destroyed while it
	// holds them.
	if err := run("", "flush"); err != nil {
		return err
	}
	if err := run("", "destroy"); err != nil {
		return err
	}
	sd.hasSets = false
	if len(lines) == 0 {
		return nil
	}
	if err := run(strings.Join(lines, "\n")+"\n", "restore"); err != nil {
		return err
	}
	sd.hasSets = true
	return nil
}

// restore loads ruleset text into a side's fw, with the ipsets it carries.
func (s *Session) restore(sd *side, text string) error {
	if err := s.loadSets(sd, text); err != nil {
		return err
	}
	return s.restoreRules(sd, text)
}

// restoreRules loads ruleset text into a side's fw (xfw: with its last
// rules appended one by one when Config.AppendTail asks for it).
func (s *Session) restoreRules(sd *side, text string) error {
	var head, tail []string
	if !sd.kernel && s.cfg.AppendTail > 0 {
		var rest []string
		rest, head, tail = splitEnds(text, s.cfg.AppendTail)
		text = strings.Join(rest, "\n")
	}
	if err := s.restoreText(sd, text); err != nil {
		return err
	}
	prog := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prog = "ip6tables"
	}
	// The first rules are inserted at the head, last first; the last ones
	// appended twice, then the first copies deleted by specification (-D
	// removes the first match): the chains end as the ruleset says,
	// through in-place changes.
	var steps [][]string
	add := func(cmd string, lines []string) error {
		for _, line := range lines {
			words, err := iptables.Tokenize(line)
			if err != nil {
				return fmt.Errorf("split %q: %w", line, err)
			}
			if len(words) < 2 || words[0] != "-A" {
				return fmt.Errorf("line %q is no -A", line)
			}
			steps = append(steps, append([]string{cmd}, words[1:]...))
		}
		return nil
	}
	reversed := slices.Clone(head)
	slices.Reverse(reversed)
	// A rule that occurs twice in the ruleset (in iptables-save's form:
	// spellings differ) is appended once: -D could delete its twin.
	restCanon, canon := canonicalRules(s.cfg.Family, text, append(slices.Clone(head), tail...))
	seen := map[string]int{}
	for _, c := range append(restCanon, canon...) {
		for _, r := range c {
			seen[r]++
		}
	}
	var unique []string
	for i, l := range tail {
		if c := canon[len(head)+i]; len(c) > 0 && !slices.ContainsFunc(c, func(r string) bool { return seen[r] > 1 }) {
			unique = append(unique, l)
		}
	}
	for _, st := range []struct {
		cmd   string
		lines []string
	}{{"-I", reversed}, {"-A", tail}, {"-A", unique}, {"-D", unique}} {
		if err := add(st.cmd, st.lines); err != nil {
			return err
		}
	}
	for _, words := range steps {
		// XFW_TRACE tells whether the change was made in place.
		argv := append([]string{"env", "XFW_TRACE=1", s.cfg.XFW, prog, lockWait}, words...)
		res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
		if err != nil {
			return fmt.Errorf("%s %s: exit %d: %s", prog, strings.Join(words, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		s.appended++
		if strings.Contains(res.Stderr, "commit: append in place") || strings.Contains(res.Stderr, "commit: delete in place") || strings.Contains(res.Stderr, "commit: insert in place") {
			s.inPlace++
		}
	}
	return nil
}

// Appended returns how many `iptables -I`, `-A` and `-D` commands xfw ran
// (Config.AppendTail) and how many of them were done in place.
func (s *Session) Appended() (rules, inPlace int) { return s.appended, s.inPlace }

// splitEnds takes up to n of each base chain's first "-A" lines and up to
// n of its last ones (other lines) out of the filter table text, returning
// the rest, the first lines and the last lines, each in order. The first
// lines end before one naming several addresses: it stands for one rule
// per address, which -I would put in reverse order.
func splitEnds(text string, n int) (rest, head, tail []string) {
	lines := strings.Split(text, "\n")
	taken := map[int]int{} // line → 1 head, 2 tail
	for _, chain := range ir.BuiltinChains {
		var idx []int
		for i, l := range lines {
			if t := strings.TrimRight(l, " "); t == "-A "+chain || strings.HasPrefix(t, "-A "+chain+" ") {
				idx = append(idx, i)
			}
		}
		prefix := true // the head is a prefix of the chain
		for k, i := range idx {
			prefix = prefix && k < n && k < len(idx)/2 && !multiAddress(lines[i])
			switch {
			case prefix:
				taken[i] = 1
			case k >= len(idx)-n && k >= len(idx)/2:
				taken[i] = 2
			}
		}
	}
	for i, l := range lines {
		switch taken[i] {
		case 1:
			head = append(head, l)
		case 2:
			tail = append(tail, l)
		default:
			rest = append(rest, l)
		}
	}
	return rest, head, tail
}

// multiAddress reports a rule line naming several -s or -d addresses.
func multiAddress(line string) bool {
	words, err := iptables.Tokenize(line)
	if err != nil {
		return true
	}
	for i := 0; i+1 < len(words); i++ {
		switch words[i] {
		case "-s", "--source", "--src", "-d", "--destination", "--dst":
			if strings.Contains(words[i+1], ",") {
				return true
			}
		}
	}
	return false
}

// canonicalRules returns, for the rule lines of rest and for extra, each
// line's rules as iptables-save prints them (one per address pair); nil
// for a line that does not parse alone. rest supplies the chain
// declarations.
func canonicalRules(fam ir.Family, rest string, extra []string) (restRules, extraRules [][]string) {
	var decls []string
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			decls = append(decls, l)
		case strings.HasPrefix(l, "-A "):
			lines = append(lines, l)
		}
	}
	lines = append(lines, extra...)
	out := make([][]string, 0, len(lines))
	for _, l := range lines {
		text := "*filter\n" + strings.Join(decls, "\n") + "\n" + l + "\nCOMMIT\n"
		rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{Sets: SetLookup(text)})
		if err != nil {
			out = append(out, nil)
			continue
		}
		var rules []string
		for _, sl := range strings.Split(iptables.Save(rs, false), "\n") {
			if strings.HasPrefix(sl, "-A ") {
				rules = append(rules, sl)
			}
		}
		out = append(out, rules)
	}
	return out[:len(out)-len(extra)], out[len(out)-len(extra):]
}

// restoreText runs a side's restore command on ruleset text.
func (s *Session) restoreText(sd *side, text string) error {
	f, err := os.CreateTemp("", "xfw-difftest-*.rules")
	if err != nil {
		return fmt.Errorf("ruleset file: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("ruleset file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ruleset file: %w", err)
	}
	// Both take a host-wide lock (xtables', xfw's) other programs may hold
	// for a moment.
	argv := append(s.firewallCmd(sd, "-restore"), lockWait, f.Name())
	res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
	if err != nil {
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s: exit %d: %s", strings.Join(argv[:len(argv)-2], " "), res.ExitCode, msg)
	}
	return nil
}

// announceWait covers the multicast listener reports fw re-sends when
// xfw attaches its XDP programs (README, "Known differences from
// iptables"): a report and its retransmission, one unsolicited report
// interval (1 s for MLDv2) apart.
const announceWait = 1200 * time.Millisecond

// zero zeroes a side's counters (iptables -Z).
func (s *Session) zero(sd *side) error {
	prog := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prog = "ip6tables"
	}
	argv := []string{prog + "-legacy", "-w", "-Z"}
	if !sd.kernel {
		argv = []string{s.cfg.XFW, prog, "-w", "-Z"}
	}
	if res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...); err != nil {
		return fmt.Errorf("%s: zero counters: %v %s", sd.name, err, res.Stderr)
	}
	return nil
}

// save returns a side's iptables-save -c output.
func (s *Session) save(sd *side) (string, error) {
	argv := append(s.firewallCmd(sd, "-save"), "-c")
	if sd.kernel {
		argv = append(argv, "-t", "filter")
	}
	res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
	if err != nil {
		return "", fmt.Errorf("%s save: %w", sd.name, err)
	}
	return res.Stdout, nil
}

// flushConntrack empties a side's connection table: conntrack -F in the
// kernel's fw, xfw conntrack -F in xfw's (nothing to do while xfw tracks
// nothing: its tables exist only with a ruleset that needs them).
func (s *Session) flushConntrack(sd *side) error {
	argv := []string{"conntrack", "-F"}
	if !sd.kernel {
		argv = []string{s.cfg.XFW, "conntrack", "-F"}
	}
	res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
	if err != nil {
		if !sd.kernel && strings.Contains(res.Stderr, "not loaded") {
			return nil
		}
		return fmt.Errorf("%s: %s: exit %d: %s", sd.name, strings.Join(argv, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// logStartWait covers `xfw log`'s poll for a ring buffer to appear (once a
// second).
const logStartWait = 1500 * time.Millisecond

// startLog starts `xfw log` in the xfw side's fw, once xfw is loaded.
func (s *Session) startLog(sd *side) error {
	if sd.logCmd != nil {
		return nil
	}
	cmd := exec.Command("ip", "netns", "exec", sd.topo.FwNS, s.cfg.XFW, "log")
	// No Pdeathsig: it fires when the OS thread that started the child
	// exits, and Go ends threads that were locked into another namespace
	// (nettest.InNamespace): `xfw log` was then killed at random and LOG
	// lines went missing. The session ends it (Close).
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("xfw log: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start xfw log: %w", err)
	}
	sd.logCmd, sd.logDone = cmd, make(chan struct{})
	go func() {
		defer close(sd.logDone)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 4096), maxIPPacket)
		for sc.Scan() {
			sd.log.add(logEvent(sc.Text()))
		}
		_ = cmd.Wait()
		if stderr.Len() > 0 {
			s.cfg.Logf("xfw log: %s", strings.TrimSpace(stderr.String()))
		}
	}()
	time.Sleep(logStartWait)
	return nil
}

// logStopWait bounds how long `xfw log` may take to write what is left in
// the ring and exit.
const logStopWait = 5 * time.Second

// Close stops the observers, removes both topologies and restores what the
// session changed on the host. It may be called more than once.
func (s *Session) Close() error {
	var errs []error
	for _, sd := range s.sides {
		if sd == nil {
			continue
		}
		if sd.logCmd != nil && sd.logCmd.Process != nil {
			_ = sd.logCmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-sd.logDone:
			case <-time.After(logStopWait):
				_ = sd.logCmd.Process.Kill()
				<-sd.logDone
			}
			sd.logCmd = nil
		}
		for _, c := range sd.caps {
			c.Stop()
		}
		sd.caps = nil
		for _, r := range sd.raws {
			r.f.Close()
		}
		sd.raws = nil
		for _, fd := range []*int{&sd.genFD, &sd.sinkFD, &sd.outFD} {
			if *fd >= 0 {
				unix.Close(*fd)
				*fd = -1
			}
		}
		if sd.topo != nil {
			if err := sd.topo.Close(); err != nil {
				errs = append(errs, err)
			}
			sd.topo = nil
		}
	}
	if s.kmsg != nil {
		s.kmsg.close()
		s.kmsg = nil
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		if err := s.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.undo = nil
	return errors.Join(errs...)
}

// lockDir holds the session locks.
const lockDir = "/run"

// lockPoll is how often a waiting session retries a lock.
const lockPoll = 100 * time.Millisecond

// lockHost takes the lock of subnet x, waiting while ctx allows, and
// returns its release. Sessions with the same subnet would see each other's
// kernel LOG lines (the same addresses in every namespace): they take
// turns. Sessions of different subnets run side by side.
func lockHost(ctx context.Context, x uint8) (func() error, error) {
	path := fmt.Sprintf("%s/xfw-difftest-%d.lock", lockDir, x)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("difftest lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f.Close, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("difftest lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another difftest session (%s): %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// kmsgReader follows the kernel log.
type kmsgReader struct {
	f       *os.File
	mu      sync.Mutex
	overrun int
	started bool
	done    chan struct{}
}

// openKmsg opens /dev/kmsg after its last record.
func openKmsg() (*kmsgReader, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek /dev/kmsg: %w", err)
	}
	return &kmsgReader{f: os.NewFile(uintptr(fd), "/dev/kmsg"), done: make(chan struct{})}, nil
}

// kmsgRecordMax bounds one /dev/kmsg record.
const kmsgRecordMax = 8192

// start reads records in the background until close, adding LOG lines to
// log.
func (k *kmsgReader) start(log *eventLog) {
	k.started = true
	go k.run(log)
}

// run is start's loop.
func (k *kmsgReader) run(log *eventLog) {
	defer close(k.done)
	rc, err := k.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, kmsgRecordMax)
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err == nil {
			err = rerr
		}
		if errors.Is(err, unix.EPIPE) {
			// Records were overwritten before we read them.
			k.mu.Lock()
			k.overrun++
			k.mu.Unlock()
			continue
		}
		if err != nil {
			return
		}
		if text, ok := kmsgText(string(buf[:n])); ok && strings.Contains(text, "IN=") && strings.Contains(text, " OUT=") {
			log.add(logEvent(text))
		}
	}
}

// overruns returns how many times records were lost.
func (k *kmsgReader) overruns() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.overrun
}

// close stops the reader.
func (k *kmsgReader) close() {
	k.f.Close()
	if k.started {
		<-k.done
	}
}

// kmsgText returns the text of a record "prio,seq,usec,flags;text\n...",
// with its \xNN escapes undone.
func kmsgText(rec string) (string, bool) {
	_, body, ok := strings.Cut(rec, ";")
	if !ok {
		return "", false
	}
	text, _, _ := strings.Cut(body, "\n")
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' && i+3 < len(text) && text[i+1] == 'x' {
			if v, err := strconv.ParseUint(text[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(text[i])
	}
	return b.String(), true
}

// linkDrops returns the sum of the drop counters of the topology's four
// veth ends (queue overflows lose probes: a run with any is retried).
func linkDrops(tp *nettest.Topology) (uint64, error) {
	var total uint64
	for _, ep := range []nettest.Endpoint{tp.Gen, tp.FwIn, tp.FwOut, tp.Sink} {
		err := nettest.InNamespace(ep.NS, func() error {
			l, err := netlink.LinkByName(ep.Ifname)
			if err != nil {
				return err
			}
			if st := l.Attrs().Statistics; st != nil {
				total += st.TxDropped
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("statistics of %s in %s: %w", ep.Ifname, ep.NS, err)
		}
	}
	return total, nil
}

// softnetDrops returns the packets dropped because a CPU's backlog was
// full (/proc/net/softnet_stat, second column, summed over CPUs).
func softnetDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, fmt.Errorf("read softnet_stat: %w", err)
	}
	var total uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 16, 32)
		if err == nil {
			total += v
		}
	}
	return total, nil
}

// addrOf returns the source and destination of a probe's first frame.
func (p Probe) addrs() (src, dst netip.Addr) {
	if len(p.Frames) == 0 {
		return
	}
	pkt := p.decode(p.Frames[0])
	if pkt == nil || pkt.IPVersion == 0 {
		return
	}
	return pkt.Src, pkt.Dst
}
