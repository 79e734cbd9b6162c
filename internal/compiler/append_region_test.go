package compiler

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestChangeInPlaceInUserChainsMatchesCompile changes the user chains of
// random rulesets of the filter table alone in place (InsertRuleInChain,
// AppendRuleInChain, DeleteRuleInChain, several in a row, RETURN rules
// among them) and requires every resulting generation to judge random
// packets in every walk as the ruleset compiled in full does, and as the
// reference interpreter does. Changes refused are compiled in full, as
// the control plane does; most must be done in place.
func TestChangeInPlaceInUserChainsMatchesCompile(t *testing.T) {
	rng := rand.New(rand.NewSource(29))
	tally := &changeTally{}
	for iter := 0; iter < 80; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, 10+rng.Intn(30), 1+rng.Intn(3))
		// Every user chain reached, from INPUT or FORWARD (a region
		// each, or one per view).
		for _, c := range rs.Chains {
			if !c.Builtin {
				from := rs.Chain([]string{ir.ChainInput, ir.ChainForward}[rng.Intn(2)])
				from.Rules = append(from.Rules, &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: uint8(6 + 11*rng.Intn(2))},
					Target: ir.Target{Kind: ir.TargetJump, Chain: c.Name}})
			}
		}
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for step := 0; step < 1+rng.Intn(12); step++ {
			ng, ok, err := randomChainChange(rng, rs, g)
			if !ok {
				continue
			}
			g = tally.outcome(t, rs, ng, err, iter, step)
			want, err := Compile(rs, Options{Interfaces: testIfaces})
			if err != nil {
				t.Fatalf("ruleset %d step %d: %v", iter, step, err)
			}
			id := fmt.Sprintf("ruleset %d step %d", iter, step)
			sameWalks(t, rng, id, rs.Family, g, want, 150)
			sameStateRules(t, id, g, want)
			checkPackets(t, rng, iter, rs, g, 50)
		}
	}
	tally.check(t, 100)
}

// randomChainChange makes a random change of a user chain of rs, in g:
// the deletion of a rule (one time in three), or a rule inserted at its
// head or appended (a RETURN one time in five). ok is false when there
// was nothing to change.
func randomChainChange(rng *rand.Rand, rs *ir.Ruleset, g *Generation) (ng *Generation, ok bool, err error) {
	var user []*ir.Chain
	for _, c := range rs.Chains {
		if !c.Builtin {
			user = append(user, c)
		}
	}
	if len(user) == 0 {
		return nil, false, nil
	}
	chain := user[rng.Intn(len(user))]
	if len(chain.Rules) > 0 && rng.Intn(3) == 0 {
		k := rng.Intn(len(chain.Rules))
		r := chain.Rules[k]
		counter := counterIn(rs, chain, k)
		chain.Rules = append(chain.Rules[:k:k], chain.Rules[k+1:]...)
		ng, err = DeleteRuleInChain(g, r, chain.Name, counter, testIfaces)
		return ng, true, err
	}
	one := genRuleset(rng, rs.Family, 1, 0)
	var r *ir.Rule
	for _, name := range []string{ir.ChainInput, ir.ChainForward} {
		// (OUTPUT's could name an input interface.)
		if c := one.Chain(name); c != nil && len(c.Rules) == 1 {
			r = c.Rules[0]
		}
	}
	if r == nil {
		return nil, false, nil
	}
	if rng.Intn(5) == 0 {
		r.Target = ir.Target{Kind: ir.TargetReturn}
	}
	// A rule the chain cannot take where it is reached (the kernel
	// refuses the command) is left out.
	saved := chain.Rules
	chain.Rules = append([]*ir.Rule{r}, chain.Rules...)
	_, err = Compile(rs, Options{Interfaces: testIfaces})
	chain.Rules = saved
	if err != nil {
		return nil, false, nil
	}
	if rng.Intn(2) == 0 {
		chain.Rules = append([]*ir.Rule{r}, chain.Rules...)
		ng, err = InsertRuleInChain(g, r, chain.Name, counterIn(rs, chain, 0), RuleRef{Chain: chain.Name, Index: 0}, testIfaces)
	} else {
		chain.Rules = append(chain.Rules, r)
		k := len(chain.Rules) - 1
		ng, err = AppendRuleInChain(g, r, chain.Name, counterIn(rs, chain, k), RuleRef{Chain: chain.Name, Index: k}, testIfaces)
	}
	return ng, true, err
}

// TestRegionsWithSlackOnlyForFilterAlone: a ruleset with another table
// has no regions with slack, and a change of its user chain is refused
// (compiled in full).
func TestRegionsWithSlackOnlyForFilterAlone(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-N f2b-sshd", "-A f2b-sshd -j RETURN",
		"-A INPUT -p tcp --dport 22 -j f2b-sshd")
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Layout.Regions) != 1 || g.Layout.Regions[0].Chain != "f2b-sshd" {
		t.Fatalf("regions with slack %+v, want f2b-sshd's", g.Layout.Regions)
	}
	rs = parseRuleset(t, ir.IPv4, "-N f2b-sshd", "-A f2b-sshd -j RETURN",
		"-A INPUT -p tcp --dport 22 -j f2b-sshd", "-t nat -A POSTROUTING -o eth0 -j MASQUERADE")
	g, err = Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Layout.Regions) != 0 {
		t.Fatalf("regions with slack %+v beside the nat table", g.Layout.Regions)
	}
	r := &ir.Rule{Target: ir.Target{Kind: ir.TargetDrop}}
	if _, err := InsertRuleInChain(g, r, "f2b-sshd", NumChains, RuleRef{Chain: "f2b-sshd"}, testIfaces); err == nil {
		t.Error("a rule inserted in place into a chain without slack")
	}
}
