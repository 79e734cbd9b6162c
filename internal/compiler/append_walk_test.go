package compiler

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// walkTables are the other tables the in-place changes are checked
// beside: nat (a Docker host's), and tables whose chains come only before
// filter's in some walks (raw, mangle INPUT) so that filter's chain ends
// those walks, or after it (security).
var walkTables = []struct {
	name  string
	rules func(fam ir.Family) []string
}{
	{"nat", func(fam ir.Family) []string {
		to, src := "10.0.2.5:8080", "10.0.1.0/24"
		if fam == ir.IPv6 {
			to, src = "[fd00::205]:8080", "fd00::100/120"
		}
		return []string{
			"-t nat -N DOCKER",
			"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
			"-t nat -A OUTPUT -p tcp --dport 81 -j DOCKER",
			"-t nat -A POSTROUTING -s " + src + " ! -o eth0 -j MASQUERADE",
			"-t nat -A DOCKER -i eth1 -j RETURN",
			"-t nat -A DOCKER ! -i eth1 -p tcp --dport 80 -j DNAT --to-destination " + to,
		}
	}},
	{"nat and mangle", func(fam ir.Family) []string {
		return []string{
			"-t nat -P PREROUTING ACCEPT",
			"-t mangle -A FORWARD -p tcp --dport 22 -j LOG --log-prefix m",
			"-t mangle -A POSTROUTING -p udp -j ACCEPT",
			// State by rule (Limits, Statistics) after filter's rules.
			"-t mangle -A POSTROUTING -p udp -m statistic --mode nth --every 3 --packet 1",
			"-t mangle -A POSTROUTING -p tcp -m limit --limit 5/sec",
		}
	}},
	{"raw", func(fam ir.Family) []string {
		return []string{"-t raw -A PREROUTING -p udp --dport 53 -j NOTRACK", "-t raw -A OUTPUT -p icmp -j ACCEPT"}
	}},
	{"mangle", func(fam ir.Family) []string { return []string{"-t mangle -P INPUT ACCEPT"} }},
	{"security", func(fam ir.Family) []string {
		return []string{"-t security -A INPUT -p tcp --dport 25 -j DROP", "-t security -P OUTPUT ACCEPT"}
	}},
}

// TestChangeInPlaceWithTablesMatchesCompile changes base chains of random
// filter tables, beside other tables (walkTables), in place (AppendRule,
// InsertRule, DeleteRule, several in a row) and requires every resulting
// generation to judge random packets in every walk as the ruleset
// compiled in full does: the same terminal entry (rule, action), the
// same counted and logged entries on the way. Changes refused are
// compiled in full, as the control plane does; most must be done in
// place.
func TestChangeInPlaceWithTablesMatchesCompile(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	tally := &changeTally{}
	for iter := 0; iter < 150; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		tables := walkTables[iter%len(walkTables)]
		rs := genRuleset(rng, fam, 5+rng.Intn(30), rng.Intn(3))
		rs.Tables = parseRuleset(t, fam, tables.rules(fam)...).Tables
		if !UsesOtherTables(rs) {
			t.Fatalf("%s: no other table", tables.name)
		}
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d (%s): %v", iter, tables.name, err)
		}
		for step := 0; step < 1+rng.Intn(12); step++ {
			ng, ok, err := randomChange(rng, rs, g, 3)
			if !ok {
				continue
			}
			g = tally.outcome(t, rs, ng, err, iter, step)
			want, err := Compile(rs, Options{Interfaces: testIfaces})
			if err != nil {
				t.Fatalf("ruleset %d step %d: %v", iter, step, err)
			}
			sameWalks(t, rng, fmt.Sprintf("ruleset %d (%s) step %d", iter, tables.name, step), rs.Family, g, want, 150)
			sameStateRules(t, fmt.Sprintf("ruleset %d (%s) step %d", iter, tables.name, step), g, want)
		}
	}
	tally.check(t, 300)
}

// sameWalks judges n random packets in every base chain's walk with got
// and want and requires the same outcomes (changedWalkOutcome).
func sameWalks(t *testing.T, rng *rand.Rand, id string, fam ir.Family, got, want *Generation, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		p := genPacket(rng, fam)
		for ch, name := range ir.BuiltinChains {
			q := *p
			if ch == ChainInput {
				q.OIF = 0
			}
			if ch == ChainOutput {
				q.IIF = 0
			}
			g, w := changedWalkOutcome(got, got.Classify(&q, ch)), changedWalkOutcome(want, want.Classify(&q, ch))
			if g != w {
				t.Fatalf("%s, %s, packet %+v:\n in place: %s\n compiled: %s", id, name, q, g, w)
			}
		}
	}
}

// changedWalkOutcome describes res, a walk's result in g, by what the entries
// do, not where they lie (an in-place change leaves them elsewhere than a
// compile would): the terminal entry's rule, action and argument, and
// those of the entries met on the way.
func changedWalkOutcome(g *Generation, res Result) string {
	var b strings.Builder
	desc := func(i int) string {
		e := g.Entries[i]
		return fmt.Sprintf("rule %d action %d flags %#x aux %d", int32(e.Rule), e.Action, e.Flags, e.Aux)
	}
	for _, i := range res.Path {
		b.WriteString(desc(i) + "; ")
	}
	switch {
	case res.Hotdrop:
		b.WriteString("hotdrop")
	case res.Entry < 0:
		b.WriteString("policy")
	default:
		b.WriteString(desc(res.Entry))
	}
	return b.String()
}

// sameStateRules requires g's limit buckets and nth statistic instances to
// name the rules (counter index, match) want's do: a command carries their
// state over by rule (dataplane.Update.LimitsFrom), so an in-place change
// must move them with the rules it shifts.
func sameStateRules(t *testing.T, what string, g, want *Generation) {
	t.Helper()
	type ruleMatch struct {
		rule  uint32
		match int
	}
	collect := func(g *Generation) (lim, nth []ruleMatch) {
		for _, l := range g.Limits {
			lim = append(lim, ruleMatch{l.Rule, l.Match})
		}
		for _, st := range g.Statistics {
			nth = append(nth, ruleMatch{st.Rule, st.Match})
		}
		less := func(a, b ruleMatch) int { return cmp.Or(cmp.Compare(a.rule, b.rule), cmp.Compare(a.match, b.match)) }
		slices.SortFunc(lim, less)
		slices.SortFunc(nth, less)
		return lim, nth
	}
	gl, gn := collect(g)
	wl, wn := collect(want)
	if !slices.Equal(gl, wl) || !slices.Equal(gn, wn) {
		t.Fatalf("%s: limits %v, nth %v by rule; compiled in full: %v, %v", what, gl, gn, wl, wn)
	}
}
