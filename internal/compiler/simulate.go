package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// Packet is the data plane's view of a packet (struct xfw_pkt's field
// values, sentinels included), for simulating a generation in user space.
type Packet struct {
	Src, Dst U128
	// Field values as the BPF parser produces them.
	Proto, Sport, Dport, TCPFlags, ICMP, Frag, Len, TTL uint32
	IIF, OIF                                            uint32
	// PhysIn and PhysOut are the bridge ports (FieldPhysIn,
	// FieldPhysOut; physdev.go): 0 (PhysNone) for a packet without
	// bridge information.
	PhysIn, PhysOut uint32
	MAC             uint64
	// Sets are the set-membership bits (FieldSets): bit k is whether the
	// packet matches the generation's set condition k, as the data plane
	// computes it by looking the packet up in the set (see
	// Generation.SetBits for computing them from a membership test).
	Sets uint32
	// Ct is the packet's connection-tracking facts (FieldCt), as CtValue
	// packs them.
	Ct uint32
	// CtOrigSrc, CtOrigDst, CtOrigSport and CtOrigDport are the original
	// tuple of the packet's connection (zero without a connection).
	CtOrigSrc, CtOrigDst     U128
	CtOrigSport, CtOrigDport uint32
	// CtReplSport and CtReplDport are the reply tuple's ports.
	CtReplSport, CtReplDport uint32
	// Limit decides the limit probes the walk meets: whether bucket k
	// (Generation.Limits) gives the packet a token. Nil: every one does.
	Limit func(k int) bool
	// Recent answers the recent probes the walk meets (RecentAnswer).
	Recent RecentAnswer
	// HashLimit decides the hashlimit probes the walk meets: whether
	// match k (Generation.HashLimits) is true for the packet. Nil: every
	// one is. (A full table's hotdrop is not simulated.)
	HashLimit func(k int) bool
	// Connlimit decides the connlimit probes the walk meets: whether the
	// match whose ConnlimitArg is arg holds for the packet. Nil: every
	// one does.
	Connlimit func(arg uint32) bool
	// CtExpire decides the --ctexpire probes: whether the packet's
	// connection expires within CtExpires[k]. Nil: every one does.
	CtExpire func(k int) bool
	// CPU is the CPU processing the packet (the cpu match).
	CPU uint32
	// AddrType is the route-type facts of the addresses (FieldAddrType,
	// packed as terms_type.go describes), PktType the packet type
	// (FieldPktType).
	AddrType, PktType uint32
	// TOS is the TOS / traffic class byte (FieldTOS), TCPMSS the MSS
	// option's value or sentinel (FieldTCPMSS).
	TOS, TCPMSS uint32
	// Hdr4 is the transport header conditions' answers (FieldHdr4,
	// terms_hdr4.go).
	Hdr4 uint32
	// Ext6 is the answers of the IPv6 extension header conditions
	// (FieldExt6, terms_ip6ext.go).
	Ext6 uint32
	// Preds are the answers of the generation's predicates
	// (Generation.Preds): bit k is predicate k's, as the data plane
	// evaluates it at the hook.
	Preds uint64
	// Mark is the packet's mark, as the walk has it: MARK entries
	// change it, mark probes read it.
	Mark uint32
	// Statistic decides the statistic probes the walk meets. Nil: every
	// one matches.
	Statistic func(pr Probe) bool
	// CtMark is the mark of the packet's connection (none without one):
	// CONNMARK entries change it, connmark probes read it.
	CtMark uint32
	// Owner is what the TC egress hook read of the packet's socket (the
	// owner match; nothing at XDP).
	Owner SocketOwner
	// CtSNAT and CtDNAT say whether the packet's connection has its
	// source or destination translated (--ctstate SNAT, DNAT).
	CtSNAT, CtDNAT bool
	// CtReplSrc and CtReplDst are its reply tuple's IPv4 addresses (host
	// order), translations included (--ctreplsrc, --ctrepldst with NAT).
	CtReplSrc, CtReplDst uint32
	// CtReplSrc6 and CtReplDst6 are an IPv6 connection's (nat6.go).
	CtReplSrc6, CtReplDst6 U128
}

