package ir

import (
	"net/netip"
	"slices"
)

// Family is an address family: IPv4 (iptables) or IPv6 (ip6tables).
type Family uint8

const (
	// IPv4 is the iptables family.
	IPv4 Family = 4
	// IPv6 is the ip6tables family.
	IPv6 Family = 6
)

// String returns "ipv4" or "ipv6".
func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// AddrBits is the width of an address of the family in bits.
func (f Family) AddrBits() int {
	if f == IPv6 {
		return 128
	}
	return 32
}

// Built-in chain names of the filter table, in the order iptables-save prints them.
const (
	ChainInput   = "INPUT"
	ChainForward = "FORWARD"
	ChainOutput  = "OUTPUT"
)

// BuiltinChains lists the filter table's built-in chains in iptables-save order.
var BuiltinChains = []string{ChainInput, ChainForward, ChainOutput}

// IsBuiltinChain reports whether name is a built-in chain of the filter table.
func IsBuiltinChain(name string) bool {
	return name == ChainInput || name == ChainForward || name == ChainOutput
}

// Counters are a packet and a byte counter, as iptables keeps per rule and per
// built-in chain policy.
type Counters struct {
	Packets uint64
	Bytes   uint64
}

// Ruleset is the filter table of one family, with the family's other
// tables (nat, mangle, raw, security) in Tables. A table other than filter
// is itself a Ruleset whose Table names it and whose Tables is empty.
type Ruleset struct {
	Family Family
	// Table is the table's name; "" is the filter table.
	Table string
	// Chains holds the built-in chains first (INPUT, FORWARD, OUTPUT), then
	// user-defined chains in creation order.
	Chains []*Chain
	// Tables are the other tables that exist (a command used them), in
	// the order they were created.
	Tables []*Ruleset
}

// NewRuleset returns an empty filter table with the three built-in chains,
// policy ACCEPT, as a fresh kernel has.
func NewRuleset(f Family) *Ruleset {
	rs := &Ruleset{Family: f}
	for _, name := range BuiltinChains {
		rs.Chains = append(rs.Chains, &Chain{Name: name, Builtin: true, Policy: VerdictAccept})
	}
	return rs
}

// Chain returns the chain called name, or nil. It looks the name up in an
// index of rs.Chains kept up to date with the slice (chainIndex), so a
// restore's lookup per rule does not scan every chain.
func (rs *Ruleset) Chain(name string) *Chain {
	return indexOf(rs).lookup(rs.Chains, name)
}

// ChainFinder returns a function that looks chains up as rs.Chain does,
// with rs's index found once instead of per call (a restore looks up
// hundreds of thousands of chains).
func (rs *Ruleset) ChainFinder() func(name string) *Chain {
	idx := indexOf(rs)
	return func(name string) *Chain { return idx.lookup(rs.Chains, name) }
}

// RenameChain renames chain c of rs. Chain names change only through it,
// so that the index of Chain sees the new name.
func (rs *Ruleset) RenameChain(c *Chain, name string) {
	c.Name = name
	indexOf(rs).reset()
}

// Clone returns a deep copy of the ruleset, so a command can edit the copy
// and leave the original untouched when it fails.
func (rs *Ruleset) Clone() *Ruleset {
	out := &Ruleset{Family: rs.Family, Table: rs.Table}
	for _, t := range rs.Tables {
		out.Tables = append(out.Tables, t.Clone())
	}
	for _, c := range rs.Chains {
		nc := *c
		nc.Rules = make([]*Rule, len(c.Rules))
		for i, r := range c.Rules {
			nc.Rules[i] = r.Clone()
		}
		out.Chains = append(out.Chains, &nc)
	}
	return out
}

// CloneChains returns a copy of the ruleset that has its own chains and
// rule lists but shares the rules themselves with rs: enough for a command
// that adds, removes or replaces whole rules (iptables -A, -I, -R, -D, -C)
// and changes none in place, at a fraction of Clone's cost on large
// rulesets (one pointer per rule instead of a deep copy).
func (rs *Ruleset) CloneChains() *Ruleset {
	out := &Ruleset{Family: rs.Family, Table: rs.Table, Chains: make([]*Chain, len(rs.Chains))}
	for _, t := range rs.Tables {
		out.Tables = append(out.Tables, t.CloneChains())
	}
	for i, c := range rs.Chains {
		nc := *c
		nc.Rules = slices.Clone(c.Rules)
		out.Chains[i] = &nc
	}
	return out
}

