package dataplane

import "github.com/xfw-dev/xfw/internal/compiler"

// The Go mirrors of bpf/xfw_structs.h's map layouts (those of the
// connection tables are in conntrack.go and ctcfg.go, those of the local
// routing table in attach.go). Field order, sizes and explicit padding
// match the C structs byte for byte: TestLayoutMirrors checks each field
// against the BTF of the built objects.

// bpfBNode is struct xfw_bnode: compiler.BoundNode, byte for byte.
type bpfBNode struct {
	Key [compiler.BoundFanout]bpfBKey
	Cls [compiler.BoundFanout]uint32
}

type bpfBKey struct {
	Hi, Lo uint64
}

type bpfHKey struct {
	Field uint32
	Pad   uint32
	Value uint64
}

type bpfEntry struct {
	Rule   uint32
	Action uint8
	Flags  uint8
	Aux    uint16
	Next   uint32
}

// bpfU32Pair is an element of the clsch map: two of its __u32 values
// (putPairedU32s).
type bpfU32Pair struct {
	V [2]uint32
}

type bpfChunk struct {
	Summary uint64
	Words   [compiler.ChunkWords]uint64
}

// bpfCounter is one CPU's counters of one rule.
type bpfCounter struct {
	Packets uint64
	Bytes   uint64
}

type bpfLogCfg struct {
	Prefix [compiler.LogPrefixLen]byte
	Level  uint8
	Flags  uint8
	// NFLogGroup and NFLogLen are an NFLOG rule's (compiler.LogConfig).
	NFLogGroup uint16
	NFLogLen   uint32
}

type bpfIfInfo struct {
	MAC       [6]byte
	Flags     uint16
	Ifindex   uint32
	HopLimit6 uint8 // net.ipv6.conf.<device>.hop_limit (0: IPv6 off)
	Pad       [3]byte
}

type bpfFamilyCfg struct {
	Enabled    uint32
	Active     uint32
	NChunks    uint32
	NEntries   uint32
	ChainStart [compiler.NumChains]uint32
	ChainEnd   [compiler.NumChains]uint32
	PolicyDrop [compiler.NumChains]uint32
	SmallBase  [bpfNumFields]uint32
	DefaultCls [bpfNumFields]uint32
	MaxIters   uint32
	AddrBase   [compiler.NumAddrFields]uint32
	AddrCount  [compiler.NumAddrFields]uint32
	NCounters  uint32
	NFields    uint32
	Fields     [32]uint8
	// NSetLk and SetLk are the generation's set lookups (struct
	// xfw_setlk), from Update.Sets.
	NSetLk uint32
	SetLk  [maxSetLookups]bpfSetLk
	// SetLkLCtr and NSetCtr are the set entry counters: 1 + the counter
	// of the list:set entry naming each lookup's set (0: none), and the
	// generation's number of counters (Update.SetCounters).
	SetLkLCtr [maxSetLookups]uint32
	NSetCtr   uint32
	// CtFastStates and CtFastEntry are each chain's established fast
	// path (compiler.Generation.CtFastPath).
	CtFastStates [compiler.NumChains]uint32
	CtFastEntry  [compiler.NumChains]uint32
	// Next6, Ext6 and Ext6Addr are the IPv6 extension header conditions
	// (ext6.go).
	Next6    uint32
	Ext6     [compiler.MaxExt6Conds]bpfExt6Cond
	Ext6Addr [ext6MaxAddrs][16]byte
	// NPreds is the generation's predicates (compiler.Generation.Preds).
	NPreds uint32
	// Ext6Kinds and Ext6Opt are the kinds of the conditions (a bit each)
	// and the hbh / dst options (ext6.go).
	Ext6Kinds uint32
	Ext6Opt   [compiler.Ext6MaxOpts]uint16
	// NH4 and H4 are the transport header conditions (hdr4.go).
	NH4 uint32
	H4  [compiler.MaxHdr4Conds]bpfH4Cond
	// NatResume are the walks' resume positions after a DNAT
	// (compiler.Layout.NatResume).
	NatResume [compiler.NumChains]uint32
	// Owner is 1 when some probe is an owner match: TC egress reads the
	// packet's socket (bpf/owner.h).
	Owner uint32
	// PostStart are the walks' first POSTROUTING positions
	// (compiler.Layout.PostStart).
	PostStart [compiler.NumChains]uint32
	// Reroute are the walks' positions where a packet is routed again
	// with its mark (compiler.Layout.Reroute).
	Reroute [compiler.NumChains]uint32
	// Trivial and TrivialCtr are the walks that accept every packet
	// without classifying it: 1 + the number of counters each bumps, and
	// those counters (compiler.Generation.TrivialWalk; bpf/trivial.h).
	Trivial    [compiler.NumChains]uint32
	TrivialCtr [compiler.NumChains][compiler.MaxTrivialCounters]uint32
	// AddrRoot and AddrLevels are the address fields' search trees
	// (compiler.BoundTreeShape).
	AddrRoot   [compiler.NumAddrFields]uint32
	AddrLevels [compiler.NumAddrFields]uint32
	// MaskBase and MaskWords place the classes' chunk masks
	// (compiler.ChunkMasks) in the clsch map, after the class→chunk ids.
	MaskBase  uint32
	MaskWords uint32
	// RawPre are the walks' positions after the PREROUTING chains judged
	// before the route lookup (compiler.Layout.RawPre).
	RawPre [compiler.NumChains]uint32
	// PrePassive is 1 when those chains only count: walked for the
	// packets the routing drops alone (compiler.Layout.PrePassive).
	PrePassive uint32
	// PreEnd are the walks' positions after their PREROUTING segments
	// (compiler.Layout.PreEnd).
	PreEnd [compiler.NumChains]uint32
	// NoShortPorts is 1 when the port fields' arrays have no cut-short
	// part (compiler.Generation.NoShortPorts).
	NoShortPorts uint32
	// MSSTargets are the TCPMSS targets the rules use
	// (compiler.Generation.MSSTargets).
	MSSTargets uint32
	// PreDropN and PreDrop are the leading address drops before routing
	// (compiler.Generation.PreDrops; bpf/predrop.h).
	PreDropN   uint32
	PreDropPad uint32
	PreDrop    [compiler.MaxPreDrops]bpfPreDrop
}

