package ir

import (
	"reflect"
	"testing"
)

// TestMarkStatisticRoundTrip checks that statistic and mark matches and
// the MARK target come back from the binary form as they went in.
func TestMarkStatisticRoundTrip(t *testing.T) {
	rules := []*Rule{
		{Matches: []Match{&StatisticMatch{Mode: StatisticRandom, Probability: 0x80000000, Invert: true}}},
		{Matches: []Match{&StatisticMatch{Mode: StatisticNth, Every: 0xfffffffe, Packet: 7}}},
		{Matches: []Match{&MarkMatch{Value: 0x4000, Mask: 0x4000, Invert: true}}},
		{Target: Target{Kind: TargetMark, Mark: MarkTarget{Value: 0x4000, Mask: 0x4000}}},
		{Target: Target{Kind: TargetMark, Mark: MarkTarget{Value: 0, Mask: 0xffffff00}},
			Matches: []Match{&MarkMatch{Value: 1, Mask: 0xffffffff}}},
	}
	rs := NewRuleset(IPv4)
	rs.Chain("INPUT").Rules = rules
	for i, r := range roundTrip(t, rs).Chain("INPUT").Rules {
		if !reflect.DeepEqual(r.Matches, rules[i].Matches) && len(rules[i].Matches) > 0 {
			t.Errorf("rule %d: matches %+v, want %+v", i, r.Matches, rules[i].Matches)
		}
		if r.Target != rules[i].Target {
			t.Errorf("rule %d: target %+v, want %+v", i, r.Target, rules[i].Target)
		}
		if c := rules[i].Clone(); len(c.Matches) != len(rules[i].Matches) || c.Target != rules[i].Target {
			t.Errorf("rule %d: clone differs", i)
		}
	}
}

// roundTrip returns rs encoded and decoded again.
func roundTrip(t *testing.T, rs *Ruleset) *Ruleset {
	t.Helper()
	b, err := rs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalRuleset(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
