package compiler

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestWalkFields checks the order of the walk's fields: every active field
// once, the fields of more classes first (here the source addresses, then
// the destination ports), field order among equals (the protocol and the
// source port, one class each).
func TestWalkFields(t *testing.T) {
	var rules []string
	for i := 0; i < 20; i++ {
		rules = append(rules, fmt.Sprintf("-A FORWARD -p udp -s 10.0.%d.0/24 --dport %d -j ACCEPT", i, 1000+i%4))
	}
	g, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := g.WalkFields()
	want := []Field{FieldSrc, FieldDport, FieldProto, FieldSport}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("walk fields %v, want %v", got, want)
	}
	seen := map[Field]bool{}
	for _, f := range got {
		if g.Active&(1<<f) == 0 || seen[f] {
			t.Errorf("field %s: inactive or listed twice", f)
		}
		seen[f] = true
	}
	if n := bits.OnesCount32(g.Active); len(seen) != n {
		t.Errorf("%d walk fields, %d active", len(seen), n)
	}
}

// TestWalkFieldsCountsAsASet checks the class counts WalkFields orders by
// against a plain set of each field's classes, on rulesets with port
// ranges (runs of one class in a small field's domain, broken and resumed),
// addresses and a hashed field.
func TestWalkFieldsCountsAsASet(t *testing.T) {
	for name, rules := range map[string][]string{
		"ports and ranges": {
			"-A FORWARD -p tcp --sport 1000:2000 -j ACCEPT",
			"-A FORWARD -p tcp --sport 1500 -j DROP",
			"-A FORWARD -p udp --dport 53 -j ACCEPT",
			"-A FORWARD -p udp --dport 50:60 -j DROP",
			"-A FORWARD -p tcp -m multiport --dports 80,443,8080:8090 -j ACCEPT",
		},
		"addresses and marks": {
			"-A INPUT -s 10.0.0.0/8 -j ACCEPT",
			"-A INPUT -s 10.1.0.0/16 -d 192.168.0.1 -j DROP",
			"-A INPUT -m mark --mark 7 -j ACCEPT",
			"-A INPUT -m mark --mark 9 -s 10.1.2.3 -j DROP",
		},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var classes [NumFields]int
		for f := Field(0); f < NumFields; f++ {
			if g.Active&(1<<f) == 0 {
				continue
			}
			set := map[uint32]bool{}
			switch f.Kind() {
			case KindSmall:
				for _, c := range g.Small[g.SmallBase[f] : int(g.SmallBase[f])+g.SmallDomain(f)] {
					set[c] = true
				}
			case KindAddr:
				a := f.AddrIndex()
				for _, b := range g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]] {
					set[b.Class] = true
				}
			default:
				for k, c := range g.Hash {
					if k.Field == uint32(f) {
						set[c] = true
					}
				}
				set[g.DefaultClass[f]] = true
			}
			delete(set, 0)
			classes[f] = len(set)
		}
		got := g.WalkFields()
		for i := 1; i < len(got); i++ {
			if a, b := classes[got[i-1]], classes[got[i]]; a < b || (a == b && got[i-1] > got[i]) {
				t.Errorf("%s: %s (%d classes) walked before %s (%d)", name, got[i-1], a, got[i], b)
			}
		}
		if n := bits.OnesCount32(g.Active); len(got) != n {
			t.Errorf("%s: %d walk fields, %d active", name, len(got), n)
		}
	}
}