// Verdict is a chain policy: ACCEPT or DROP for built-in chains, none for
// user-defined chains.
type Verdict uint8

const (
	// VerdictNone is the "policy" of a user-defined chain (printed as "-").
	VerdictNone Verdict = iota
	// VerdictAccept lets the packet go on.
	VerdictAccept
	// VerdictDrop discards the packet silently.
	VerdictDrop
)

// String returns the iptables spelling of the verdict.
func (v Verdict) String() string {
	switch v {
	case VerdictAccept:
		return "ACCEPT"
	case VerdictDrop:
		return "DROP"
	}
	return "-"
}

// Chain is one chain of the filter table.
type Chain struct {
	Name    string
	Builtin bool
	// Policy is ACCEPT or DROP for built-in chains, VerdictNone otherwise.
	Policy Verdict
	// Counters are the policy counters of a built-in chain (packets that fell
	// off its end), as printed in ":INPUT ACCEPT [p:b]".
	Counters Counters
	Rules    []*Rule
}

// Rule is one rule: the IP-level matches of the iptables entry, the match
// modules in the order given, and the target.
type Rule struct {
	Src      AddrMatch
	Dst      AddrMatch
	InIface  IfaceMatch
	OutIface IfaceMatch
	Proto    ProtoMatch
	// Fragment is iptables' -f (IPv4 only): match only second and further
	// fragments, or with Invert, only unfragmented packets and first fragments.
	Fragment FlagMatch
	// Matches are the -m modules, in the order they appear in the rule.
	Matches  []Match
	Target   Target
	Counters Counters
	// Handle identifies the rule in the running ruleset it was read from
	// (its counter index + 1); 0 for a rule that was not. Copies keep it,
	// so the control plane can tell which rules of a new ruleset are
	// running rules and carry their counters without comparing texts.
	Handle uint32
}

// Clone returns a deep copy of the rule (Handle included).
func (r *Rule) Clone() *Rule {
	nr := *r
	nr.Matches = make([]Match, len(r.Matches))
	for i, m := range r.Matches {
		nr.Matches[i] = m.CloneMatch()
	}
	if r.Target.Log != nil {
		l := *r.Target.Log
		nr.Target.Log = &l
	}
	if r.Target.Nat != nil {
		n := *r.Target.Nat
		nr.Target.Nat = &n
	}
	if r.Target.Connmark != nil {
		c := *r.Target.Connmark
		nr.Target.Connmark = &c
	}
	if r.Target.Mangle != nil {
		m := *r.Target.Mangle
		nr.Target.Mangle = &m
	}
	if r.Target.NFLog != nil {
		n := *r.Target.NFLog
		nr.Target.NFLog = &n
	}
	if r.Target.Set != nil {
		t := *r.Target.Set
		nr.Target.Set = &t
	}
	return &nr
}

// AddrMatch is -s or -d: an address with a netmask (a prefix, or any
// netmask iptables accepts such as 255.0.255.0), optionally inverted.
type AddrMatch struct {
	// Set is false when the rule does not restrict the field (0.0.0.0/0 is
	// stored as unset, as iptables does).
	Set    bool
	Invert bool
	// Addr is the address already masked with Mask, as iptables stores it.
	Addr netip.Addr
	// Mask is the netmask as an address of the same family.
	Mask netip.Addr
}

// IfaceMatch is -i or -o: an interface name, where a trailing "+" matches
// every name with the given prefix.
type IfaceMatch struct {
	Set    bool
	Invert bool
	// Name is the name as given, including a trailing "+".
	Name string
}

// Matches reports whether an interface called ifname satisfies the match
// (ignoring Invert's absence of a name: callers handle "no interface").
func (m IfaceMatch) Matches(ifname string) bool {
	if !m.Set {
		return true
	}
	ok := false
	if n := len(m.Name); n > 0 && m.Name[n-1] == '+' {
		ok = len(ifname) >= n-1 && ifname[:n-1] == m.Name[:n-1]
	} else {
		ok = ifname == m.Name
	}
	return ok != m.Invert
}

