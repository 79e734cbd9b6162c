package difftest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file decides which differences are the documented ones of
// fragments under connection tracking (docs/differences.md, "Connection
// tracking"), and nothing else. When a rule of the family makes the
// kernel track connections, it reassembles fragments before any chain
// (nf_defrag_ipv4, nf_defrag_ipv6, in PREROUTING and OUTPUT); xfw cannot,
// and judges a datagram by its first fragment. A case whose first run
// differs is run again without its fragmented probes (the held ones), and
// is KNOWN only when that run shows nothing but the probe differences the
// first showed too (KNOWN ones included) and each held probe's difference
// is one of these:
//
//   - a lone first fragment (no later fragment follows it): the kernel
//     holds it in its reassembly queue until it times out, so no chain,
//     socket or device of the kernel's side sees anything of it; xfw
//     judges it as it comes. The probe's difference must be exactly that:
//     nothing at all on the kernel's side;
//   - a datagram whose first fragment cuts its transport header short
//     (a TCP header, options included, an UDP or ICMP header split across
//     fragments): the kernel's rules see the reassembled header, xfw's the
//     cut one (which a match or a target may refuse), so the datagram's
//     fate may differ in any way.
//
//   - an IPv6 packet whose fragment header is cut short: the kernel's
//     reassembly drops it before any chain (nf_ct_frag6_gather cannot
//     pull the header), so its side shows nothing of it; xfw judges it;
//   - an IPv6 atomic fragment (offset 0, no more fragments): the kernel
//     removes its fragment header before any chain, so everything it
//     sends on, answers or logs lacks it;
//   - any other fragmented datagram: what the kernel hands to fw's own
//     stack, REJECTs, answers and logs is the reassembled datagram (IPv6:
//     without its fragment header, so no raw socket of protocol 44 sees
//     it), xfw's each fragment (REJECT and LOG the first one), so those
//     may differ: replies, fw's sockets' deliveries and LOG lines; the
//     copies it forwards (or sends) to gen and sink must not.
//
// What the run without the fragmented probes no longer shows of the
// counters is theirs: the
// kernel counts a datagram once with its reassembled length, xfw its
// first fragment's length (and, for fragments fw's raw socket writes
// whole, each fragment: the kernel reassembles those in OUTPUT too).
// Another probe's difference that the run without them does not show
// again is not excused.

// reassemblyRe matches the rules whose checkentry makes the kernel track
// the family's connections (nf_ct_netns_get, which enables nf_defrag):
// the conntrack, state, connmark and connlimit matches, the CONNMARK
// target and the NAT targets. (CT without --notrack does too; it is left
// out, so that a ruleset relying on it alone is not excused.) A rule may
// carry its counters first, as iptables-save -c writes it.
var reassemblyRe = regexp.MustCompile(`(?m)^(?:\[\d+:\d+\]\s+)?-A\s.*(?:(?:-m|--match) (?:conntrack|state|connmark|connlimit)|(?:-j|--jump) (?:CONNMARK|SNAT|DNAT|MASQUERADE|REDIRECT|NETMAP))\b`)

// kernelReassembles reports whether the kernel reassembles the fragments
// of ruleset's family before its chains: some rule makes it track.
func kernelReassembles(ruleset string) bool { return reassemblyRe.MatchString(ruleset) }

// fragClass is how a probe's fragments meet the kernel's reassembly.
type fragClass int

const (
	// fragNone: not one of the documented classes.
	fragNone fragClass = iota
	// fragLoneFirst: a lone first fragment, held by the kernel.
	fragLoneFirst
	// fragSplitHeader: a datagram whose first fragment cuts its
	// transport header short.
	fragSplitHeader
	// fragAtomic: an IPv6 atomic fragment (offset 0, no more), whose
	// fragment header the kernel removes.
	fragAtomic
	// fragOther: any other fragmented probe (the kernel reassembles it
	// before fw's stack, REJECT and LOG see it).
	fragOther
	// fragCutShort: an IPv6 packet whose fragment header is cut short,
	// which the kernel's reassembly drops before any chain.
	fragCutShort
	// heldStackReply: fw's own IPv6 packet to itself from a link-local
	// source it does not hold: what its stack answers is counted by the
	// kernel's OUTPUT and never reaches a device, where xfw judges
	// OUTPUT (docs/differences.md, "OUTPUT"). No probe difference of
	// its is excused, only OUTPUT's counters higher in the kernel.
	heldStackReply
)

// fragment is what the fragment header (IPv4: the header's fields) says
// of a packet: its offset, whether more follow, where its payload starts
// and its protocol (the transport's, for IPv6 past the fragment header).
type fragment struct {
	offset  int
	more    bool
	payload []byte
	proto   uint8
}

