package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The conntrack match's --ctexpire MIN[:MAX] (conntrack_mt): the seconds
// left before the packet's connection expires, as nf_ct_expires computes
// them after the packet refreshed the connection, compared with an
// inclusive range. The answer depends on the time, so it is no
// classification field: a conntrack match with --ctexpire is asked by a
// probe of kind ProbeCtExpire, whose Arg indexes Generation.CtExpires
// (bpf/ctexpire.h); the match's other options stay the rule's terms
// (FieldCt and the tuple fields). A packet without a connection passes
// the probe: conntrack_mt answers for it by its state alone, before it
// reads the expiry, which the rule's terms already decide.

// CtExpire is one --ctexpire of a generation (struct xfw_ctexpire).
type CtExpire struct {
	Min, Max uint32
	Invert   bool
}

// MaxCtExpires bounds the --ctexpire options of a generation (the slots of
// bpf/ctexpire.h's table per generation).
const MaxCtExpires = 256

// ctExpireIndex returns the index in the generation's CtExpires of the
// --ctexpire of match i (m) of rule r, numbered in the order flattening
// meets them.
func (fl *flattener) ctExpireIndex(r *ir.Rule, i int, m *ir.ConntrackMatch) (int, error) {
	k, err := fl.ctExpires.index(r, i, MaxCtExpires, "conntrack matches with --ctexpire", func() CtExpire {
		return CtExpire{Min: m.Expire.Min, Max: m.Expire.Max, Invert: m.Expire.Invert}
	})
	return int(k), err
}
