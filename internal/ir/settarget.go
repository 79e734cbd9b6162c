package ir

// SetTarget is the SET target (xt_set_info_target_v3 without --map-set,
// which xfw refuses): the packet's parts in the directions given are added
// to the set AddName and deleted from the set DelName. The rule does not
// terminate (XT_CONTINUE).
type SetTarget struct {
	// AddName and AddDirs are --add-set NAME FLAGS (AddDirs.Dim 0: none).
	AddName string
	AddDirs SetDirs
	// DelName and DelDirs are --del-set NAME FLAGS (DelDirs.Dim 0: none).
	DelName string
	DelDirs SetDirs
	// Exist is --exist: an element already in the set gets its timeout
	// refreshed (IPSET_FLAG_EXIST).
	Exist bool
	// Timeout is --timeout in seconds, SetTimeoutDefault when not given
	// (the set's own default timeout applies).
	Timeout uint32
}

// SetTimeoutDefault is SetTarget.Timeout when --timeout was not given
// (the kernel's IPSET_NO_TIMEOUT, UINT32_MAX).
const SetTimeoutDefault = ^uint32(0)

// setTarget writes a target's SET options: a presence byte, then the
// fields.
func (e *encoder) setTarget(t *SetTarget) {
	if t == nil {
		e.u8(0)
		return
	}
	e.u8(1 | packBools(false, t.Exist)) // bit 0: present
	e.str(t.AddName)
	e.u8(t.AddDirs.Dim)
	e.u8(t.AddDirs.Src)
	e.str(t.DelName)
	e.u8(t.DelDirs.Dim)
	e.u8(t.DelDirs.Src)
	e.uv(uint64(t.Timeout))
}

// setTarget decodes what encoder.setTarget wrote.
func (d *decoder) setTarget() *SetTarget {
	const presentExist = 2 // the Exist bit beside the presence bit
	f := d.u8()
	if f&1 == 0 {
		return nil
	}
	t := &SetTarget{Exist: f&presentExist != 0}
	t.AddName = d.str()
	t.AddDirs = SetDirs{Dim: d.u8(), Src: d.u8()}
	t.DelName = d.str()
	t.DelDirs = SetDirs{Dim: d.u8(), Src: d.u8()}
	t.Timeout = d.u32()
	return t
}

// setTargetUses counts the SET targets' --add-set and --del-set of set
// (any set when "") in every table of rs: each holds a reference to its
// set, as the kernel's set_target_v3_checkentry takes one.
func (rs *Ruleset) setTargetUses(set string) int {
	n := 0
	for _, t := range append([]*Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				st := r.Target.Set
				if r.Target.Kind != TargetSet || st == nil {
					continue
				}
				if st.AddDirs.Dim != 0 && (set == "" || st.AddName == set) {
					n++
				}
				if st.DelDirs.Dim != 0 && (set == "" || st.DelName == set) {
					n++
				}
			}
		}
	}
	return n
}