// probe answers probe pr for the packet, as the data plane's evaluator
// of its kind would (bpf/probe.h).
func (p *Packet) probe(g *Generation, pr Probe) bool {
	switch pr.Kind {
	case ProbeLimit:
		return p.Limit == nil || p.Limit(int(pr.Arg))
	case ProbeRecent:
		k := int(pr.Arg &^ RecentArgForward)
		if k >= len(g.Recents) {
			return false
		}
		if p.Recent == nil {
			return recentEmpty(&g.Recents[k].RecentMatch)
		}
		return p.Recent(k, &g.Recents[k].RecentMatch)
	case ProbeHashLimit:
		return p.HashLimit == nil || p.HashLimit(int(pr.Arg))
	case ProbePred:
		return p.Preds>>pr.Arg&1 != 0
	case ProbeConnlimit:
		return p.Connlimit == nil || p.Connlimit(pr.Arg)
	case ProbeCtExpire:
		return p.CtExpire == nil || p.CtExpire(int(pr.Arg))
	case ProbeCPU:
		return (p.CPU == pr.Arg&(cpuInvertBit-1)) != (pr.Arg&cpuInvertBit != 0)
	case ProbeMarkMoved:
		return false // the model routes once: the walk goes on
	case ProbeSetTarget:
		return true // the model holds no sets: the action goes on
	case ProbeSetMatch:
		// The model holds no sets: the written set is empty.
		return pr.Arg&SetMatchInvert != 0
	}
	if pr.Kind == ProbeConnmark || pr.Kind == ProbeSetConnmark {
		return p.connmarkAnswer(pr)
	}
	if pr.Kind == ProbeOwner {
		return OwnerAnswer(pr, p.Owner)
	}
	if pr.Kind == ProbeMangle {
		return p.mangleAnswer(pr)
	}
	if pr.Kind == ProbeCtNat {
		return CtNatAnswer(pr, p.Ct, p.CtSNAT, p.CtDNAT)
	}
	if pr.Kind == ProbeCtRepl && g.Family != ir.IPv4 {
		return CtReplAnswer6(g, pr, p.Ct, p.CtReplSrc6, p.CtReplDst6)
	}
	if pr.Kind == ProbeCtRepl {
		return CtReplAnswer(pr, p.Ct, p.CtReplSrc, p.CtReplDst)
	}
	return p.markAnswer(pr)
}

// hotdropBits returns the packet's defects as EFHotdrop* bits, as the BPF
// parser derives them.
func (p *Packet) hotdropBits() uint8 {
	var b uint8
	if p.Proto == ProtoErr {
		b |= EFHotdropProto
	}
	if p.Sport == ValTrunc || p.Sport >= ValShort || p.ICMP == ValTrunc || p.TCPFlags == FlagsTrunc {
		b |= EFHotdropL4
	}
	return b
}

// Result is the outcome of classifying a packet in a chain.
type Result struct {
	// Entry is the terminal entry's index, or -1 for the policy or a
	// hotdrop. A hotdrop is either Hotdrop (a flagged rule entry) or a
	// terminal DROP entry of no rule (NoRule).
	Entry   int
	Hotdrop bool
	// Path lists the CONTINUE entries met on the way (counted, logged).
	Path []int
}

// FieldValue returns the packet's value of field f, as the data plane
// looks it up.
func (p *Packet) FieldValue(f Field) U128 {
	switch f {
	case FieldSrc:
		return p.Src
	case FieldDst:
		return p.Dst
	case FieldProto:
		return U64(uint64(p.Proto))
	case FieldSport:
		return U64(uint64(p.Sport))
	case FieldDport:
		return U64(uint64(p.Dport))
	case FieldTCPFlags:
		return U64(uint64(p.TCPFlags))
	case FieldICMP:
		return U64(uint64(p.ICMP))
	case FieldIIF:
		return U64(uint64(p.IIF))
	case FieldOIF:
		return U64(uint64(p.OIF))
	case FieldFrag:
		return U64(uint64(p.Frag))
	case FieldLen:
		return U64(uint64(p.Len))
	case FieldTTL:
		return U64(uint64(p.TTL))
	case FieldMAC:
		return U64(p.MAC)
	case FieldSets:
		return U64(uint64(p.Sets))
	case FieldCtOrigSrc:
		return p.CtOrigSrc
	case FieldCtOrigDst:
		return p.CtOrigDst
	case FieldCtOrigSport:
		return U64(uint64(p.CtOrigSport))
	case FieldCtOrigDport:
		return U64(uint64(p.CtOrigDport))
	case FieldCtReplSport:
		return U64(uint64(p.CtReplSport))
	case FieldCtReplDport:
		return U64(uint64(p.CtReplDport))
	case FieldCt:
		return U64(uint64(p.Ct))
	case FieldAddrType:
		return U64(uint64(p.AddrType))
	case FieldPktType:
		return U64(uint64(p.PktType))
	case FieldTOS:
		return U64(uint64(p.TOS))
	case FieldTCPMSS:
		return U64(uint64(p.TCPMSS))
	case FieldExt6:
		return U64(uint64(p.Ext6))
	case FieldHdr4:
		return U64(uint64(p.Hdr4))
	case FieldPhysIn:
		return U64(uint64(p.PhysIn))
	case FieldPhysOut:
		return U64(uint64(p.PhysOut))
	}
	return U128{}
}

