package iptables

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestValidateReportsInIptablesOrder: when several rules fail the
// kernel's checks, the one reported is the first in iptables' order (the
// built-in chains, then the user chains sorted by name), whatever order
// the chains were declared in; validate checks in declaration order first
// and only looks for that first failure when there is one.
func TestValidateReportsInIptablesOrder(t *testing.T) {
	// tcp without -p tcp: EINVAL; a limit too fast for the kernel: ERANGE.
	einval := "-m tcp --dport 80 -j ACCEPT"
	erange := "-m limit --limit 1/day --limit-burst 10 -j ACCEPT"
	for _, tc := range []struct {
		name  string
		input string
	}{
		{"user chains declared unsorted", "*filter\n:b - [0:0]\n:a - [0:0]\n-A b " + einval + "\n-A a " + erange + "\nCOMMIT\n"},
		{"user chains declared sorted", "*filter\n:a - [0:0]\n:b - [0:0]\n-A b " + einval + "\n-A a " + erange + "\nCOMMIT\n"},
		{"built-in before user", "*filter\n:a - [0:0]\n-A a " + erange + "\n-A INPUT " + einval + "\nCOMMIT\n"},
		{"one failure", "*filter\n:z - [0:0]\n:a - [0:0]\n-A a -j ACCEPT\n-A z " + einval + "\nCOMMIT\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := parseTable(t, tc.input)
			got, want := validate(table), validateInOrder(t, table)
			if got == nil || want == nil || got.msg != want.msg {
				t.Fatalf("validate: %v, want the failure of the first rule in iptables' order: %v", got, want)
			}
		})
	}
}

// parseTable runs input's lines up to COMMIT and returns the table they
// built, unchecked.
func parseTable(t *testing.T, input string) *ir.Ruleset {
	t.Helper()
	r := &restorer{fam: ir.IPv4, prog: restoreProgramName(ir.IPv4), base: func(ir.Skip) (*ir.Ruleset, error) { return nil, nil }}
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.SplitAfter(input, "\n") {
		if l == "COMMIT\n" {
			break
		}
		if err := r.process(&readLine{chunk: l}); err != nil {
			t.Fatal(err)
		}
	}
	return r.table
}

// validateInOrder checks table's rules one by one in iptables' order: the
// failure validate must report.
func validateInOrder(t *testing.T, table *ir.Ruleset) *failure {
	t.Helper()
	hooks, f := chainHooks(table)
	if f != nil {
		t.Fatal(f.msg)
	}
	return firstFailureInOrder(table, hooks)
}

// TestJumpGraphLookupAgreesWithIndex: the graph's lookups through its
// recent slots find what its index holds, for names that share slots,
// missing names and the empty name, in any order.
func TestJumpGraphLookupAgreesWithIndex(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	rs.Table = "nat"
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("KUBE-SEP-%04dQ", i), fmt.Sprintf("C%d", i))
	}
	for _, n := range names[:400] {
		rs.Chains = append(rs.Chains, &ir.Chain{Name: n})
	}
	names = append(names, "", "KUBE-MARK-MASQ", "none")
	g := newJumpGraph(rs)
	rnd := rand.New(rand.NewSource(5))
	for range 20000 {
		n := names[rnd.Intn(len(names))]
		want, wantOK := g.index[n]
		if got, ok := g.lookup(n); got != want || ok != wantOK {
			t.Fatalf("lookup(%q) = %d, %v; index %d, %v", n, got, ok, want, wantOK)
		}
	}
}

// TestJumpGraphResolveAllSameTargets: a large table's jumps resolved on
// every CPU ahead of the walk are those resolved one chain at a time
// (jumps to user chains, built-in chains, missing chains, and returns).
func TestJumpGraphResolveAllSameTargets(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	rs.Table = "nat"
	rnd := rand.New(rand.NewSource(7))
	n := resolveParallelChains + 1000
	for i := range n {
		rs.Chains = append(rs.Chains, &ir.Chain{Name: fmt.Sprintf("U%d", i)})
	}
	rs.Chains = append(rs.Chains, &ir.Chain{Name: "PREROUTING", Builtin: true})
	for _, c := range rs.Chains {
		for range rnd.Intn(4) {
			r := &ir.Rule{Target: ir.Target{Kind: ir.TargetJump, Chain: fmt.Sprintf("U%d", rnd.Intn(n+50))}}
			switch rnd.Intn(6) {
			case 0:
				r.Target = ir.Target{Kind: ir.TargetReturn}
			case 1:
				r.Target.Chain = "PREROUTING"
			case 2:
				r.Target.Kind = ir.TargetGoto
			}
			c.Rules = append(c.Rules, r)
		}
	}
	all := newJumpGraph(rs)
	all.resolveAll()
	one := newJumpGraph(rs)
	for c := range rs.Chains {
		if got, want := all.targets[c], one.targetsOf(int32(c)); !slices.Equal(got, want) || got == nil {
			t.Fatalf("chain %d: resolved ahead %v, one at a time %v", c, got, want)
		}
	}
}
