package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The SET target (xt_set's set_target_v3) adds the packet's address to a
// set and deletes it from another, then goes on with the next rule
// (XT_CONTINUE). It is an action entry (EFAct), as MARK: a counted
// CONTINUE entry whose probe (ProbeSetTarget) the walk runs for its
// effect on the sets. The sets a generation writes are its SetWrites: the
// data plane gives each a hash table lookup after the set conditions'
// (dataplane.SetTable.Write), the one the set's matches share, and the
// probe names them by their index there.

// ProbeSetTarget's Arg: the written sets (1 + their index in SetWrites, 0:
// none) in the low two bytes, then the flags.
const (
	// SetTargetDelShift is the shift of --del-set's set in Arg (--add-set's
	// is in the low byte).
	SetTargetDelShift = 8
	// SetTargetExist is --exist.
	SetTargetExist = 1 << 16
	// SetTargetAddDst and SetTargetDelDst say the added or deleted
	// element's address is the destination (else the source).
	SetTargetAddDst = 1 << 17
	SetTargetDelDst = 1 << 18
	// SetTargetAddDst2 and SetTargetDelDst2 say the added or deleted
	// element's port (second dimension of hash:ip,port and hash:net,port)
	// is the destination's (else the source's).
	SetTargetAddDst2 = 1 << 19
	SetTargetDelDst2 = 1 << 20
	// SetTargetAddDim2 and SetTargetDelDim2 say --add-set's or
	// --del-set's flags name two dimensions or more: without, a set of two
	// dimensions takes nothing (ip_set_add and ip_set_del refuse,
	// IPSET_ERR_TYPE_MISMATCH, and the target goes on).
	SetTargetAddDim2 = 1 << 21
	SetTargetDelDim2 = 1 << 22
)

// MaxSetWrites bounds the sets one family's ruleset writes (a byte of
// ProbeSetTarget's Arg names one; the data plane has fewer lookups still).
const MaxSetWrites = 255

// setWriteIndex returns 1 + the index of set name in fl's SetWrites,
// adding it the first time.
func (fl *flattener) setWriteIndex(name string) (uint32, error) {
	for k, n := range fl.setWrites {
		if n == name {
			return uint32(k + 1), nil
		}
	}
	if len(fl.setWrites) == MaxSetWrites {
		return 0, fmt.Errorf("SET: more than %d sets written", MaxSetWrites)
	}
	fl.setWrites = append(fl.setWrites, name)
	return uint32(len(fl.setWrites)), nil
}

// SetTargetProbe returns the probe of SET target t, naming its sets by
// index (write, as flattener.setWriteIndex): Arg their indexes and the
// flags, Val the --timeout (ir.SetTimeoutDefault: the set's).
func SetTargetProbe(t *ir.SetTarget, write func(name string) (uint32, error)) (Probe, error) {
	if t == nil {
		return Probe{}, fmt.Errorf("SET target without options")
	}
	pr := Probe{Kind: ProbeSetTarget, Val: t.Timeout}
	if t.AddDirs.Dim != 0 {
		k, err := write(t.AddName)
		if err != nil {
			return pr, err
		}
		pr.Arg |= k | setTargetDirs(t.AddDirs, SetTargetAddDst, SetTargetAddDst2, SetTargetAddDim2)
		if t.Exist {
			pr.Arg |= SetTargetExist
		}
	}
	if t.DelDirs.Dim != 0 {
		k, err := write(t.DelName)
		if err != nil {
			return pr, err
		}
		pr.Arg |= k<<SetTargetDelShift | setTargetDirs(t.DelDirs, SetTargetDelDst, SetTargetDelDst2, SetTargetDelDim2)
	}
	return pr, nil
}

// setTargetDirs returns the flags of directions d: dst when the first
// dimension is the destination, dim2 when d names two dimensions or more,
// dst2 when the second is the destination.
func setTargetDirs(d ir.SetDirs, dst, dst2, dim2 uint32) uint32 {
	var f uint32
	if d.Src&1 == 0 {
		f |= dst
	}
	if d.Dim >= 2 {
		f |= dim2
		if d.Src&2 == 0 {
			f |= dst2
		}
	}
	return f
}

// setAction fills e, the entry of a SET rule: a counted CONTINUE entry
// whose probe adds to and deletes from the sets (ProbeSetTarget).
func (fl *flattener) setAction(e *Entry, t *ir.SetTarget) error {
	pr, err := SetTargetProbe(t, fl.setWriteIndex)
	if err != nil {
		return err
	}
	return fl.actionEntry(e, pr)
}

// A set match on a set the ruleset writes is asked in rule order, as the
// kernel tests the set when the rule is reached: a packet that a SET rule
// added to a set matches a later rule's --match-set of it. Such matches
// are writtenSetMatch probes (ProbeSetMatch) looking the written set's
// table up (bpf/settarget.h), not set conditions.

// ProbeSetMatch's Arg: 1 + the set's index in SetWrites in the low byte,
// then these flags.
const (
	// SetMatchDst looks the destination up (else the source).
	SetMatchDst = 1 << 8
	// SetMatchReturnNomatch is --return-nomatch.
	SetMatchReturnNomatch = 1 << 9
	// SetMatchInvert is "! --match-set".
	SetMatchInvert = 1 << 10
	// SetMatchDst2 looks the destination's port up (else the source's),
	// for a set with ports.
	SetMatchDst2 = 1 << 11
	// SetMatchDim2 says the match names two dimensions or more (without,
	// a set with ports matches nothing).
	SetMatchDim2 = 1 << 12
)

// writtenSetMatch is a set match on a set the ruleset's SET targets
// write.
type writtenSetMatch struct{ ir.SetMatch }

// ModuleName implements ir.Match.
func (*writtenSetMatch) ModuleName() string { return "set" }

// CloneMatch implements ir.Match.
func (m *writtenSetMatch) CloneMatch() ir.Match { c := *m; return &c }

// setWriteRewrite returns rs and the sets its SET targets write, in the
// order met; when there are any, rs is a copy whose set matches on them are
// writtenSetMatch.
func setWriteRewrite(rs *ir.Ruleset) (*ir.Ruleset, []string) {
	var written []string
	seen := map[string]bool{}
	anyRule(rs, func(r *ir.Rule) bool {
		if t := r.Target.Set; r.Target.Kind == ir.TargetSet && t != nil {
			for _, w := range []struct {
				name string
				on   bool
			}{{t.AddName, t.AddDirs.Dim != 0}, {t.DelName, t.DelDirs.Dim != 0}} {
				if w.on && !seen[w.name] {
					seen[w.name] = true
					written = append(written, w.name)
				}
			}
		}
		return false
	})
	if len(written) == 0 {
		return rs, nil
	}
	c := rs.Clone()
	anyRule(c, func(r *ir.Rule) bool {
		for i, m := range r.Matches {
			if sm, ok := m.(*ir.SetMatch); ok && seen[sm.Name] {
				r.Matches[i] = &writtenSetMatch{*sm}
			}
		}
		return false
	})
	return c, written
}

// writtenSetProbe returns the probe of m.
func (fl *flattener) writtenSetProbe(m *writtenSetMatch) (Probe, error) {
	if m.Packets.Op != ir.SetCounterNone || m.Bytes.Op != ir.SetCounterNone {
		return Probe{}, fmt.Errorf("set match %s: --packets-* and --bytes-* are not supported by xfw", m.Name)
	}
	k, err := fl.setWriteIndex(m.Name)
	if err != nil {
		return Probe{}, err
	}
	pr := Probe{Kind: ProbeSetMatch, Arg: k | setTargetDirs(m.Dirs, SetMatchDst, SetMatchDst2, SetMatchDim2)}
	if m.ReturnNomatch {
		pr.Arg |= SetMatchReturnNomatch
	}
	if m.Invert {
		pr.Arg |= SetMatchInvert
	}
	return pr, nil
}
