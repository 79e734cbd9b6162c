package compiler

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// compileBoth compiles rs with memo and without, and fails unless both
// give the same generation, or the same refusal.
func compileBoth(t *testing.T, step string, rs *ir.Ruleset, ifaces []Interface, memo *Memo) {
	t.Helper()
	got, gotErr := Compile(rs, Options{Interfaces: ifaces, Memo: memo})
	want, wantErr := Compile(rs, Options{Interfaces: ifaces})
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: with the memo %v, without %v", step, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if err := DiffGenerations(got, want); err != nil {
		t.Fatalf("%s: with the memo and without: %v", step, err)
	}
}

// TestMemoSameGeneration: a compile given the last compile's memo makes
// the generation a compile without it makes, over random filter rulesets
// edited chain by chain (rules added, removed, swapped, chains rewritten
// with other rules, the interfaces changed), and kube-proxy's partial
// syncs (real NAT) moving endpoints back and forth.
func TestMemoSameGeneration(t *testing.T) {
	t.Run("random edits", func(t *testing.T) {
		for seed := int64(1); seed <= 12; seed++ {
			rng := rand.New(rand.NewSource(seed))
			fam := ir.IPv4
			if seed%3 == 0 {
				fam = ir.IPv6
			}
			ifaces := []Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}}
			rs := genRuleset(rng, fam, 40, 4)
			memo := NewMemo()
			compileBoth(t, fmt.Sprintf("seed %d, first", seed), rs, ifaces, memo)
			for step := 0; step < 25; step++ {
				rs = rs.CloneChains()
				what := memoEdit(rng, rs, fam)
				if rng.Intn(8) == 0 {
					ifaces = append(ifaces[:2:2], Interface{Index: uint32(3 + step), Name: "wlan0"})
					what += ", interfaces changed"
				}
				compileBoth(t, fmt.Sprintf("seed %d step %d (%s)", seed, step, what), rs, ifaces, memo)
			}
		}
	})
	t.Run("kube-proxy partial syncs", func(t *testing.T) {
		o := kubeproxy.DefaultOptions(40, 3)
		svcs, err := kubeproxy.Generate(o)
		if err != nil {
			t.Fatal(err)
		}
		restore := func(base *ir.Ruleset, text string) *ir.Ruleset {
			rs, err := iptables.RestoreOnto(ir.IPv4, strings.NewReader(text), func() (*ir.Ruleset, error) { return base, nil }, iptables.RestoreOptions{NoFlush: base != nil})
			if err != nil {
				t.Fatal(err)
			}
			rs.Chains = iptables.OrderedChains(rs)
			return rs
		}
		rs := restore(nil, kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true}))
		memo := NewMemo()
		compileBoth(t, "full sync", rs, nil, memo)
		for step := 0; step < 6; step++ {
			changed := (step * 7) % len(svcs)
			old := svcs[changed]
			svcs[changed] = kubeproxy.MoveEndpoint(&old, netip.AddrFrom4([4]byte{10, 250, 0, byte(step + 1)}))
			rs = restore(rs, kubeproxy.IPTablesUpdate(svcs, changed, &old, o.ClusterCIDR, kubeproxy.IPTablesOptions{}))
			compileBoth(t, fmt.Sprintf("partial sync %d", step), rs, nil, memo)
			if memo.Hits == 0 || memo.Misses == 0 {
				t.Fatalf("partial sync %d: %d rules' terms memoised, %d not: the memo is not what was compiled", step, memo.Hits, memo.Misses)
			}
		}
	})
}

// memoEdit changes rs (a copy of the chains of the last ruleset, sharing
// its rules) at random and says how.
func memoEdit(rng *rand.Rand, rs *ir.Ruleset, fam ir.Family) string {
	c := rs.Chains[rng.Intn(len(rs.Chains))]
	// Rules of the same chain in another random ruleset: their jumps go
	// to later chains, as genRuleset's, so no loop appears.
	fresh := genRuleset(rng, fam, 40, 4).Chain(c.Name).Rules
	switch rng.Intn(5) {
	case 0:
		c.Rules = fresh
		return "chain " + c.Name + " rewritten"
	case 1:
		if len(c.Rules) > 0 {
			i := rng.Intn(len(c.Rules))
			c.Rules = append(c.Rules[:i:i], c.Rules[i+1:]...)
		}
		return "rule deleted from " + c.Name
	case 2:
		if len(fresh) > 0 {
			c.Rules = append(c.Rules, fresh[0])
		}
		return "rule appended to " + c.Name
	case 3:
		if len(fresh) > 0 {
			c.Rules = append([]*ir.Rule{fresh[0]}, c.Rules...)
		}
		return "rule inserted at the head of " + c.Name
	default:
		if len(c.Rules) > 1 {
			i := rng.Intn(len(c.Rules) - 1)
			c.Rules[i], c.Rules[i+1] = c.Rules[i+1], c.Rules[i]
		}
		return "rules swapped in " + c.Name
	}
}