// ipFragment returns the fragment fields of an IP packet b, or false when
// it is no fragment (IPv6 atomic fragments included: the kernel removes
// their header and lets them pass).
func ipFragment(b []byte) (fragment, bool) {
	if len(b) < 1 {
		return fragment{}, false
	}
	switch b[0] >> 4 {
	case 4:
		hl := int(b[0]&0xf) * 4
		if len(b) < ipv4HeaderLen || hl < ipv4HeaderLen || len(b) < hl {
			return fragment{}, false
		}
		fo := binary.BigEndian.Uint16(b[6:])
		f := fragment{offset: int(fo&0x1fff) * 8, more: fo&0x2000 != 0, proto: b[9]}
		end := min(len(b), int(binary.BigEndian.Uint16(b[2:])))
		if end < hl {
			return fragment{}, false
		}
		f.payload = b[hl:end]
		return f, f.more || f.offset > 0
	case 6:
		return ipv6Fragment(b)
	}
	return fragment{}, false
}

// ipv6FragmentCut reports whether IPv6 packet b's extension headers lead
// to a fragment header that is cut short.
func ipv6FragmentCut(b []byte) bool {
	if len(b) < ipv6HeaderLen || b[0]>>4 != 6 {
		return false
	}
	nh, off := b[6], ipv6HeaderLen
	for i := 0; i < 8 && off < len(b); i++ {
		switch {
		case nh == nettest.ProtoFragment:
			return off+8 > len(b)
		case off+8 > len(b):
			return false
		case nh == nettest.ProtoHopByHop || nh == nettest.ProtoRouting || nh == nettest.ProtoDestOpts:
			nh, off = b[off], off+(int(b[off+1])+1)*8
		case nh == nettest.ProtoAH:
			nh, off = b[off], off+(int(b[off+1])+2)*4
		default:
			return false
		}
	}
	return nh == nettest.ProtoFragment && off >= len(b)
}

// ipv6FragmentHeader returns the fragment fields of IPv6 packet b and
// whether it has a fragment header at all (an atomic fragment too).
func ipv6FragmentHeader(b []byte) (fragment, bool) {
	f, _ := ipv6Fragment(b)
	return f, f.payload != nil
}

// ipv6Fragment walks b's extension headers to its fragment header.
func ipv6Fragment(b []byte) (fragment, bool) {
	if len(b) < ipv6HeaderLen {
		return fragment{}, false
	}
	nh, off := b[6], ipv6HeaderLen
	for i := 0; i < 8 && off+8 <= len(b); i++ {
		switch nh {
		case nettest.ProtoHopByHop, nettest.ProtoRouting, nettest.ProtoDestOpts:
			nh, off = b[off], off+(int(b[off+1])+1)*8
		case nettest.ProtoAH:
			nh, off = b[off], off+(int(b[off+1])+2)*4
		case nettest.ProtoFragment:
			fo := binary.BigEndian.Uint16(b[off+2:])
			f := fragment{offset: int(fo &^ 7), more: fo&1 != 0, proto: b[off], payload: b[off+8:]}
			return f, f.more || f.offset > 0
		default:
			return fragment{}, false
		}
	}
	return fragment{}, false
}

// transportHeaderLen is the length of the transport header the kernel's
// matches and targets read whole at the start of b (TCP with its
// options), or 0 for a protocol whose header no rule needs whole.
func transportHeaderLen(proto uint8, b []byte) int {
	switch proto {
	case nettest.ProtoTCP:
		if len(b) < 13 {
			return 20
		}
		return max(20, int(b[12]>>4)*4)
	case nettest.ProtoUDP, nettest.ProtoICMP, nettest.ProtoICMPv6:
		return 8
	}
	return 0
}

// probeFragClass returns the documented class of probe p's fragments.
func probeFragClass(p Probe) fragClass {
	if len(p.Frames) == 0 || p.Answer || !isFragmented(p) {
		return fragNone
	}
	pkt := func(f []byte) []byte {
		if p.From == FromFw {
			return f
		}
		l3 := l3Offset(f)
		if l3 < 0 {
			return nil
		}
		return f[l3:]
	}
	if len(p.Frames) == 1 && ipv6FragmentCut(pkt(p.Frames[0])) {
		return fragCutShort
	}
	first, ok := ipFragment(pkt(p.Frames[0]))
	if !ok && len(p.Frames) == 1 && isFragmented(p) {
		if b := pkt(p.Frames[0]); len(b) > 0 && b[0]>>4 == 6 {
			if _, hasFrag := ipv6FragmentHeader(b); hasFrag {
				return fragAtomic
			}
		}
	}
	if !ok || first.offset != 0 || !first.more {
		return fragOther
	}
	if len(p.Frames) == 1 {
		return fragLoneFirst
	}
	if n := transportHeaderLen(first.proto, first.payload); n > 0 && len(first.payload) < n {
		return fragSplitHeader
	}
	return fragOther
}