// ProtoMatch is -p: a protocol number (0 means "all"), optionally inverted.
type ProtoMatch struct {
	Set    bool
	Invert bool
	Num    uint8
	// Spelling is the name the user gave ("tcp", "6", "ipv6-icmp", …); the
	// printer prints the canonical form iptables-save uses.
	Spelling string
}

// FlagMatch is a present/absent condition with an optional inversion, such
// as -f.
type FlagMatch struct {
	Set    bool
	Invert bool
}

// Match is one -m module of a rule.
type Match interface {
	// ModuleName is the name given to -m (for example "tcp").
	ModuleName() string
	// CloneMatch returns a deep copy.
	CloneMatch() Match
}

// PortRange is an inclusive port range; a single port has First == Last.
type PortRange struct {
	First, Last uint16
}

// PortMatch is a --sport or --dport option of the tcp or udp match.
type PortMatch struct {
	Set    bool
	Invert bool
	Range  PortRange
}

// TCPMatch is -m tcp (also implied by -p tcp with tcp options).
type TCPMatch struct {
	SrcPort PortMatch
	DstPort PortMatch
	// Flags is --tcp-flags MASK COMP (and --syn).
	Flags TCPFlagsMatch
	// Option is --tcp-option N.
	Option TCPOptionMatch
}

// TCPFlagsMatch matches when (flags & Mask) == Comp, or != with Invert.
type TCPFlagsMatch struct {
	Set    bool
	Invert bool
	Mask   uint8
	Comp   uint8
}

// TCPOptionMatch matches when the TCP header carries option Kind.
type TCPOptionMatch struct {
	Set    bool
	Invert bool
	Kind   uint8
}

// TCP flag bits, as in the TCP header's flags byte.
const (
	TCPFlagFIN uint8 = 0x01
	TCPFlagSYN uint8 = 0x02
	TCPFlagRST uint8 = 0x04
	TCPFlagPSH uint8 = 0x08
	TCPFlagACK uint8 = 0x10
	TCPFlagURG uint8 = 0x20
	TCPFlagECE uint8 = 0x40
	TCPFlagCWR uint8 = 0x80
)

// ModuleName implements Match.
func (*TCPMatch) ModuleName() string { return "tcp" }

// CloneMatch implements Match.
func (m *TCPMatch) CloneMatch() Match { c := *m; return &c }

// UDPMatch is -m udp.
type UDPMatch struct {
	SrcPort PortMatch
	DstPort PortMatch
}

// ModuleName implements Match.
func (*UDPMatch) ModuleName() string { return "udp" }

// CloneMatch implements Match.
func (m *UDPMatch) CloneMatch() Match { c := *m; return &c }

// MultiportDir says which ports a multiport match looks at.
type MultiportDir uint8

const (
	// MultiportSource is --sports / --source-ports.
	MultiportSource MultiportDir = iota + 1
	// MultiportDestination is --dports / --destination-ports.
	MultiportDestination
	// MultiportEither is --ports: source or destination.
	MultiportEither
)

// MultiportMatch is -m multiport: up to 15 ports or ranges.
type MultiportMatch struct {
	Dir    MultiportDir
	Invert bool
	Ports  []PortRange
}

// ModuleName implements Match.
func (*MultiportMatch) ModuleName() string { return "multiport" }

// CloneMatch implements Match.
func (m *MultiportMatch) CloneMatch() Match {
	c := *m
	c.Ports = append([]PortRange(nil), m.Ports...)
	return &c
}

// ICMPMatch is -m icmp --icmp-type (IPv4) or -m icmp6 --icmpv6-type (IPv6).
type ICMPMatch struct {
	// V6 selects the icmp6 module.
	V6     bool
	Invert bool
	// Any matches every type ("any"; IPv4 only).
	Any  bool
	Type uint8
	// CodeMin and CodeMax bound the code; a type given without a code
	// matches codes 0–255.
	CodeMin, CodeMax uint8
}

