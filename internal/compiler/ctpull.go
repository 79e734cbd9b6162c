package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The nat table without connection tracking.
//
// The kernel's nat chains run from conntrack's hooks: nf_nat_inet_fn
// passes a packet without a connection by, and conntrack attaches one only
// while something in the network namespace asked it to track the family
// (nf_ct_netns_get). Loading the nat table does not ask it; the rules that
// need a connection do, when their table is loaded, reached or not: the
// NAT targets, CONNMARK, -m conntrack and -m state, -m connmark and
// -m connlimit (their checkentry functions). NOTRACK and CT --notrack do
// not (xt_ct_tg_check returns before it for --notrack). So a nat table
// with no NAT rule, in a ruleset with no such rule either (an empty nat
// table, a table `iptables -t nat -L` created, a table whose NAT rules
// were deleted), sees no packet: its chains count nothing and log nothing,
// and nothing is tracked. Checked with iptables-legacy: an empty nat
// table's counters stay 0 and `conntrack -L` is empty; one rule of those
// anywhere in the family's tables (also in a user chain no rule jumps to)
// makes the nat chains count; a rule of the other family does not.
//
// The compiler leaves such a nat table out of the walks (natWalked): the
// packet goes through the other tables as if it had none, and its counters
// stay in place, at zero.

// natWalked reports whether rs's nat table is walked: rs has one, and some
// rule of rs asks the kernel to track connections (pullsConntrack).
func natWalked(rs *ir.Ruleset) bool {
	nat := rs.TableByName(ir.TableNat)
	if nat == nil {
		return false
	}
	// The nat table's own NAT rules first: the usual case, found at once.
	for _, c := range nat.Chains {
		for _, r := range c.Rules {
			if pullsConntrack(r) {
				return true
			}
		}
	}
	return anyRule(rs, pullsConntrack)
}

// NatWalkChanges reports whether old and rs differ in the nat table's
// place in the walks (natWalked): a change of one rule that makes the nat
// table walked or leaves it out needs a compile in full, as one that adds
// or removes a table does.
func NatWalkChanges(old, rs *ir.Ruleset) bool {
	return natWalked(old) != natWalked(rs)
}

// pullsConntrack reports whether loading rule r makes the kernel track
// connections of its family in the network namespace (nf_ct_netns_get in
// its match's or target's checkentry).
func pullsConntrack(r *ir.Rule) bool {
	switch r.Target.Kind {
	case ir.TargetDNAT, ir.TargetSNAT, ir.TargetMasquerade, ir.TargetRedirect, ir.TargetConnmark:
		return true
	}
	for _, m := range r.Matches {
		switch m.(type) {
		case *ir.ConntrackMatch, *ir.ConnmarkMatch, *ir.ConnlimitMatch:
			return true
		}
	}
	return false
}
