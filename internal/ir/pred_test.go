package ir

import (
	"reflect"
	"testing"
)

// TestPredicateMatchesRoundTrip checks that string, u32 and time matches
// come back from the binary form as they went in.
func TestPredicateMatchesRoundTrip(t *testing.T) {
	matches := []Match{
		&StringMatch{Algo: "kmp", Pattern: []byte("GET \x00\xff"), From: 40, To: 80, Invert: true, ICase: true},
		&StringMatch{Algo: "bm", Pattern: []byte("x"), To: StringNoTo},
		&U32Match{Invert: true, Tests: []U32Test{
			{Loc: []U32Loc{{Num: 0}, {Op: U32RightShift, Num: 22}, {Op: U32And, Num: 0x3c}, {Op: U32At, Num: 0}},
				Values: []U32Range{{Min: 1, Max: 1}, {Min: 5, Max: 0xffffffff}}},
			{Loc: []U32Loc{{Num: 6}, {Op: U32LeftShift, Num: 8}}, Values: []U32Range{{Min: 0, Max: 0}}},
		}},
		&TimeMatch{DateStart: 981173106, DateStop: TimeNoDateStop, DaytimeStart: 79200, DaytimeStop: 7200,
			Weekdays: 0x22, Monthdays: 0x3e, KernelTZ: true, Contiguous: true},
	}
	rs := NewRuleset(IPv4)
	for _, m := range matches {
		rs.Chain("INPUT").Rules = append(rs.Chain("INPUT").Rules, &Rule{Matches: []Match{m}})
	}
	for i, r := range roundTrip(t, rs).Chain("INPUT").Rules {
		if !reflect.DeepEqual(r.Matches[0], matches[i]) {
			t.Errorf("match %d: got %+v, want %+v", i, r.Matches[0], matches[i])
		}
		if c := matches[i].CloneMatch(); !reflect.DeepEqual(c, matches[i]) {
			t.Errorf("match %d: clone %+v differs", i, c)
		}
	}
}