// classOf resolves field f of the packet the way the data plane does: the
// direct array, the binary search over bounds, or the hash with its default.
func (g *Generation) classOf(p *Packet, f Field) uint32 {
	v := p.FieldValue(f)
	switch f.Kind() {
	case KindSmall:
		v = g.portView(f, v)
		if v.Hi != 0 || v.Lo >= uint64(g.SmallDomain(f)) {
			return 0
		}
		return g.Small[int(g.SmallBase[f])+int(v.Lo)]
	case KindAddr:
		a := f.AddrIndex()
		bounds := g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]]
		lo, hi := 0, len(bounds)-1
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if !v.Less(bounds[mid].Value) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return bounds[lo].Class
	default:
		if c, ok := g.Hash[HashKey{Field: uint32(f), Value: v.Lo}]; ok {
			return c
		}
		return g.DefaultClass[f]
	}
}

// Classify runs chain (ChainInput…) for p exactly as the BPF search does:
// same tables, same word-by-word walk. It is the user-space twin used by
// tests, debugging dumps and the per-packet cost model.
func (g *Generation) Classify(p *Packet, chain int) Result {
	res := Result{Entry: -1}
	var cls [NumFields]uint32
	for f := Field(0); f < NumFields; f++ {
		if g.Active&(1<<uint(f)) == 0 {
			continue
		}
		cls[f] = g.classOf(p, f)
		if cls[f] == 0 {
			return res
		}
	}
	pos, end := g.Walk(chain)
	baseEnd := end
	var stack []uint32 // the CALLs' return positions (regions.go)
	unwinding := false // an ACCEPT left the regions (ActUnwind)
	chunkOf := func(f Field, c uint32) *Chunk {
		id := g.ClassChunks.At(cls[f], c)
		if id == 0 {
			return nil
		}
		return &g.Chunks[id]
	}
	for steps := uint32(0); steps < g.MaxIters; steps++ {
		if pos >= end {
			return res
		}
		c := pos / ChunkBits
		summ := ^uint64(0)
		for f := Field(0); f < NumFields; f++ {
			if g.Active&(1<<uint(f)) == 0 {
				continue
			}
			ch := chunkOf(f, c)
			if ch == nil {
				summ = 0
				break
			}
			summ &= ch.Summary
		}
		j := (pos % ChunkBits) / 64
		summ &= ^uint64(0) << j
		if summ == 0 {
			pos = (c + 1) * ChunkBits
			continue
		}
		if tz := uint32(ctz(summ)); tz != j {
			pos = c*ChunkBits + tz*64
			continue
		}
		w := ^uint64(0) << (pos % 64)
		for f := Field(0); f < NumFields; f++ {
			if g.Active&(1<<uint(f)) == 0 {
				continue
			}
			ch := chunkOf(f, c)
			if ch == nil {
				w = 0
				break
			}
			w &= ch.Words[j]
		}
		if w == 0 {
			pos = c*ChunkBits + (j+1)*64
			continue
		}
		e := c*ChunkBits + j*64 + uint32(ctz(w))
		if e >= end {
			return res
		}
		ent := &g.Entries[e]
		if ent.Flags&p.hotdropBits() != 0 {
			res.Hotdrop = true
			return res
		}
		switch ent.Action {
		case ActContinue, ActReroute: // Next: the entry after it
		case ActCall:
			if len(stack) >= MaxCalls {
				res.Hotdrop = true
				return res
			}
			ret := e + 1
			if ent.Aux == CallExitNext {
				ret |= retPastExit
			}
			stack, end = append(stack, ret), uint32(len(g.Entries))
		case ActReturn:
			if len(stack) == 0 {
				res.Hotdrop = true // never emitted (xfw_return)
				return res
			}
			ret := stack[len(stack)-1]
			pos, stack = ret&^retPastExit+ret>>31, stack[:len(stack)-1]
			if len(stack) == 0 {
				end = baseEnd
			}
			continue
		case ActUnwind:
			if len(stack) == 0 {
				res.Hotdrop = true // never emitted (xfw_unwind)
				return res
			}
			res.Path = append(res.Path, int(e))
			pos, stack, end, unwinding = stack[0]&^retPastExit, stack[:0], baseEnd, true
			continue
		case ActExit:
			pos = e + 1
			if unwinding {
				pos, unwinding = ent.Next, false
			}
			continue
		default:
			res.Entry = int(e)
			return res
		}
		res.Path = append(res.Path, int(e))
		pos = ent.Next
		if ent.Flags&EFAct != 0 {
			p.probe(g, g.Probes[ent.Aux])
			// A rewrite (mangle.go): the data plane looks the
			// changed field's class up again.
			for f := Field(0); f < NumFields; f++ {
				if g.Active&(1<<uint(f)) != 0 {
					cls[f] = g.classOf(p, f)
				}
			}
		}
		if ent.Flags&EFProbe != 0 && p.probe(g, g.Probes[ent.Aux]) {
			pos = e + 1 // the probe says true: on to the rule
		}
	}
	return res
}

func ctz(x uint64) int {
	n := 0
	for x&1 == 0 && n < 64 {
		x >>= 1
		n++
	}
	return n
}
