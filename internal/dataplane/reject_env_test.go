package dataplane

// Helpers of reject_test.go: two identical topologies (internal/testkit/nettest),
// one filtered by xfw and one by the kernel's own iptables-legacy, the
// REJECT rules loaded into both, and a "signature" of a reply packet that
// can be compared between them.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

const (
	// rjReplyWait bounds the wait for a reply that should come.
	rjReplyWait = 2 * time.Second
	// rjSilenceWait is how long no reply must come to count as "none".
	rjSilenceWait = 500 * time.Millisecond
	// rjQuickRefusal bounds how long a refused connection may take: a
	// REJECT answers at once, a DROP would make it time out.
	rjQuickRefusal = time.Second
	// rjNamespaceBase starts the names of the test's namespaces.
	rjNamespaceBase = "xrj"
)

// rjEnv is one gen <-> fw <-> sink topology whose fw filters with either
// xfw (kernel false) or iptables-legacy (kernel true).
type rjEnv struct {
	name   string
	kernel bool
	topo   *nettest.Topology
}

// rjRule is a REJECT rule, given to both xfw and iptables-legacy.
type rjRule struct {
	chain string
	// proto is the -p protocol number (0: any).
	proto uint8
	// dport is --dport of tcp or udp (0: none).
	dport uint16
	// icmpType is --icmp-type / --icmpv6-type (-1: none).
	icmpType int
	// src and dst are -s and -d as host addresses (invalid: none).
	src, dst netip.Addr
	// frag is -f (IPv4: second and later fragments).
	frag bool
	// with is --reject-with.
	with string
}

// args returns the rule as iptables arguments after "-A".
func (r rjRule) args(fam ir.Family) []string {
	a := []string{r.chain}
	if r.src.IsValid() {
		a = append(a, "-s", r.src.String())
	}
	if r.dst.IsValid() {
		a = append(a, "-d", r.dst.String())
	}
	if r.proto != 0 {
		a = append(a, "-p", strconv.Itoa(int(r.proto)))
	}
	if r.frag {
		a = append(a, "-f")
	}
	if r.dport != 0 {
		name := "tcp"
		if r.proto == nettest.ProtoUDP {
			name = "udp"
		}
		a = append(a, "-m", name, "--dport", strconv.Itoa(int(r.dport)))
	}
	if r.icmpType >= 0 {
		if fam == ir.IPv6 {
			a = append(a, "-m", "icmp6", "--icmpv6-type", strconv.Itoa(r.icmpType))
		} else {
			a = append(a, "-m", "icmp", "--icmp-type", strconv.Itoa(r.icmpType))
		}
	}
	return append(a, "-j", "REJECT", "--reject-with", r.with)
}

// irRule returns the rule in xfw's IR.
func (r rjRule) irRule(fam ir.Family) *ir.Rule {
	rule := &ir.Rule{Target: ir.Target{Kind: ir.TargetReject, RejectWith: r.with}}
	host := func(a netip.Addr) ir.AddrMatch {
		ones := make([]byte, a.BitLen()/8)
		for i := range ones {
			ones[i] = 0xff
		}
		m, _ := netip.AddrFromSlice(ones)
		return ir.AddrMatch{Set: true, Addr: a, Mask: m}
	}
	if r.src.IsValid() {
		rule.Src = host(r.src)
	}
	if r.dst.IsValid() {
		rule.Dst = host(r.dst)
	}
	if r.proto != 0 {
		rule.Proto = ir.ProtoMatch{Set: true, Num: r.proto, Spelling: strconv.Itoa(int(r.proto))}
	}
	if r.frag {
		rule.Fragment = ir.FlagMatch{Set: true}
	}
	if r.dport != 0 {
		pm := ir.PortMatch{Set: true, Range: ir.PortRange{First: r.dport, Last: r.dport}}
		if r.proto == nettest.ProtoUDP {
			rule.Matches = append(rule.Matches, &ir.UDPMatch{DstPort: pm})
		} else {
			rule.Matches = append(rule.Matches, &ir.TCPMatch{DstPort: pm})
		}
	}
	if r.icmpType >= 0 {
		rule.Matches = append(rule.Matches, &ir.ICMPMatch{V6: fam == ir.IPv6, Type: uint8(r.icmpType), CodeMax: 255})
	}
	return rule
}

