package ir

import (
	"reflect"
	"testing"
)

// TestConnmarkRoundTrip checks that connmark matches and the CONNMARK
// target come back from the binary form as they went in, and that Clone
// copies the target's values.
func TestConnmarkRoundTrip(t *testing.T) {
	rules := []*Rule{
		{Matches: []Match{&ConnmarkMatch{Value: 0x10, Mask: 0xff, Invert: true}}},
		{Matches: []Match{&OwnerMatch{UIDMin: 1, UIDMax: 4294967294, GIDMin: 7, GIDMax: 7,
			Match: OwnerUID | OwnerGID | OwnerSocket | OwnerSupplGroups, Invert: OwnerUID | OwnerSocket}}},
		{Matches: []Match{&DevGroupMatch{SrcGroup: 1, SrcMask: 0xf, DstGroup: 0xffffffff, DstMask: 3,
			Flags: DevGroupMatchSrc | DevGroupMatchDst | DevGroupInvertDst}}},
		{Target: Target{Kind: TargetConnmark, Connmark: &ConnmarkTarget{Mode: ConnmarkSet, CtMark: 5, CtMask: 0xf, NfMask: 0xffffffff}}},
		{Target: Target{Kind: TargetConnmark, Connmark: &ConnmarkTarget{Mode: ConnmarkSave, CtMask: 1, NfMask: 1, ShiftBits: 8}}},
		{Matches: []Match{&ConnmarkMatch{Value: 1, Mask: 1}},
			Target: Target{Kind: TargetConnmark, Connmark: &ConnmarkTarget{Mode: ConnmarkRestore, CtMask: 0xff0000, NfMask: 0xff, ShiftRight: true, ShiftBits: 16}}},
	}
	rs := NewRuleset(IPv6)
	rs.Chain("INPUT").Rules = rules
	for i, r := range roundTrip(t, rs).Chain("INPUT").Rules {
		if len(rules[i].Matches) > 0 && !reflect.DeepEqual(r.Matches, rules[i].Matches) {
			t.Errorf("rule %d: matches %+v, want %+v", i, r.Matches, rules[i].Matches)
		}
		if !reflect.DeepEqual(r.Target, rules[i].Target) {
			t.Errorf("rule %d: target %+v, want %+v", i, r.Target, rules[i].Target)
		}
		c := rules[i].Clone()
		if !reflect.DeepEqual(c.Target, rules[i].Target) || (c.Target.Connmark != nil && c.Target.Connmark == rules[i].Target.Connmark) {
			t.Errorf("rule %d: clone's target %+v is not a copy", i, c.Target)
		}
	}
}
