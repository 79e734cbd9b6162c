package compiler

import (
	"fmt"
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file turns a rule into terms: ruleTerms walks the rule's IP-level
// matches and its -m modules with a termBuilder, one method per match,
// found in the file of the match's family (terms_addr.go: addresses and
// interfaces; terms_ip.go: protocol, fragment, length, TTL; terms_l4.go:
// tcp, udp, multiport, icmp; terms_ct.go: conntrack; sets.go: set;
// terms_type.go: addrtype, pkttype; terms_header.go: dscp, tos, ecn,
// tcpmss; terms_ip6ext.go: rt, frag, ah).

// Cond is a conjunction: for each field the set of values a packet may have
// (nil: any value). FieldCt's set holds keys (ctKey), not values.
type Cond [NumFields]*Set

// and returns c ∧ d, and false when the result can match no packet.
func (c Cond) and(d Cond) (Cond, bool) {
	var out Cond
	for f := range c {
		out[f] = Intersect(c[f], d[f])
		if out[f].Empty() {
			return out, false
		}
	}
	return out, true
}

// term is one disjunct of a rule's condition. A hotdrop term is where
// netfilter drops the packet while evaluating the rule (a tcp/udp/icmp match
// that cannot read its header, ip6tables' -p on an unwalkable extension
// chain): it comes before the rule's other terms and drops, uncounted.
type term struct {
	cond    Cond
	hotdrop bool
	// counted: the rule is counted and its target runs, then the packet
	// is dropped (a match that hotdrops and returns true: an inverted
	// sctp --chunk-types or dccp --dccp-option, terms_hdr4.go). after:
	// a hotdrop term that comes after the counted ones.
	counted, after bool
	// flags are EFHotdrop* of a merged term: the rule's own entry drops a
	// packet with those defects instead of a separate hotdrop entry.
	flags uint8
}

// Interface is a network device the compiler resolves -i/-o names against.
type Interface struct {
	Index uint32
	Name  string
	// Group is the device's group (ip link set DEV group N; -m
	// devgroup).
	Group uint32
}

// Numeric domains of the fields (sentinels excluded).
var (
	portMax  = U64(65535)
	byteMax  = U64(255)
	macMax   = U64(1<<48 - 1)
	lenMax   = U64(65535)
	icmpMax  = U64(65535)
	ifaceMax = U64(ifaceUnknown)
)

func invertIf(s *Set, inv bool, lo, hi U128) *Set {
	if !inv {
		return s
	}
	return Complement(s, lo, hi)
}

// ruleTerms translates a rule's matches into disjoint conjunctions.
// Set matches take their FieldSets bit from sets.
func ruleTerms(fam ir.Family, r *ir.Rule, ifaces []Interface, sets *setConds) ([]term, error) {
	return new(termBuilder).ruleTerms(fam, r, ifaces, sets)
}

// ruleTerms is the package's ruleTerms with the builder b, reset first:
// the terms returned may use the array of the terms b returned before,
// so a caller that builds many rules' terms in one b is done with one
// rule's before it asks for the next's.
func (b *termBuilder) ruleTerms(fam ir.Family, r *ir.Rule, ifaces []Interface, sets *setConds) ([]term, error) {
	*b = termBuilder{fam: fam, ifaces: ifaces, sets: sets, hot: b.spare[:0], spare: b.spare, ports: b.ports}
	terms, err := b.build(r)
	if cap(terms) > cap(b.spare) {
		b.spare = terms[:0]
	}
	return terms, err
}

// build adds rule r's IP part and matches to b and returns its terms.
func (b *termBuilder) build(r *ir.Rule) ([]term, error) {
	if err := b.addIPMatches(r); err != nil {
		return nil, err
	}
	for _, m := range r.Matches {
		if err := b.addMatch(m); err != nil {
			return nil, err
		}
	}
	return b.terms(), nil
}

// termBuilder collects the condition of one rule, match by match, in the
// order netfilter evaluates them.
type termBuilder struct {
	fam    ir.Family
	ifaces []Interface
	sets   *setConds

	c   Cond
	hot []term
	// spare is the largest term array this builder returned, which a
	// rule's terms built after it may use again (ruleTerms).
	spare []term
	// ports shares single-port sets among the rules of a compile; nil:
	// each rule makes its own.
	ports *portSets
	// sharedPorts are the sets ports gave the rule's sport and dport
	// (portSet), for mergeHotdrop.
	sharedPorts [2]sharedPort
	// hotTrue are the hotdrop points whose match returns true
	// (terms_hdr4.go hdr4HotTrue): their terms come after b.hot.
	hotTrue []hotTrue
	// dirty: a constraint on a non-transport field follows a hotdrop
	// point, so the hotdrop terms cannot be merged into the rule's term.
	dirty    bool
	hotFlags uint8
	// hotShort: a tcp or udp match hotdrops headers cut short after
	// their ports too (ValShort values), which a merged entry takes.
	hotShort bool

	either  *ir.MultiportMatch // the rule's --ports match, nil if none
	alt     *ctAlt
	ctOther *Set // FieldCt conditions of conntrack matches without tuple options
}

// and adds the condition "field f takes a value in s".
func (b *termBuilder) and(f Field, s *Set) {
	b.c[f] = Intersect(b.c[f], s)
	if len(b.hot) > 0 && !isL4(f) {
		b.dirty = true
	}
}

// hotdropAt records the condition under which evaluation reaches a
// match that hotdrops: everything before it, plus the sentinel value of
// a cut-short header. Later hotdrop terms exclude earlier ones, since
// the conditions before them exclude the sentinel.
func (b *termBuilder) hotdropAt(f Field, sentinel uint64, flag uint8) {
	h := b.c
	h[f] = Intersect(h[f], Point(U64(sentinel)))
	if !h[f].Empty() {
		b.hotdropTerms(h)
		b.hotFlags |= flag
	}
}

// addIPMatches adds the rule's IP-level matches (-s, -d, -i, -o, -p, -f).
func (b *termBuilder) addIPMatches(r *ir.Rule) error {
	if err := b.addrMask(FieldSrc, r.Src); err != nil {
		return err
	}
	if err := b.addrMask(FieldDst, r.Dst); err != nil {
		return err
	}
	if r.InIface.Set {
		b.and(FieldIIF, ifaceSet(r.InIface, b.ifaces))
	}
	if r.OutIface.Set {
		b.and(FieldOIF, ifaceSet(r.OutIface, b.ifaces))
	}
	b.proto(r.Proto)
	b.fragment(r.Fragment)
	return nil
}

// addMatch adds one -m module's condition.
func (b *termBuilder) addMatch(m ir.Match) error {
	switch m := m.(type) {
	case *ir.LimitMatch, *ir.RecentMatch, *ir.HashLimitMatch, *ir.StatisticMatch, *ir.MarkMatch,
		*ir.ConnmarkMatch, *ir.OwnerMatch:
		// Decided by the rule's probes (limit.go, recent.go, hashlimit.go),
		// not by its terms.
	case *ir.StringMatch, *ir.U32Match, *ir.TimeMatch:
		// Decided by the rule's predicate probes (pred.go).
	case *ir.DevGroupMatch:
		b.devGroup(m)
	case *ir.PhysdevMatch:
		b.physdev(m)
	case *ir.ConnlimitMatch, *ir.CPUMatch, *ctReplMatch, *writtenSetMatch:
		// Decided by the rule's probes (connlimit.go, cpu.go, ctrepl.go,
		// settarget.go).
	case *ir.TCPMatch:
		return b.tcp(m)
	case *ir.UDPMatch:
		b.udp(m)
	case *ir.MultiportMatch:
		return b.multiport(m)
	case *ir.ICMPMatch:
		b.icmp(m)
	case *ir.IPRangeMatch:
		b.ipRange(m)
	case *ir.CommentMatch:
		// Always matches.
	case *ir.LengthMatch:
		b.length(m)
	case *ir.TTLMatch:
		b.ttl(m)
	case *ir.MACMatch:
		b.mac(m)
	case *ir.ConntrackMatch:
		return b.conntrack(m)
	case *ir.SetMatch:
		return b.set(m)
	case *ir.AddrTypeMatch:
		return b.addrType(m)
	case *ir.PktTypeMatch:
		b.pktType(m)
	case *ir.DSCPMatch, *ir.TOSMatch, *ir.ECNMatch, *ir.TCPMSSMatch:
		b.headerMatch(m)
	default:
		if kind, ok := Ext6Kind(m); ok {
			return b.ip6ext(m, kind)
		}
		if usesHdr4(m) {
			return b.hdr4(m)
		}
		return fmt.Errorf("match %q is not supported by xfw's data plane", m.ModuleName())
	}
	return nil
}

// terms returns the rule's terms: the hotdrop terms (merged into the rule's
// own term when they can be), then the rule's term, split in two by a
// --ports match, each followed by its twin without a connection when a
// conntrack match tests the connection's tuple.
func (b *termBuilder) terms() []term {
	var terms []term
	switch {
	case b.either == nil && len(b.hot) > 0 && !b.dirty:
		// The hotdrop terms' array takes the merged term: one
		// allocation a rule fewer (-p udp --sport --dport rules).
		terms = append(b.hot[:0], mergeHotdrop(b.c, b.hotFlags, b.hotShort, b.ports, &b.sharedPorts))
	case b.either == nil:
		terms = append(b.hot, term{cond: b.c})
	default:
		terms = append(b.hot, eitherPortTerms(b.c, b.either)...)
	}
	if len(b.hotTrue) > 0 {
		terms = slices.Insert(terms, len(b.hot), b.hotTrueTerms()...)
	}
	if b.alt != nil {
		terms = b.alt.expand(terms, b.ctOther)
	}
	return terms
}

// mergeHotdrop folds a rule's hotdrop terms into its own term: every
// condition before the hotdrop point is the rule's whole condition apart from
// the transport fields, so adding the cut-short sentinels to those fields
// (and "extension chain error" to the protocol) and flagging the entry makes
// it match exactly the defective packets the kernel would hotdrop there. One
// entry per rule instead of two keeps the bit vectors half as wide.
func mergeHotdrop(c Cond, flags uint8, short bool, ports *portSets, known *[2]sharedPort) term {
	if flags&EFHotdropProto != 0 {
		c[FieldProto] = unionOf(c[FieldProto], protoErrSet)
	}
	for _, f := range []Field{FieldSport, FieldDport, FieldICMP} {
		switch {
		case c[f] == nil:
		case c[f] == portsAll && short:
			c[f] = portsAllHotShort
		case c[f] == portsAll:
			c[f] = portsAllHot
		case f != FieldICMP:
			c[f] = ports.hotUnion(c[f], short, known[portIndex(f)])
		default:
			c[f] = unionOf(c[f], valTruncSet)
		}
	}
	if c[FieldTCPFlags] != nil {
		// A TCP fragment at offset 8 carries the flags ecn reads of
		// its payload (FlagsLater + byte) and the cut-short ports.
		c[FieldTCPFlags] = unionOf(c[FieldTCPFlags], flagsTruncSet, laterFlagsAll)
	}
	return term{cond: c, flags: flags}
}

// The sentinel sets mergeHotdrop adds, made once (sets are never changed
// in place): a rule's terms are found for every rule of a ruleset, and two
// of these per port field and rule were a third of the terms' allocations
// at 10K kube-proxy services.
var (
	protoErrSet   = Point(U64(ProtoErr))
	valTruncSet   = Point(U64(ValTrunc))
	flagsTruncSet = Point(U64(FlagsTrunc))
)

// portsAllHot and portsAllHotShort are mergeHotdrop's unions for a port
// field a tcp or udp match leaves open (portsAll): a sport and a dport
// of every such rule, two unions a rule at 10K kube-proxy services
// (120,000 rules, 27 MB), made once.
var (
	portsAllHot      = unionOf(portsAll, valTruncSet)
	portsAllHotShort = unionOf(portsAll, valTruncSet, shortPortsAll)
)

// unionOf returns the union of sets (nil is the universe) in one
// allocation: Union of Union, without the first one's.
func unionOf(sets ...*Set) *Set {
	n := 0
	for _, s := range sets {
		if s == nil {
			return nil
		}
		n += len(s.Ivs)
	}
	u := &Set{Ivs: make([]Interval, 0, n)}
	for _, s := range sets {
		u.Ivs = append(u.Ivs, s.Ivs...)
	}
	u.normalise()
	return u
}