// newRjEnv builds a topology. gen and sink run no XDP program, as a
// container's end of a veth does not: xfw's replies must reach them all
// the same (bpf/reject_send.h). In the kernel's topology fw's interfaces
// compute checksums in software (tx-checksumming off), so its replies
// carry complete checksums, as on a wire, rather than CHECKSUM_PARTIAL
// ones veth never completes. xfw's keep the default (on): a reply built in
// a CHECKSUM_PARTIAL skb (gen's own stack sent the offending packet) keeps
// its stale offload offsets, which a device completing checksums itself
// would apply to the reply (docs/differences.md).
func newRjEnv(t *testing.T, name string, kernel bool) *rjEnv {
	t.Helper()
	topo := nettest.New(t, nettest.WithBase(rjNamespaceBase), nettest.WithStaticNeighbors())
	if kernel {
		for _, ifname := range []string{nettest.FwInIfname, nettest.FwOutIfname, "lo"} {
			nettest.MustExec(t, topo.FwNS, "ethtool", "-K", ifname, "tx", "off")
		}
	}
	return &rjEnv{name: name, kernel: kernel, topo: topo}
}

// load installs the rules: with iptables-legacy / ip6tables-legacy in a
// kernel topology, else as xfw rulesets (one Apply per family) inside fw.
func (e *rjEnv) load(t *testing.T, rules map[ir.Family][]rjRule, mode XDPMode) {
	t.Helper()
	if e.kernel {
		for fam, rs := range rules {
			prog := "iptables-legacy"
			if fam == ir.IPv6 {
				prog = "ip6tables-legacy"
			}
			for _, r := range rs {
				nettest.MustExec(t, e.topo.FwNS, append([]string{prog, "-A"}, r.args(fam)...)...)
			}
		}
		return
	}
	err := nettest.InNamespace(e.topo.FwNS, func() error {
		for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
			rs := ir.NewRuleset(fam)
			for _, r := range rules[fam] {
				c := rs.Chain(r.chain)
				c.Rules = append(c.Rules, r.irRule(fam))
			}
			ifs, err := CompilerInterfaces()
			if err != nil {
				return err
			}
			g, err := compiler.Compile(rs, compiler.Options{Interfaces: ifs})
			if err != nil {
				return fmt.Errorf("compile %s: %w", fam, err)
			}
			srcs := make([]CounterSource, g.NumCounters())
			for i := range srcs {
				srcs[i].From = -1
			}
			if err := Apply(fam, &Update{Gen: g, Saved: []byte("reject test\n"), Counters: srcs}, AttachOptions{Mode: mode}); err != nil {
				return fmt.Errorf("apply %s: %w", fam, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", e.name, err)
	}
}

// rjSaveCounter matches a rule line of iptables-save -c.
var rjSaveCounter = regexp.MustCompile(`^\[(\d+):\d+\] -A `)

// hits returns how many packets the topology's REJECT rules (all its
// rules) have matched: xfw's rule counters, or iptables-legacy's.
func (e *rjEnv) hits(t *testing.T) uint64 {
	t.Helper()
	var n uint64
	if e.kernel {
		for _, prog := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
			for _, line := range strings.Split(nettest.MustExec(t, e.topo.FwNS, prog, "-c"), "\n") {
				if m := rjSaveCounter.FindStringSubmatch(line); m != nil {
					v, _ := strconv.ParseUint(m[1], 10, 64)
					n += v
				}
			}
		}
		return n
	}
	err := nettest.InNamespace(e.topo.FwNS, func() error {
		for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
			cs, err := Counters(fam)
			if err != nil {
				return err
			}
			// Indexes below NumChains are the chain policies.
			for i := compiler.NumChains; i < len(cs); i++ {
				n += cs[i].Packets
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: counters: %v", e.name, err)
	}
	return n
}

// role names an address or MAC of the topology, so that replies of two
// topologies (with different subnets) compare.
func (e *rjEnv) role(a netip.Addr) string {
	tp := e.topo
	for _, ep := range []struct {
		name string
		ep   nettest.Endpoint
	}{{"gen", tp.Gen}, {"fw-in", tp.FwIn}, {"fw-out", tp.FwOut}, {"sink", tp.Sink}} {
		switch a {
		case ep.ep.IPv4, ep.ep.IPv6:
			return ep.name
		case ep.ep.LinkLocal:
			return ep.name + "-ll"
		}
	}
	return a.String()
}

func (e *rjEnv) macRole(m []byte) string {
	tp := e.topo
	for _, ep := range []struct {
		name string
		ep   nettest.Endpoint
	}{{"gen", tp.Gen}, {"fw-in", tp.FwIn}, {"fw-out", tp.FwOut}, {"sink", tp.Sink}} {
		if string(m) == string(ep.ep.MAC) {
			return ep.name
		}
	}
	return fmt.Sprintf("%x", m)
}

// addrs returns the addresses of an endpoint for a family.
func rjAddr(ep nettest.Endpoint, fam ir.Family) netip.Addr {
	if fam == ir.IPv6 {
		return ep.IPv6
	}
	return ep.IPv4
}

// rawSend sends an IP packet, header included, from namespace ns through a
// raw socket: it goes through the OUTPUT path as locally generated.
func rawSend(ns string, pkt []byte) error {
	return nettest.InNamespace(ns, func() error {
		var (
			fd  int
			err error
			sa  unix.Sockaddr
		)
		if pkt[0]>>4 == 4 {
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			sa = &unix.SockaddrInet4{Addr: [4]byte(pkt[16:20])}
		} else {
			// IPPROTO_RAW implies IPV6_HDRINCL.
			fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			sa = &unix.SockaddrInet6{Addr: [16]byte(pkt[24:40])}
		}
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, pkt, 0, sa)
	})
}

// csumOK reports whether the one's complement sum of b (with an optional
// pseudo-header sum) is all ones, i.e. the checksum in b is right.
func csumOK(pseudo uint32, b []byte) bool {
	sum := pseudo
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// pseudoSum is the transport pseudo-header sum of an IP packet (ip) for
// protocol proto and length n.
func pseudoSum(ip []byte, proto uint8, n int) uint32 {
	var sum uint32
	addrs := ip[12:20]
	if ip[0]>>4 == 6 {
		addrs = ip[8:40]
	}
	for i := 0; i < len(addrs); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(addrs[i:]))
	}
	return sum + uint32(proto) + uint32(n>>16) + uint32(n&0xffff)
}

// l3 returns the IP packet of a captured frame (after Ethernet and tags).
func rjL3(p *nettest.Packet) []byte {
	off := 14 + 4*len(p.VLANs)
	if len(p.Raw) < off {
		return nil
	}
	return p.Raw[off:]
}

// rjSig describes a reply for comparison: a map of named facts.
type rjSig map[string]string

func (s rjSig) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, s[k])
	}
	return b.String()
}