// ModuleName implements Match.
func (m *ICMPMatch) ModuleName() string {
	if m.V6 {
		return "icmp6"
	}
	return "icmp"
}

// CloneMatch implements Match.
func (m *ICMPMatch) CloneMatch() Match { c := *m; return &c }

// AddrRange is an inclusive address range of -m iprange.
type AddrRange struct {
	Set      bool
	Invert   bool
	From, To netip.Addr
}

// IPRangeMatch is -m iprange --src-range/--dst-range.
type IPRangeMatch struct {
	Src AddrRange
	Dst AddrRange
}

// ModuleName implements Match.
func (*IPRangeMatch) ModuleName() string { return "iprange" }

// CloneMatch implements Match.
func (m *IPRangeMatch) CloneMatch() Match { c := *m; return &c }

// CommentMatch is -m comment --comment: it always matches.
type CommentMatch struct {
	Text string
}

// ModuleName implements Match.
func (*CommentMatch) ModuleName() string { return "comment" }

// CloneMatch implements Match.
func (m *CommentMatch) CloneMatch() Match { c := *m; return &c }

// LengthMatch is -m length --length MIN[:MAX]: the layer-3 packet length
// (IPv4 total length; IPv6 payload length plus the 40-byte header).
type LengthMatch struct {
	Invert   bool
	Min, Max uint16
}

// ModuleName implements Match.
func (*LengthMatch) ModuleName() string { return "length" }

// CloneMatch implements Match.
func (m *LengthMatch) CloneMatch() Match { c := *m; return &c }

// CmpOp is the comparison of the ttl and hl matches.
type CmpOp uint8

const (
	// CmpEq is --ttl-eq / --hl-eq.
	CmpEq CmpOp = iota
	// CmpNe is ! --ttl-eq / ! --hl-eq.
	CmpNe
	// CmpLt is --ttl-lt / --hl-lt.
	CmpLt
	// CmpGt is --ttl-gt / --hl-gt.
	CmpGt
)

// TTLMatch is -m ttl (IPv4) or -m hl (IPv6, HL true).
type TTLMatch struct {
	HL    bool
	Op    CmpOp
	Value uint8
}

// ModuleName implements Match.
func (m *TTLMatch) ModuleName() string {
	if m.HL {
		return "hl"
	}
	return "ttl"
}

// CloneMatch implements Match.
func (m *TTLMatch) CloneMatch() Match { c := *m; return &c }

// MACMatch is -m mac --mac-source.
type MACMatch struct {
	Invert bool
	Addr   [6]byte
}

// ModuleName implements Match.
func (*MACMatch) ModuleName() string { return "mac" }

// CloneMatch implements Match.
func (m *MACMatch) CloneMatch() Match { c := *m; return &c }

// Address types of -m addrtype: bit n of a mask is route type n of
// linux/rtnetlink.h (RTN_UNSPEC 0 … RTN_XRESOLVE 11), as xt_addrtype.h's
// XT_ADDRTYPE_* values.
const (
	AddrTypeUnspec uint16 = 1 << iota
	AddrTypeUnicast
	AddrTypeLocal
	AddrTypeBroadcast
	AddrTypeAnycast
	AddrTypeMulticast
	AddrTypeBlackhole
	AddrTypeUnreachable
	AddrTypeProhibit
	AddrTypeThrow
	AddrTypeNAT
	AddrTypeXResolve
)

// AddrTypeNames are the type names iptables prints, indexed by bit.
var AddrTypeNames = []string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

// AddrTypeMatch is -m addrtype (revision 1): the route types of the
// source and destination addresses.
type AddrTypeMatch struct {
	// Src and Dst are masks of AddrType* bits; 0 when not given.
	Src, Dst       uint16
	InvSrc, InvDst bool
	// LimitIn and LimitOut are --limit-iface-in and --limit-iface-out:
	// a route counts only when it goes through the packet's input
	// (output) device.
	LimitIn, LimitOut bool
}

// ModuleName implements Match.
func (*AddrTypeMatch) ModuleName() string { return "addrtype" }

// CloneMatch implements Match.
func (m *AddrTypeMatch) CloneMatch() Match { c := *m; return &c }