// bpfPreDrop mirrors struct xfw_predrop.
type bpfPreDrop struct {
	LoHi, LoLo, HiHi, HiLo uint64
	Field                  uint32
	Ctr                    uint32
}

// bpfSetLk mirrors struct xfw_setlk: one set lookup of a generation.
type bpfSetLk struct {
	Bit, Flags, Kind, MaxPlen uint8
}

// XFW_SETLK_* flags of bpfSetLk.Flags.
const (
	setLkDst1          = 1
	setLkReturnNomatch = 2
	setLkDst2          = 4
	setLkMember        = 8
)

// bpfSetKey mirrors struct xfw_setkey, the key of a hash set table.
type bpfSetKey struct {
	Hi, Lo  uint64
	Ifindex uint32
	Port    uint16
	Proto   uint8
	Plen    uint8
}

// bpfSetVal mirrors struct xfw_setval.
type bpfSetVal struct {
	Expires uint64
	Answer  uint32
	Aux     uint32
	Ctr     uint32
	Pad     uint32
}

// bpfLogEvent mirrors struct xfw_log_event.
type bpfLogEvent struct {
	InIfindex  uint32
	OutIfindex uint32
	Rule       uint32
	SnapLen    uint16
	L3Off      uint16
	PktLen     uint32
	Family     uint8
	Chain      uint8
	Level      uint8
	Flags      uint8
	HasMAC     uint8
	HasUID     uint8
	NFLogGroup uint16
	NFLogLen   uint32
	Mark       uint32
	UID, GID   uint32
	PhysIn     uint32
	PhysOut    uint32
	View       uint32
	Prefix     [compiler.LogPrefixLen]byte
	Pkt        [logSnap]byte
}

// logSnap is XFW_LOG_SNAP: bytes of a logged frame carried in the event.
const logSnap = 256

// statePage is XFW_STATE_PAGE: the saved ruleset text is kept in pages.
const statePage = 4096

// bpfNumFields is XFW_NFIELDS: the classification fields the BPF program
// computes (all of the compiler's).
const bpfNumFields = compiler.NumFields