// signature describes reply r, an answer to the offending IP packet orig
// (nil when unknown: a socket's segment). withMACs adds the Ethernet
// addresses.
func (e *rjEnv) signature(r *nettest.Packet, orig []byte, withMACs bool) rjSig {
	s := rjSig{}
	ip := rjL3(r)
	if withMACs {
		s["mac"] = e.macRole(r.SrcMAC) + ">" + e.macRole(r.DstMAC)
		s["vlan"] = fmt.Sprint(r.VLANs)
	}
	s["addr"] = e.role(r.Src) + ">" + e.role(r.Dst)
	s["ttl"] = strconv.Itoa(int(r.TTL))
	var l4 []byte
	if r.IPVersion == 4 {
		hl := int(ip[0]&0xf) * 4
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		s["ihl"] = strconv.Itoa(hl)
		s["len"] = strconv.Itoa(tot)
		s["tos"] = fmt.Sprintf("%#02x", ip[1])
		s["df"] = strconv.FormatBool(r.DontFragment)
		if r.Protocol == nettest.ProtoTCP {
			// nf_reject_iphdr_put: ID 0. (ICMP errors get a fresh,
			// unpredictable one.)
			s["id-zero"] = strconv.FormatBool(r.IPv4ID == 0)
		}
		s["ipcsum"] = strconv.FormatBool(csumOK(0, ip[:hl]))
		if tot <= len(ip) {
			l4 = ip[hl:tot]
		}
	} else {
		v := binary.BigEndian.Uint32(ip)
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		s["len"] = strconv.Itoa(40 + plen)
		s["tclass"] = fmt.Sprintf("%#02x", v>>20&0xff)
		s["flowlabel-zero"] = strconv.FormatBool(v&0xfffff == 0)
		s["ext"] = fmt.Sprint(r.ExtHeaders)
		if 40+plen <= len(ip) {
			l4 = ip[40 : 40+plen]
		}
	}
	// Bytes after the IP packet (Ethernet padding).
	if r.IPVersion == 4 {
		s["frame-extra"] = strconv.Itoa(len(ip) - int(binary.BigEndian.Uint16(ip[2:])))
	} else {
		s["frame-extra"] = strconv.Itoa(len(ip) - 40 - int(binary.BigEndian.Uint16(ip[4:])))
	}
	switch {
	case r.Protocol == nettest.ProtoTCP:
		s["ports"] = fmt.Sprintf("%d>%d", r.SrcPort, r.DstPort)
		s["flags"] = fmt.Sprintf("%#x", r.TCPFlags)
		s["doff"] = strconv.Itoa(int(l4[12] >> 4))
		s["win"] = strconv.Itoa(int(binary.BigEndian.Uint16(l4[14:])))
		s["urg"] = strconv.Itoa(int(binary.BigEndian.Uint16(l4[18:])))
		s["l4csum"] = strconv.FormatBool(csumOK(pseudoSum(ip, nettest.ProtoTCP, len(l4)), l4))
		s["payload"] = strconv.Itoa(len(r.Payload))
		s["seq"], s["ack"] = strconv.FormatUint(uint64(r.Seq), 10), strconv.FormatUint(uint64(r.Ack), 10)
		if orig == nil {
			// Unknown initial sequence numbers: keep what the rules fix.
			s["seq"] = strconv.FormatBool(r.Seq == 0)
			s["ack"] = strconv.FormatBool(r.Ack == 0)
		}
	case r.Protocol == nettest.ProtoICMP || r.Protocol == nettest.ProtoICMPv6:
		s["icmp"] = fmt.Sprintf("%d/%d rest %#x", r.ICMPType, r.ICMPCode, r.ICMPRest)
		if r.Protocol == nettest.ProtoICMP {
			s["l4csum"] = strconv.FormatBool(csumOK(0, l4))
		} else {
			s["l4csum"] = strconv.FormatBool(csumOK(pseudoSum(ip, nettest.ProtoICMPv6, len(l4)), l4))
		}
		q := r.Payload
		s["quote-len"] = strconv.Itoa(len(q))
		if r.Inner != nil {
			s["quote-ttl"] = strconv.Itoa(int(r.Inner.TTL))
			s["quote-addr"] = e.role(r.Inner.Src) + ">" + e.role(r.Inner.Dst)
			s["quote-ports"] = fmt.Sprintf("%d>%d", r.Inner.SrcPort, r.Inner.DstPort)
			if r.Inner.IPVersion == 4 && len(q) >= 20 {
				s["quote-ipcsum"] = strconv.FormatBool(csumOK(0, q[:int(q[0]&0xf)*4]))
			}
		}
		if orig != nil {
			s["quote-is-prefix"] = strconv.FormatBool(rjQuoteMatches(q, orig))
			s["quote-ttl-delta"] = strconv.Itoa(int(rjTTL(orig)) - int(rjTTL(q)))
		}
	default:
		s["proto"] = strconv.Itoa(int(r.Protocol))
	}
	return s
}

