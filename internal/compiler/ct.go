package compiler

import (
	"fmt"
	"sync"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Connection tracking: -m conntrack and -m state become a condition on
// FieldCt, whose value packs the conntrack facts the kernel's conntrack_mt
// (net/netfilter/xt_conntrack.c, revision 3) looks at. The encoding is
// bpf/common.h's XFW_CTS_* and XFW_CTV_*.

// Connection states: bits 0-2 of a FieldCt value (XFW_CTS_*).
const (
	// CtsInvalid is a packet that belongs to no known connection.
	CtsInvalid uint8 = 0
	// CtsNew is a packet that starts a connection.
	CtsNew uint8 = 1
	// CtsEstablished is a packet of a connection that has seen both
	// directions.
	CtsEstablished uint8 = 2
	// CtsRelated is a packet that starts a connection expected by another
	// one (or an ICMP error about one).
	CtsRelated uint8 = 3
	// CtsUntracked is a packet exempt from tracking.
	CtsUntracked uint8 = 4
)

// Layout of a FieldCt value (XFW_CTV_*). A packet with no connection
// (CtsInvalid, CtsUntracked) has only its state bits set.
const (
	// CtValStateMask selects the state (Cts*) of a value.
	CtValStateMask = 0x7
	// CtValDirReply is set when the packet travels in the connection's
	// reply direction (XFW_CTV_DIR_REPLY).
	CtValDirReply = 1 << 3
	// CtValStatusShift is the position of the connection's status bits
	// (the kernel's IPS_* bits 0-3, ir.CtStatus*: EXPECTED, SEEN_REPLY,
	// ASSURED, CONFIRMED) (XFW_CTV_STATUS_SHIFT).
	CtValStatusShift = 4
	// CtValStatusMask selects the status bits after the shift.
	CtValStatusMask = 0xf
	// CtValProtoShift is the position of the connection's layer-4
	// protocol number, 8 bits (XFW_CTV_PROTO_SHIFT).
	CtValProtoShift = 8
)

// ctDomain is the number of FieldCt values: 16 bits.
const ctDomain = 1 << 16

// CtValue returns the FieldCt value of a packet in state (Cts*), in the
// reply direction or not, of a connection with status (the IPS_* bits
// 0-3, ir.CtStatus*) and layer-4 protocol proto. A packet with no
// connection (CtsInvalid, CtsUntracked) has no direction, status or
// protocol: CtValue ignores them.
func CtValue(state uint8, reply bool, status uint8, proto uint8) uint32 {
	v := uint32(state) & CtValStateMask
	if state == CtsInvalid || state == CtsUntracked {
		return v
	}
	if reply {
		v |= CtValDirReply
	}
	return v | (uint32(status)&CtValStatusMask)<<CtValStatusShift | uint32(proto)<<CtValProtoShift
}

// Conditions on FieldCt are kept in key order, not value order: the key
// of a value puts its fields from the most significant bits down as state
// (3 bits), direction (1), status (4), protocol (8), where the value has
// them the other way round. The common matches then are few intervals
// (--ctstate NEW is one, --ctstate ESTABLISHED,RELATED one, --ctdir REPLY
// three, --ctproto tcp 96) where in value order a state is every eighth
// value (8192 intervals, whose ends the flattener would sort for every
// rule). The direct array is indexed by value: Compile and AppendRule
// place key k at ctValueOfKey(k) (Field.smallIndex).
const (
	ctKeyStateShift  = 13
	ctKeyDirShift    = 12
	ctKeyStatusShift = 8
	ctKeyProtoMask   = 0xff
)

// ctKey returns the key of FieldCt value v.
func ctKey(v uint32) uint32 {
	state := v & CtValStateMask
	dir := v >> 3 & 1 // CtValDirReply is bit 3
	status := v >> CtValStatusShift & CtValStatusMask
	proto := v >> CtValProtoShift & ctKeyProtoMask
	return state<<ctKeyStateShift | dir<<ctKeyDirShift | status<<ctKeyStatusShift | proto
}

// ctValueOfKey returns the FieldCt value of key k (the inverse of ctKey).
func ctValueOfKey(k uint32) uint32 {
	state := k >> ctKeyStateShift & CtValStateMask
	dir := k >> ctKeyDirShift & 1
	status := k >> ctKeyStatusShift & CtValStatusMask
	proto := k & ctKeyProtoMask
	return state | dir<<3 | status<<CtValStatusShift | proto<<CtValProtoShift
}

// ctMatches reports whether a packet with FieldCt value v matches m, as
// conntrack_mt does. Only the state, protocol, status and direction
// options are read (ctCondition refuses the others). A value whose state
// is none of the Cts* never occurs and matches nothing.
func ctMatches(m *ir.ConntrackMatch, v uint32) bool {
	var statebit uint16 // XT_CONNTRACK_STATE_*; SNAT and DNAT never: no NAT
	conn := true
	switch uint8(v & CtValStateMask) {
	case CtsInvalid:
		statebit, conn = ir.CtStateInvalid, false
	case CtsNew:
		statebit = ir.CtStateNew
	case CtsEstablished:
		statebit = ir.CtStateEstablished
	case CtsRelated:
		statebit = ir.CtStateRelated
	case CtsUntracked:
		statebit, conn = ir.CtStateUntracked, false
	default:
		return false
	}
	if m.States.Set && (m.States.Bits&statebit != 0) == m.States.Invert {
		return false
	}
	if !conn {
		// Without a connection every other option is ignored.
		return m.States.Set
	}
	reply := v&CtValDirReply != 0
	if m.Dir == ir.CtDirOriginal && reply || m.Dir == ir.CtDirReply && !reply {
		return false
	}
	if m.Proto.Set && (uint8(v>>CtValProtoShift) == m.Proto.Num) == m.Proto.Invert {
		return false
	}
	status := uint16(v >> CtValStatusShift & CtValStatusMask)
	if m.Status.Set && (status&m.Status.Bits != 0) == m.Status.Invert {
		return false
	}
	return true
}

// ctOptions are the options of a conntrack match that decide its FieldCt
// condition, with those not given zeroed: the key of ctCache.
type ctOptions struct {
	states, status ir.CtBitsMatch
	proto          ir.CtProtoMatch
	dir            ir.CtDirection
}

// ctOptionsOf returns m's ctOptions.
func ctOptionsOf(m *ir.ConntrackMatch) ctOptions {
	o := ctOptions{states: m.States, status: m.Status, proto: m.Proto, dir: m.Dir}
	if !o.states.Set {
		o.states = ir.CtBitsMatch{}
	}
	if !o.status.Set {
		o.status = ir.CtBitsMatch{}
	}
	if !o.proto.Set {
		o.proto = ir.CtProtoMatch{}
	}
	return o
}

// maxCtCache bounds ctCache: rulesets use a handful of distinct conntrack
// matches; beyond this many, conditions are built afresh each time.
const maxCtCache = 4096

// ctCache memoises ctCondition's sets (which are never modified, so rules
// and generations share them): a ruleset of 100,000 rules has them all
// with one or two distinct matches, and building one scans 65,536 values.
// ruleTerms runs on all CPUs, hence the lock.
var ctCache struct {
	sync.Mutex
	sets map[ctOptions]*Set
}

// ctCondition returns the FieldCt keys (see ctKey) of the values m
// matches (its --ctexpire is a probe's, ctexpire.go).
func ctCondition(m *ir.ConntrackMatch) (*Set, error) {
	o := ctOptionsOf(m)
	ctCache.Lock()
	s, ok := ctCache.sets[o]
	ctCache.Unlock()
	if ok {
		return s, nil
	}
	s = buildCtSet(o)
	ctCache.Lock()
	if ctCache.sets == nil {
		ctCache.sets = map[ctOptions]*Set{}
	}
	if len(ctCache.sets) < maxCtCache {
		ctCache.sets[o] = s
	}
	ctCache.Unlock()
	return s, nil
}

// buildCtSet scans every key and collects those whose value matches o.
func buildCtSet(o ctOptions) *Set {
	m := &ir.ConntrackMatch{States: o.states, Status: o.status, Proto: o.proto, Dir: o.dir}
	s := &Set{}
	start := -1 // the first key of the interval being collected
	for k := 0; k < ctDomain; k++ {
		in := ctMatches(m, ctValueOfKey(uint32(k)))
		switch {
		case in && start < 0:
			start = k
		case !in && start >= 0:
			s.Ivs = append(s.Ivs, Interval{U64(uint64(start)), U64(uint64(k - 1))})
			start = -1
		}
	}
	if start >= 0 {
		s.Ivs = append(s.Ivs, Interval{U64(uint64(start)), U64(ctDomain - 1)})
	}
	return s
}

// The tuple options (--ctorigsrc … --ctrepldstport) test the connection's
// original tuple, which the data plane gives every packet of a connection
// in FieldCtOrigSrc, FieldCtOrigDst, FieldCtOrigSport and FieldCtOrigDport.
// Without NAT the reply tuple is the original one inverted: --ctreplsrc
// is the original destination, --ctrepldst the source (refused in a
// ruleset with NAT: nat.go). The reply tuple's ports have fields of their
// own (FieldCtReplSport, FieldCtReplDport): ICMP's are not the original
// ones swapped, and a translation changes them.
var ctTupleFields = []Field{FieldCtOrigSrc, FieldCtOrigDst, FieldCtOrigSport, FieldCtOrigDport,
	FieldCtReplSport, FieldCtReplDport}

// ctNoConnKeys and ctConnKeys split the FieldCt keys between packets
// without a connection (INVALID and UNTRACKED, which carry nothing but
// their state) and the others.
var (
	ctNoConnKeys = NewSet(Interval{U64(0), U64(0)},
		Interval{U64(uint64(CtsUntracked) << ctKeyStateShift), U64(uint64(CtsUntracked) << ctKeyStateShift)},
		Interval{U64(uint64(ctKey(CtNotrackValue))), U64(uint64(ctKey(CtNotrackValue)))})
	ctConnKeys = Complement(ctNoConnKeys, U64(0), U64(ctDomain-1))
)

// ctHasTuple reports whether m tests the connection's tuple.
func ctHasTuple(m *ir.ConntrackMatch) bool {
	return m.OrigSrc.Set || m.OrigDst.Set || m.ReplSrc.Set || m.ReplDst.Set ||
		m.OrigSrcPort.Set || m.OrigDstPort.Set || m.ReplSrcPort.Set || m.ReplDstPort.Set
}

// ctTupleConds adds m's tuple options as conditions on the tuple fields,
// as conntrack_mt compares them: an address under the option's mask (the
// kernel masks both sides, so a non-contiguous mask works as for -s), a
// port within the option's range, each "!" inverting its own test.
func ctTupleConds(fam ir.Family, m *ir.ConntrackMatch, and func(Field, *Set)) error {
	addrs := []struct {
		f Field
		a ir.AddrMatch
	}{
		{FieldCtOrigSrc, m.OrigSrc}, {FieldCtOrigDst, m.OrigDst},
		{FieldCtOrigDst, m.ReplSrc}, {FieldCtOrigSrc, m.ReplDst},
	}
	for _, x := range addrs {
		if !x.a.Set {
			continue
		}
		s, err := maskSet(fam, x.a.Addr, x.a.Mask)
		if err != nil {
			return fmt.Errorf("conntrack match: %w", err)
		}
		and(x.f, invertIf(orAll(s, fam), x.a.Invert, U64(0), addrMax(fam)))
	}
	ports := []struct {
		f Field
		p ir.PortMatch
	}{
		{FieldCtOrigSport, m.OrigSrcPort}, {FieldCtOrigDport, m.OrigDstPort},
		{FieldCtReplSport, m.ReplSrcPort}, {FieldCtReplDport, m.ReplDstPort},
	}
	for _, x := range ports {
		if x.p.Set {
			and(x.f, portSet(x.p))
		}
	}
	return nil
}
