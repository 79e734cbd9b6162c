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