// familyCfg renders a generation's slot configuration (map xfw_cfg).
// With prev, the configuration of a generation g was changed from in
// place, of the same active fields, it keeps prev's field order instead of
// counting every field's classes again (WalkFields reads the 131,072
// small-field entries): the order only makes a walk through chunks stop
// sooner, any order matches the same, and the next compile orders them
// afresh.
func familyCfg(g *compiler.Generation, prev *bpfFamilyCfg) bpfFamilyCfg {
	c := bpfFamilyCfg{
		Enabled:   1,
		Active:    g.Active,
		NChunks:   g.NumChunks,
		NEntries:  uint32(len(g.Entries)),
		MaxIters:  g.MaxIters,
		AddrBase:  g.AddrBase,
		AddrCount: g.AddrCount,
		NCounters: uint32(g.NumCounters()),
		NPreds:    uint32(len(g.Preds)),
	}
	copy(c.SmallBase[:], g.SmallBase[:])
	copy(c.DefaultCls[:], g.DefaultClass[:])
	shape := compiler.ShapeBoundTrees(g.AddrCount)
	c.AddrRoot, c.AddrLevels = shape.Root, shape.Levels
	c.MaskBase, c.MaskWords = uint32(g.ClassChunks.NumIDs()), g.ChunkMaskWords()
	for h := 0; h < compiler.NumChains; h++ {
		c.ChainStart[h], c.ChainEnd[h] = g.Walk(h)
	}
	for h := 0; h < compiler.NumChains; h++ {
		if e, states, ok := g.CtFastPath(h); ok {
			c.CtFastStates[h], c.CtFastEntry[h] = uint32(states), e
		}
	}
	c.NatResume = g.Layout.NatResume
	if g.UsesOwner() {
		c.Owner = 1
	}
	c.PostStart = g.Layout.PostStart
	c.Reroute = g.Layout.Reroute
	c.RawPre = g.Layout.RawPre
	if g.Layout.PrePassive {
		c.PrePassive = 1
	}
	c.PreEnd = g.Layout.PreEnd
	if g.NoShortPorts {
		c.NoShortPorts = 1
	}
	c.MSSTargets = g.MSSTargets()
	for h := 0; h < compiler.NumChains; h++ {
		if counters, ok := g.TrivialWalk(h); ok {
			c.Trivial[h] = uint32(1 + copy(c.TrivialCtr[h][:], counters))
		}
	}
	for i, d := range g.PreDrops() {
		c.PreDrop[i] = bpfPreDrop{LoHi: d.Lo.Hi, LoLo: d.Lo.Lo, HiHi: d.Hi.Hi, HiLo: d.Hi.Lo, Field: uint32(d.Field), Ctr: d.Rule}
		c.PreDropN = uint32(i + 1)
	}
	fillExt6(&c, g.Ext6Conds())
	fillHdr4(&c, g.Hdr4Conds())
	if prev != nil && prev.Active == g.Active && prev.NFields > 0 {
		c.Fields, c.NFields = prev.Fields, prev.NFields
	} else {
		for _, f := range g.WalkFields() {
			c.Fields[c.NFields] = uint8(f)
			c.NFields++
		}
	}
	for i, d := range g.PolicyDrop {
		if d {
			c.PolicyDrop[i] = 1
		}
	}
	return c
}

// preDropsOfCfg returns the leading drops c holds (familyCfg's PreDrop),
// for a generation read back from the data plane.
func preDropsOfCfg(c *bpfFamilyCfg) []compiler.PreDrop {
	var out []compiler.PreDrop
	for i := 0; i < int(c.PreDropN) && i < len(c.PreDrop); i++ {
		d := c.PreDrop[i]
		out = append(out, compiler.PreDrop{Field: compiler.Field(d.Field), Lo: compiler.U128{Hi: d.LoHi, Lo: d.LoLo},
			Hi: compiler.U128{Hi: d.HiHi, Lo: d.HiLo}, Rule: d.Ctr})
	}
	return out
}

// trivialOfCfg returns the trivial walks c holds (familyCfg's Trivial and
// TrivialCtr), for a generation read back from the data plane.
func trivialOfCfg(c *bpfFamilyCfg) (t [compiler.NumChains]compiler.TrivialInfo) {
	for h, n := range c.Trivial {
		if n == 0 || n > compiler.MaxTrivialCounters+1 {
			continue
		}
		t[h] = compiler.TrivialInfo{OK: true, Counters: append([]uint32(nil), c.TrivialCtr[h][:n-1]...)}
	}
	return t
}

// bpfInflight is struct xfw_inflight: program runs begun and ended on one
// CPU (bpf/generation.h, "Quiescence").
type bpfInflight struct {
	Begun, Ended uint64
}