// Packet types of -m pkttype (the kernel's PACKET_* values of
// skb->pkt_type).
const (
	PktTypeHost      uint8 = 0 // "unicast"
	PktTypeBroadcast uint8 = 1
	PktTypeMulticast uint8 = 2
	PktTypeOtherHost uint8 = 3
)

// PktTypeMatch is -m pkttype --pkt-type.
type PktTypeMatch struct {
	Invert bool
	// Type is a PktType* value.
	Type uint8
}

// ModuleName implements Match.
func (*PktTypeMatch) ModuleName() string { return "pkttype" }

// CloneMatch implements Match.
func (m *PktTypeMatch) CloneMatch() Match { c := *m; return &c }

// TargetKind is what a rule does when it matches.
type TargetKind uint8

const (
	// TargetNone is a rule without -j: it only counts.
	TargetNone TargetKind = iota
	// TargetAccept is -j ACCEPT.
	TargetAccept
	// TargetDrop is -j DROP.
	TargetDrop
	// TargetReturn is -j RETURN.
	TargetReturn
	// TargetJump is -j CHAIN (a user-defined chain).
	TargetJump
	// TargetGoto is -g CHAIN.
	TargetGoto
	// TargetReject is -j REJECT.
	TargetReject
	// TargetLog is -j LOG.
	TargetLog
	// TargetDNAT is -j DNAT (nat table; options in Target.Nat).
	TargetDNAT
	// TargetSNAT is -j SNAT (nat table; options in Target.Nat).
	TargetSNAT
	// TargetMasquerade is -j MASQUERADE (nat table; options in Target.Nat).
	TargetMasquerade
	// TargetRedirect is -j REDIRECT (nat table; options in Target.Nat).
	TargetRedirect
	// TargetMark is -j MARK (options in Target.Mark).
	TargetMark
	// TargetConnmark is -j CONNMARK (options in Target.Connmark).
	TargetConnmark
	// TargetTCPMSS is -j TCPMSS (options in Target.Mangle).
	TargetTCPMSS
	// TargetDSCP is -j DSCP (options in Target.Mangle).
	TargetDSCP
	// TargetTOS is -j TOS (options in Target.Mangle).
	TargetTOS
	// TargetTTL is IPv4's -j TTL (options in Target.Mangle).
	TargetTTL
	// TargetHL is IPv6's -j HL (options in Target.Mangle).
	TargetHL
	// TargetCTNotrack is -j CT --notrack (the CT target's other options
	// are refused).
	TargetCTNotrack
	// TargetNotrack is -j NOTRACK (CT's alias of revision 0: a rule of
	// its own, not the same as CT --notrack).
	TargetNotrack
	// TargetNFLog is -j NFLOG (options in Target.NFLog).
	TargetNFLog
	// TargetSet is -j SET (options in Target.Set).
	TargetSet
)

// Target is the -j/-g part of a rule.
type Target struct {
	Kind TargetKind
	// Chain is the user chain of a jump or goto.
	Chain string
	// RejectWith is the --reject-with type in iptables' canonical long form
	// (e.g. "icmp-port-unreachable", "tcp-reset", "icmp6-adm-prohibited").
	RejectWith string
	// Log holds the LOG target's options.
	Log *LogOptions
	// Nat holds the options of DNAT, SNAT, MASQUERADE and REDIRECT.
	Nat *NatRange
	// Mark holds the MARK target's values.
	Mark MarkTarget
	// Connmark holds the CONNMARK target's values.
	Connmark *ConnmarkTarget
	// Mangle holds the options of TCPMSS, DSCP, TOS, TTL and HL.
	Mangle *MangleTarget
	// NFLog holds the NFLOG target's options.
	NFLog *NFLogOptions
	// Set holds the SET target's options.
	Set *SetTarget
}

// Jumps reports whether t jumps or goes to a chain (-j CHAIN, -g CHAIN).
func (t Target) Jumps() bool { return t.Kind == TargetJump || t.Kind == TargetGoto }