// heldFragments returns the fragmented probes of c, which the kernel
// reassembles, with their class; none when ruleset makes the kernel
// reassemble nothing.
func heldFragments(ruleset string, c *Corpus) map[int]fragClass {
	if c == nil || !kernelReassembles(ruleset) {
		return nil
	}
	held := map[int]fragClass{}
	for i, p := range c.Probes {
		if isFragmented(p) {
			held[i] = probeFragClass(p)
		}
	}
	return held
}

// heldProbes returns the probes of c the tester runs the case again
// without when it differs: the fragmented ones when ruleset makes the
// kernel reassemble (heldFragments), and fw's own IPv6 packets to itself
// from link-local sources it does not hold (heldStackReply).
func heldProbes(ruleset string, c *Corpus, plan Plan) map[int]fragClass {
	held := heldFragments(ruleset, c)
	if c == nil || plan.Family != ir.IPv6 {
		return held
	}
	for i, p := range c.Probes {
		if _, ok := held[i]; !ok && ownLinkLocalToSelf(p, plan) {
			if held == nil {
				held = map[int]fragClass{}
			}
			held[i] = heldStackReply
		}
	}
	return held
}

// ownLinkLocalToSelf reports whether p is fw's own IPv6 packet to one of
// its addresses from a link-local source it does not hold (its stack's
// answer goes nowhere: the documented OUTPUT limit).
func ownLinkLocalToSelf(p Probe, plan Plan) bool {
	if p.From != FromFw || len(p.Frames) == 0 {
		return false
	}
	b := p.Frames[0]
	if len(b) < ipv6HeaderLen || b[0]>>4 != 6 {
		return false
	}
	src, dst := netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	return src.IsLinkLocalUnicast() && !plan.isLocal(src) && plan.isLocal(dst) && !dst.IsMulticast()
}

// fragmentWhy explains a probe difference d of a probe of class cl, or
// returns "" when d is not the documented one.
func fragmentWhy(d Difference, cl fragClass) string {
	switch cl {
	case fragLoneFirst:
		if len(d.Kernel) == 0 {
			return "a lone first fragment the kernel holds for reassembly (connection tracking), judged by xfw as it came"
		}
	case fragSplitHeader:
		return "a datagram whose first fragment cuts its transport header short: the kernel's rules see it reassembled (connection tracking), xfw's the first fragment"
	case fragCutShort:
		if len(d.Kernel) == 0 {
			return "an IPv6 packet whose fragment header is cut short, which the kernel's reassembly drops before any chain (connection tracking)"
		}
	case fragAtomic:
		return "an IPv6 atomic fragment, whose fragment header the kernel's reassembly removes (connection tracking)"
	case fragOther:
		kOnly, xOnly := oneSided(d.Kernel, d.XFW)
		kOnly, xOnly = oneSided(withoutDF(kOnly), withoutDF(xOnly))
		for _, o := range append(kOnly, xOnly...) {
			if forwardedCopy(o) {
				return ""
			}
		}
		return "a fragmented datagram the kernel reassembles (connection tracking): fw's stack, REJECT and LOG see it whole, xfw's each fragment; forwarded the same but for the DF bit"
	}
	return ""
}

// forwardedCopyRe matches an observation of the probe itself arriving at
// gen or sink (forwarded, or sent by fw).
var forwardedCopyRe = regexp.MustCompile(`^at (gen|sink): the probe\b`)

// forwardedCopy reports whether obs is a copy of the probe at gen or sink.
func forwardedCopy(obs string) bool { return forwardedCopyRe.MatchString(obs) }

// withoutProbes returns c without the probes in drop, and for each probe
// of the result its index in c.
func withoutProbes(c *Corpus, drop map[int]fragClass) (*Corpus, []int) {
	out := &Corpus{}
	var index []int
	for i, p := range c.Probes {
		if _, ok := drop[i]; !ok {
			out.Probes = append(out.Probes, p)
			index = append(index, i)
		}
	}
	return out, index
}