// rjTTL returns the TTL / hop limit of an IP packet.
func rjTTL(ip []byte) uint8 {
	if len(ip) < 20 {
		return 0
	}
	if ip[0]>>4 == 6 {
		return ip[7]
	}
	return ip[8]
}

// rjQuoteMatches reports whether quote is a prefix of orig, ignoring the
// TTL / hop limit and the IPv4 header checksum (FORWARD quotes the packet
// after the decrement).
func rjQuoteMatches(quote, orig []byte) bool {
	if len(quote) > len(orig) || len(quote) < 20 {
		return false
	}
	a := append([]byte(nil), quote...)
	b := append([]byte(nil), orig[:len(quote)]...)
	if a[0]>>4 == 6 {
		a[7], b[7] = 0, 0
	} else {
		a[8], b[8] = 0, 0
		a[10], a[11], b[10], b[11] = 0, 0, 0, 0
	}
	return string(a) == string(b)
}

// rjCapture starts recording the frames arriving (not leaving) on ifname
// in ns.
func rjCapture(t *testing.T, ns, ifname string) *nettest.Capture {
	t.Helper()
	return nettest.StartCapture(t, ns, ifname, func(c nettest.Captured) bool {
		return !c.Outgoing && c.Packet != nil && c.IPVersion != 0
	})
}

// rjAnswers reports whether captured packet r is a REJECT reply about the
// IP packet orig: a RST for its ports or an ICMP error quoting its ports
// (or its ICMP echo identifier).
func rjAnswers(r *nettest.Packet, orig *nettest.Packet) bool {
	switch {
	case r.IsTCPReset():
		return orig.Protocol == nettest.ProtoTCP && r.SrcPort == orig.DstPort && r.DstPort == orig.SrcPort
	case r.IsICMPError() && r.Inner != nil:
		in := r.Inner
		if in.Protocol != orig.Protocol || in.Src != orig.Src || in.Dst != orig.Dst {
			return false
		}
		switch orig.Protocol {
		case nettest.ProtoTCP, nettest.ProtoUDP:
			if orig.Fragment && orig.FragOffset != 0 {
				return in.FragID == orig.FragID
			}
			return in.SrcPort == orig.SrcPort && in.DstPort == orig.DstPort
		}
		return in.ICMPType == orig.ICMPType && in.ICMPRest == orig.ICMPRest
	}
	return false
}

// rjSigDiff lists the facts on which two signatures differ.
func rjSigDiff(a, b rjSig) []string {
	var out []string
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s: %q vs %q", k, a[k], b[k]))
		}
	}
	return out
}
