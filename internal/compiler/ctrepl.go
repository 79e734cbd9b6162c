package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// --ctreplsrc and --ctrepldst in a ruleset with NAT: the reply tuple's
// addresses are the translated ones (a DNAT's new destination is the
// replies' source, an SNAT's new source their destination), which the
// classification fields, the original tuple's, do not give. Compile
// rewrites such a conntrack match (in a copy of the ruleset) into the
// match without those two options followed by a ctReplMatch, asked by a
// probe of kind ProbeCtRepl (bpf/ctnat.h): Arg the CtRepl* bits, Val and
// Mask the source option's address and mask, Wide the destination's
// (address << 32 | mask). Both pass a packet without a connection, which
// conntrack_mt answers by its state alone (the first match's terms).

// ProbeCtRepl's Arg bits (XFW_CTREPL_*).
const (
	CtReplSrc    uint32 = 0x1
	CtReplSrcInv uint32 = 0x2
	CtReplDst    uint32 = 0x4
	CtReplDstInv uint32 = 0x8
)

// ctReplMatch is the --ctreplsrc and --ctrepldst part of a conntrack
// match in a ruleset with NAT (never printed: it lives in Compile's copy).
type ctReplMatch struct {
	Src, Dst ir.AddrMatch
}

// ModuleName is the conntrack match's.
func (m *ctReplMatch) ModuleName() string { return "conntrack" }

// CloneMatch returns a copy.
func (m *ctReplMatch) CloneMatch() ir.Match { c := *m; return &c }

// ctReplProbe returns the probe asking m.
func ctReplProbe(m *ctReplMatch) Probe {
	pr := Probe{Kind: ProbeCtRepl}
	if m.Src.Set {
		pr.Arg |= CtReplSrc
		if m.Src.Invert {
			pr.Arg |= CtReplSrcInv
		}
		// The conntrack match keeps the address as given, unmasked
		// (conntrack_addrcmp masks both sides): the probe compares a
		// masked want.
		pr.Val, pr.Mask = addr4(m.Src.Addr)&addr4(m.Src.Mask), addr4(m.Src.Mask)
	}
	if m.Dst.Set {
		pr.Arg |= CtReplDst
		if m.Dst.Invert {
			pr.Arg |= CtReplDstInv
		}
		pr.Wide = uint64(addr4(m.Dst.Addr)&addr4(m.Dst.Mask))<<32 | uint64(addr4(m.Dst.Mask))
	}
	return pr
}

// CtReplAnswer is ProbeCtRepl's answer for a packet whose FieldCt value is
// ct and whose connection's reply tuple has addresses src and dst (IPv4,
// host order).
func CtReplAnswer(pr Probe, ct, src, dst uint32) bool {
	state := uint8(ct & CtValStateMask)
	if state == CtsInvalid || state == CtsUntracked {
		return true
	}
	pass := func(a, want, mask uint32, inv bool) bool { return (a&mask == want) != inv }
	if pr.Arg&CtReplSrc != 0 && !pass(src, pr.Val, pr.Mask, pr.Arg&CtReplSrcInv != 0) {
		return false
	}
	return pr.Arg&CtReplDst == 0 || pass(dst, uint32(pr.Wide>>32), uint32(pr.Wide), pr.Arg&CtReplDstInv != 0)
}

// hasCtReplAddr reports whether m is a conntrack match with --ctreplsrc
// or --ctrepldst.
func hasCtReplAddr(m ir.Match) bool {
	ct, ok := m.(*ir.ConntrackMatch)
	return ok && (ct.ReplSrc.Set || ct.ReplDst.Set)
}

// natReplRewrite returns rs, or, when it is a ruleset with NAT and a
// conntrack match with --ctreplsrc or --ctrepldst, a copy in which each
// such match is split into the match without them and a ctReplMatch
// (asked by ctReplProbe's probe, IPv6's by ctReplProbe6's).
func natReplRewrite(rs *ir.Ruleset) *ir.Ruleset {
	if !usesNAT(rs) || !anyRule(rs, func(r *ir.Rule) bool {
		for _, m := range r.Matches {
			if hasCtReplAddr(m) {
				return true
			}
		}
		return false
	}) {
		return rs
	}
	c := rs.Clone()
	anyRule(c, func(r *ir.Rule) bool {
		var out []ir.Match
		for _, m := range r.Matches {
			if !hasCtReplAddr(m) {
				out = append(out, m)
				continue
			}
			ct := *m.(*ir.ConntrackMatch)
			repl := &ctReplMatch{Src: ct.ReplSrc, Dst: ct.ReplDst}
			ct.ReplSrc, ct.ReplDst = ir.AddrMatch{}, ir.AddrMatch{}
			out = append(out, &ct, repl)
		}
		r.Matches = out
		return false
	})
	return c
}

// anyRule reports whether fn is true for a rule of rs (any table), calling
// it on every rule until then.
func anyRule(rs *ir.Ruleset, fn func(*ir.Rule) bool) bool {
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if fn(r) {
					return true
				}
			}
		}
	}
	return false
}