// explainFragments checks the outcome inner of the case without the held
// probes against the first run's differences diffs: every probe
// difference of diffs must be a held probe's documented one, or one the
// inner run shows again (index maps inner probes to the case's); the
// inner run must show nothing but such probe differences and, when it
// differs at all, be KNOWN itself. It returns the explanations of the
// held probes' differences and of the counters they alone explain, or
// ok false (then the first difference none explains, if any, is in
// unexplained).
func explainFragments(diffs []Difference, held map[int]fragClass, inner *Outcome, index []int, outputSide map[string]bool) (why []string, ok bool) {
	why, bad := explainFragmentsWhy(diffs, held, inner, index, outputSide)
	return why, bad == nil && why != nil
}

// unexplainedFragmentDiff returns the first difference of diffs that
// explainFragments does not explain, or nil.
func unexplainedFragmentDiff(diffs []Difference, held map[int]fragClass, inner *Outcome, index []int, outputSide map[string]bool) *Difference {
	_, bad := explainFragmentsWhy(diffs, held, inner, index, outputSide)
	return bad
}

// explainFragmentsWhy is explainFragments, with the first difference it
// cannot explain (nil: all, or the inner run is not comparable).
// A counter is explained when only heldStackReply probes were held and it
// is of a chain outputSide holds (those OUTPUT reaches), higher in the
// kernel.
func explainFragmentsWhy(diffs []Difference, held map[int]fragClass, inner *Outcome, index []int, outputSide map[string]bool) (why []string, bad *Difference) {
	fragments := false
	for _, cl := range held {
		fragments = fragments || cl != heldStackReply
	}
	if inner.Result.Lossy != "" || inner.Result.Rejected != "" || inner.Failed() && !inner.OnlyKnown() {
		return nil, nil
	}
	again, counted := map[int]bool{}, map[string]bool{}
	for _, d := range inner.Result.Differences {
		switch d.Kind {
		case DiffProbe:
			again[index[d.Probe]] = true
		case DiffCounters:
			counted[d.Subject] = true
		}
	}
	for _, d := range diffs {
		switch {
		case d.Kind == DiffProbe && again[d.Probe], d.Kind == DiffCounters && counted[d.Subject]:
			// The run without the held probes shows it again, KNOWN.
		case d.Kind == DiffProbe:
			w := fragmentWhy(d, held[d.Probe])
			if w == "" {
				return nil, &d
			}
			why = append(why, w)
		case d.Kind == DiffCounters && fragments:
			// Counters the run without the held probes agrees on
			// (or explains as KNOWN) were theirs.
			why = append(why, fmt.Sprintf("counters of %s: the held fragments' (the same without them)", d.Subject))
		case d.Kind == DiffCounters:
			if !outputSide[subjectChain(d.Subject)] || !kernelCountsMore(d) {
				return nil, &d
			}
			why = append(why, fmt.Sprintf("counters of %s: fw's stack's answers to its own packets from link-local sources it does not hold, counted in the kernel's OUTPUT, never reaching a device (the same without them)", d.Subject))
		default:
			return nil, &d
		}
	}
	return why, nil
}

// withoutDF returns obs with the IPv4 "don't fragment" bit and the header
// checksum of each forwarded copy's frame cleared: the kernel sends on
// its own fragmentation of the reassembled datagram, whose DF bit
// ip_frag_reasm sets only when every fragment had it at the largest size
// (fw's raw socket's fragments with DF leave without it), xfw each
// fragment as it came.
func withoutDF(obs []string) []string {
	out := make([]string, 0, len(obs))
	for _, o := range obs {
		head, hexText, ok := strings.Cut(o, "\n")
		if !forwardedCopy(o) || !ok {
			out = append(out, o)
			continue
		}
		b, err := hex.DecodeString(strings.TrimSpace(hexText))
		l3 := l3Offset(b)
		if err != nil || l3 < 0 || len(b) < l3+ipv4HeaderLen || b[l3]>>4 != 4 {
			out = append(out, o)
			continue
		}
		b[l3+6] &^= 0x40
		b[l3+10], b[l3+11] = 0, 0
		out = append(out, head+"\n"+hex.EncodeToString(b))
	}
	return out
}

// kernelCountsMore reports whether counter difference d has more packets
// and bytes on the kernel's side.
func kernelCountsMore(d Difference) bool {
	if len(d.Kernel) != 1 || len(d.XFW) != 1 {
		return false
	}
	k, x := countsRe.FindStringSubmatch(d.Kernel[0]), countsRe.FindStringSubmatch(d.XFW[0])
	if k == nil || x == nil {
		return false
	}
	kp, _ := strconv.ParseUint(k[1], 10, 64)
	kb, _ := strconv.ParseUint(k[2], 10, 64)
	xp, _ := strconv.ParseUint(x[1], 10, 64)
	xb, _ := strconv.ParseUint(x[2], 10, 64)
	return kp > xp && kb > xb
}