// LogOptions are the options of the LOG target.
type LogOptions struct {
	// Level is the syslog level 0–7 (default 4, warning).
	Level uint8
	// LevelSet records that --log-level was given, so it prints back.
	LevelSet bool
	Prefix   string
	// Flags are the --log-tcp-sequence, --log-tcp-options, --log-ip-options,
	// --log-uid and --log-macdecode bits (LogFlag*).
	Flags uint8
}

// LOG target flags, with the kernel's values (xt_LOG.h).
const (
	LogFlagTCPSeq    uint8 = 0x01
	LogFlagTCPOpt    uint8 = 0x02
	LogFlagIPOpt     uint8 = 0x04
	LogFlagUID       uint8 = 0x08
	LogFlagMACDecode uint8 = 0x20
)

// MaxSetDims is IPSET_DIM_MAX: a set match names at most this many
// src/dst directions.
const MaxSetDims = 6

// SetCounterOp is the comparison of a set match's --packets-*/--bytes-*
// option (enum ip_set_counter_op).
type SetCounterOp uint8

const (
	// SetCounterNone is an absent counter option.
	SetCounterNone SetCounterOp = iota
	// SetCounterEq is --packets-eq / --bytes-eq.
	SetCounterEq
	// SetCounterNe is ! --packets-eq / ! --bytes-eq.
	SetCounterNe
	// SetCounterLt is --packets-lt / --bytes-lt.
	SetCounterLt
	// SetCounterGt is --packets-gt / --bytes-gt.
	SetCounterGt
)

// SetCounterMatch is a comparison of the matching set entry's packet or
// byte counter.
type SetCounterMatch struct {
	Op    SetCounterOp
	Value uint64
}

// SetDirs are the directions of a set match's FLAGS ("src,dst"): Dim
// directions, bit i of Src set when direction i+1 is "src" (else "dst").
type SetDirs struct {
	Dim uint8
	Src uint8
}

// String returns the directions as iptables prints them ("src,dst").
func (d SetDirs) String() string {
	s := ""
	for i := uint8(0); i < d.Dim; i++ {
		if i > 0 {
			s += ","
		}
		if d.Src&(1<<i) != 0 {
			s += "src"
		} else {
			s += "dst"
		}
	}
	return s
}

// SetMatch is -m set --match-set NAME FLAGS: the packet's addresses (and
// ports, …) in the directions of Dirs are looked up in the ipset NAME.
type SetMatch struct {
	Invert bool
	Name   string
	Dirs   SetDirs
	// ReturnNomatch is --return-nomatch: in a set type with nomatch
	// entries (hash:*net*) the answer of an element is reversed, one
	// matching a nomatch entry makes the match true, one matching a plain
	// entry false; other types ignore it.
	ReturnNomatch bool
	// SkipCounterUpdate is "! --update-counters" and SkipSubcounterUpdate
	// "! --update-subcounters": the kernel then leaves the entries'
	// counters (of a list:set's members, for the second) alone.
	SkipCounterUpdate    bool
	SkipSubcounterUpdate bool
	// Packets and Bytes are --packets-* and --bytes-*.
	Packets SetCounterMatch
	Bytes   SetCounterMatch
}

// ModuleName implements Match.
func (*SetMatch) ModuleName() string { return "set" }

// CloneMatch implements Match.
func (m *SetMatch) CloneMatch() Match { c := *m; return &c }

// SetUses counts the set matches of rs naming set ("" counts all), and
// its SET targets' set references (setTargetUses).
func (rs *Ruleset) SetUses(set string) int {
	n := 0
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			for _, m := range r.Matches {
				if sm, ok := m.(*SetMatch); ok && (set == "" || sm.Name == set) {
					n++
				}
			}
		}
	}
	return n + rs.setTargetUses(set)
}

