package ir

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// TestEncodedSizeEstimate checks that the encoder's first buffer holds a
// ruleset whose rules are mostly in another table than filter (as
// kube-proxy's, in nat) with rules of its size: the binary form is made
// without growing the buffer by copies, and decodes to the same ruleset.
func TestEncodedSizeEstimate(t *testing.T) {
	rs := NewRuleset(IPv4)
	nat := rs.EnsureTable(TableNat)
	for i := 0; i < 1000; i++ {
		c := &Chain{Name: fmt.Sprintf("KUBE-SEP-%016X", i), Policy: VerdictNone}
		c.Rules = append(c.Rules, &Rule{
			Src:     AddrMatch{Set: true, Addr: netip.MustParseAddr("10.244.1.7"), Mask: netip.MustParseAddr("255.255.255.255")},
			Matches: []Match{&CommentMatch{Text: fmt.Sprintf("default/svc-%d:http", i)}},
			Target:  Target{Kind: TargetJump, Chain: "KUBE-MARK-MASQ"},
		})
		nat.Chains = append(nat.Chains, c)
	}
	want := rs.encodedSizeEstimate()
	b, err := rs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if cap(b) != want || len(b) < want/2 {
		t.Errorf("binary form of %d bytes in a buffer of %d, estimate %d: grown by copies, or the estimate far too large", len(b), cap(b), want)
	}
	back, err := UnmarshalRuleset(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rs) {
		t.Error("the decoded ruleset differs")
	}
}
