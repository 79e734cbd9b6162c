package ir

import (
	"fmt"
	"testing"
)

// TestChainIndex: Chain, and a ChainFinder taken before the changes,
// find what a scan of Chains finds after each way the slice changes.
func TestChainIndex(t *testing.T) {
	scan := func(rs *Ruleset, name string) *Chain {
		for _, c := range rs.Chains {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
	rs := NewRuleset(IPv4)
	for i := 0; i < 5; i++ {
		rs.Chains = append(rs.Chains, &Chain{Name: fmt.Sprint("u", i)})
	}
	other := NewRuleset(IPv4)
	other.Chains = append(other.Chains, &Chain{Name: "o"})
	steps := []struct {
		name   string
		change func()
	}{
		{"built", func() {}},
		{"append", func() { rs.Chains = append(rs.Chains, &Chain{Name: "new"}) }},
		{"delete middle", func() { rs.Chains = append(rs.Chains[:4], rs.Chains[5:]...) }},
		{"delete then append", func() {
			rs.Chains = append(rs.Chains[:3], rs.Chains[4:]...)
			rs.Chains = append(rs.Chains, &Chain{Name: "later"})
		}},
		{"rename", func() { rs.RenameChain(rs.Chain("u2"), "renamed") }},
		{"swap", func() { rs.Chains[3], rs.Chains[4] = rs.Chains[4], rs.Chains[3] }},
		{"copy", func() { *rs = *other }},
	}
	find := rs.ChainFinder()
	names := []string{"INPUT", "OUTPUT", "u0", "u1", "u2", "u3", "u4", "new", "later", "renamed", "o", "none"}
	for _, st := range steps {
		st.change()
		for _, n := range names {
			if got, want := rs.Chain(n), scan(rs, n); got != want {
				t.Errorf("after %s: Chain(%q) = %v, want %v", st.name, n, got, want)
			}
			if got, want := find(n), scan(rs, n); got != want {
				t.Errorf("after %s: ChainFinder()(%q) = %v, want %v", st.name, n, got, want)
			}
		}
	}
}