// Connection-tracking state bits of ConntrackMatch.States, with the values
// of the kernel's xt_conntrack.h (XT_CONNTRACK_STATE_*): bit 0 is INVALID,
// XT_CONNTRACK_STATE_BIT(ctinfo) is 1 << (ctinfo + 1) for ESTABLISHED (0),
// RELATED (1) and NEW (2), then SNAT, DNAT and UNTRACKED.
const (
	// CtStateInvalid is INVALID: the packet belongs to no known connection.
	CtStateInvalid uint16 = 1 << 0
	// CtStateEstablished is ESTABLISHED.
	CtStateEstablished uint16 = 1 << 1
	// CtStateRelated is RELATED.
	CtStateRelated uint16 = 1 << 2
	// CtStateNew is NEW.
	CtStateNew uint16 = 1 << 3
	// CtStateSNAT is SNAT: the connection's source is translated.
	CtStateSNAT uint16 = 1 << 6
	// CtStateDNAT is DNAT: the connection's destination is translated.
	CtStateDNAT uint16 = 1 << 7
	// CtStateUntracked is UNTRACKED: the packet is exempt from tracking.
	CtStateUntracked uint16 = 1 << 8
)

// Connection status bits of ConntrackMatch.Status, with the values of the
// kernel's IPS_* flags. NONE is the empty mask.
const (
	// CtStatusExpected is EXPECTED (IPS_EXPECTED).
	CtStatusExpected uint16 = 1 << 0
	// CtStatusSeenReply is SEEN_REPLY (IPS_SEEN_REPLY).
	CtStatusSeenReply uint16 = 1 << 1
	// CtStatusAssured is ASSURED (IPS_ASSURED).
	CtStatusAssured uint16 = 1 << 2
	// CtStatusConfirmed is CONFIRMED (IPS_CONFIRMED).
	CtStatusConfirmed uint16 = 1 << 3
)

// CtBitsMatch is --ctstate, --state or --ctstatus: the connection's state
// (or status) must be one of the bits of Bits (for --ctstatus NONE, Bits 0,
// a status with no bit set).
type CtBitsMatch struct {
	Set    bool
	Invert bool
	Bits   uint16
}

// CtProtoMatch is --ctproto: the connection's layer-4 protocol number.
type CtProtoMatch struct {
	Set    bool
	Invert bool
	Num    uint8
}

// CtExpireMatch is --ctexpire MIN[:MAX]: the connection's remaining
// lifetime in seconds, inclusive.
type CtExpireMatch struct {
	Set      bool
	Invert   bool
	Min, Max uint32
}

// CtDirection is --ctdir: which direction of the connection the packet
// travels in.
type CtDirection uint8

const (
	// CtDirAny is an absent --ctdir.
	CtDirAny CtDirection = iota
	// CtDirOriginal is --ctdir ORIGINAL.
	CtDirOriginal
	// CtDirReply is --ctdir REPLY.
	CtDirReply
)

// ConntrackMatch is -m conntrack (revision 3, the one iptables 1.8.9 uses)
// or -m state, which iptables 1.8.9 loads as an alias of conntrack with
// only --state. Each condition carries its own Set and Invert flags.
type ConntrackMatch struct {
	// StateAlias is true for a match written as -m state: it is printed
	// back as "-m state --state …" (iptables -L: "state …").
	StateAlias bool
	// States is --ctstate (or --state), a mask of the CtState* bits.
	States CtBitsMatch
	// Proto is --ctproto.
	Proto CtProtoMatch
	// OrigSrc, OrigDst, ReplSrc and ReplDst are --ctorigsrc, --ctorigdst,
	// --ctreplsrc and --ctrepldst. Unlike -s and -d, conntrack keeps the
	// address as given (not masked with Mask), and a set condition with a
	// zero mask is kept and printed ("/0").
	OrigSrc, OrigDst, ReplSrc, ReplDst AddrMatch
	// OrigSrcPort, OrigDstPort, ReplSrcPort and ReplDstPort are
	// --ctorigsrcport, --ctorigdstport, --ctreplsrcport and --ctrepldstport.
	OrigSrcPort, OrigDstPort, ReplSrcPort, ReplDstPort PortMatch
	// Status is --ctstatus, a mask of the CtStatus* bits.
	Status CtBitsMatch
	// Expire is --ctexpire.
	Expire CtExpireMatch
	// Dir is --ctdir (never inverted).
	Dir CtDirection
}

// ModuleName implements Match: "state" for the alias, else "conntrack".
func (m *ConntrackMatch) ModuleName() string {
	if m.StateAlias {
		return "state"
	}
	return "conntrack"
}

// CloneMatch implements Match.
func (m *ConntrackMatch) CloneMatch() Match { c := *m; return &c }
