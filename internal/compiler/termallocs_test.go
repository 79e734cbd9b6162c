package compiler

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestUDPRuleTermsAllocations pins what one 5-tuple udp rule's terms
// allocate in a builder that has built one before (precomputeTerms'
// workers build 100,000 such rules each compile at 100K filter rules):
// the source's and the destination's sets (one allocation each, the set
// with its interval) and the port sets and hotdrop unions, and no array
// for the hotdrop term, which the rule's own term array takes. The base
// of this test allocated 3 more: a one-term array per hotdrop point (34 MB
// of garbage a 100K compile) and a second allocation per address set.
func TestUDPRuleTermsAllocations(t *testing.T) {
	// As measured when the test was written (its base: 13).
	const udpRuleTermsAllocs = 10
	rule := func(i int) *ir.Rule {
		return &ir.Rule{
			Src:     ir.AddrMatch{Set: true, Addr: netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)}), Mask: netip.AddrFrom4([4]byte{255, 255, 255, 255})},
			Dst:     ir.AddrMatch{Set: true, Addr: netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), Mask: netip.AddrFrom4([4]byte{255, 255, 255, 255})},
			Proto:   ir.ProtoMatch{Set: true, Num: 17, Spelling: "udp"},
			Matches: []ir.Match{&ir.UDPMatch{SrcPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: uint16(1024 + i), Last: uint16(1024 + i)}}, DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 53, Last: 53}}}},
			Target:  ir.Target{Kind: ir.TargetAccept},
		}
	}
	var b termBuilder
	if _, err := b.ruleTerms(ir.IPv4, rule(0), nil, nil); err != nil {
		t.Fatal(err)
	}
	r := rule(1)
	var terms []term
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if terms, err = b.ruleTerms(ir.IPv4, r, nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	if len(terms) != 1 {
		t.Fatalf("%d terms, want 1 (the hotdrop term merged into the rule's)", len(terms))
	}
	t.Logf("%v allocations a rule", allocs)
	if allocs > udpRuleTermsAllocs {
		t.Errorf("one udp rule's terms allocate %v times, at most %d expected", allocs, udpRuleTermsAllocs)
	}
}
