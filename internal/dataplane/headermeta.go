package dataplane

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// A generation's IPv6 extension header and transport header conditions
// (compiler.Generation Ext6Conds, Hdr4Conds), kept with its metadata for
// the read-back of an in-place change (RunningGeneration): the matches as
// the INPUT rules of an encoded ruleset (ir's binary form, which holds
// every match), one rule per condition — the extension header ones first,
// then the transport header ones, a --tcp-option condition's rule without
// a match — and each transport header condition's kind and option.

// headerMeta is the kept form of a generation's header conditions.
type headerMeta struct {
	// Rules is the encoded ruleset.
	Rules []byte
	// Ext6 is how many of its rules are extension header conditions.
	Ext6 int
	// Hdr4 are the transport header conditions' other fields, in order.
	Hdr4 []hdr4Meta `json:",omitempty"`
}

// hdr4Meta is a transport header condition's fields besides its match.
type hdr4Meta struct {
	Kind   int
	Option uint8 `json:",omitempty"`
	Invert bool  `json:",omitempty"`
}

// headerMetaOf returns g's header conditions in their kept form, nil when
// it has none.
func headerMetaOf(g *compiler.Generation) (*headerMeta, error) {
	ext6, hdr4 := g.Ext6Conds(), g.Hdr4Conds()
	if len(ext6)+len(hdr4) == 0 {
		return nil, nil
	}
	rs := ir.NewRuleset(g.Family)
	in := rs.Chains[0]
	for _, m := range ext6 {
		in.Rules = append(in.Rules, &ir.Rule{Matches: []ir.Match{m}})
	}
	hm := &headerMeta{Ext6: len(ext6)}
	for _, c := range hdr4 {
		r := &ir.Rule{}
		if c.Match != nil {
			r.Matches = []ir.Match{c.Match}
		}
		in.Rules = append(in.Rules, r)
		hm.Hdr4 = append(hm.Hdr4, hdr4Meta{Kind: c.Kind, Option: c.Option, Invert: c.Invert})
	}
	b, err := rs.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode header conditions: %w", err)
	}
	hm.Rules = b
	return hm, nil
}

// restore gives g the conditions hm keeps.
func (hm *headerMeta) restore(g *compiler.Generation) error {
	rs, err := ir.UnmarshalRuleset(hm.Rules)
	if err != nil {
		return fmt.Errorf("decode header conditions: %w", err)
	}
	rules := rs.Chains[0].Rules
	if hm.Ext6 < 0 || len(rules) != hm.Ext6+len(hm.Hdr4) {
		return fmt.Errorf("header conditions: %d rules for %d + %d conditions", len(rules), hm.Ext6, len(hm.Hdr4))
	}
	var ext6 []ir.Match
	for _, r := range rules[:hm.Ext6] {
		if len(r.Matches) != 1 {
			return fmt.Errorf("header conditions: an extension header condition with %d matches", len(r.Matches))
		}
		ext6 = append(ext6, r.Matches[0])
	}
	var hdr4 []compiler.Hdr4Cond
	for i, r := range rules[hm.Ext6:] {
		c := compiler.Hdr4Cond{Kind: hm.Hdr4[i].Kind, Option: hm.Hdr4[i].Option, Invert: hm.Hdr4[i].Invert}
		if len(r.Matches) > 1 {
			return fmt.Errorf("header conditions: a transport header condition with %d matches", len(r.Matches))
		}
		if len(r.Matches) == 1 {
			c.Match = r.Matches[0]
		}
		hdr4 = append(hdr4, c)
	}
	g.SetHeaderConds(ext6, hdr4)
	return nil
}
