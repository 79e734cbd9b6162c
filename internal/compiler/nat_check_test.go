package compiler

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatReachChecksAgreesWithWalk compares the one-pass check of the NAT
// rules the nat chains reach (natReachChecks) with the context-by-context
// walk (checkNatWalk) on random nat tables: user chains jumping and going
// to one another (and to chains no built-in chain reaches), NAT targets
// each context accepts or refuses, in both families.
func TestNatReachChecksAgreesWithWalk(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	builtins := []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}
	targets := []string{
		"-p tcp -j DNAT --to-destination 10.0.0.1",
		"-j MASQUERADE",
		"-p udp -j REDIRECT",
		"-o eth0 -j SNAT --to-source 10.0.0.2",
		"-p dccp -j DNAT --to-destination 10.0.0.3",
		"-j ACCEPT",
		"-p tcp -j ACCEPT",
	}
	const chains = 6
	failed, passed := 0, 0
	for round := 0; round < 400; round++ {
		fam := ir.IPv4
		if round%5 == 4 {
			fam = ir.IPv6
		}
		var cmds []string
		for i := 0; i < chains; i++ {
			cmds = append(cmds, fmt.Sprintf("-t nat -N C%d", i))
		}
		// Built-in chains jump anywhere; C_i only to C_j with j > i (no loops).
		for n := rng.Intn(14); n > 0; n-- {
			from := rng.Intn(len(builtins) + chains)
			var chain string
			lowest := 0
			if from < len(builtins) {
				chain = builtins[from]
			} else {
				lowest = from - len(builtins) + 1
				chain = fmt.Sprintf("C%d", lowest-1)
			}
			rule := targets[rng.Intn(len(targets))]
			if fam == ir.IPv6 && rng.Intn(2) == 0 {
				rule = "-j ACCEPT"
			}
			if lowest < chains && rng.Intn(2) == 0 {
				verb := []string{"-j", "-g"}[rng.Intn(2)]
				rule = fmt.Sprintf("%s C%d", verb, lowest+rng.Intn(chains-lowest))
			}
			cmds = append(cmds, fmt.Sprintf("-t nat -A %s %s", chain, rule))
		}
		rs := applyAccepted(fam, cmds)
		nat := rs.TableByName(ir.TableNat)
		if nat == nil {
			t.Fatalf("round %d: no nat table", round)
		}
		walkErr := checkNatWalk(nat, fam)
		if got := natReachChecks(nat, fam, nil); got != (walkErr == nil) {
			t.Fatalf("round %d: one pass says %v, the walk %v\n%q", round, got, walkErr, cmds)
		}
		// The same with the jumps resolved ahead (resolveJumps).
		if got := natReachChecks(nat, fam, resolveJumps(rs).of(nat)); got != (walkErr == nil) {
			t.Fatalf("round %d: one pass with resolved jumps says %v, the walk %v\n%q", round, got, walkErr, cmds)
		}
		if walkErr != nil {
			failed++
		} else {
			passed++
		}
	}
	if failed == 0 || passed == 0 {
		t.Fatalf("random tables did not cover both outcomes: %d refused, %d passed", failed, passed)
	}
}

// applyAccepted applies the commands iptables accepts to a new ruleset and
// skips the others (a target the built-in chain's hook refuses).
func applyAccepted(fam ir.Family, cmds []string) *ir.Ruleset {
	rs := ir.NewRuleset(fam)
	for _, c := range cmds {
		words, err := iptables.Tokenize(c)
		if err != nil {
			continue
		}
		cmd, err := iptables.ParseCommand(fam, words)
		if err != nil {
			continue
		}
		_, _ = cmd.Apply(rs) // refused: the ruleset stays as it was
	}
	return rs
}

// TestNatReachBesideCompile checks that a large nat table, whose reach
// check runs beside the rest of the compile (startNatReach), is refused
// with the refusal the check names when it runs first, whatever the
// flattening meets (the refused rule matching or not, the flattening
// refusing it too or not), and compiles to the same generation when
// nothing is refused.
func TestNatReachBesideCompile(t *testing.T) {
	saved := minConcurrentNatRules
	defer func() { minConcurrentNatRules = saved }()
	const filler = 5000 // more than minConcurrentNatRules
	// Filter chains nesting deeper than the walk's call stack (maxDepth),
	// which the flattening refuses.
	var deep []string
	for i := 0; i <= maxDepth+1; i++ {
		deep = append(deep, fmt.Sprintf("-N D%d", i))
	}
	for i := 0; i <= maxDepth; i++ {
		deep = append(deep, fmt.Sprintf("-A D%d -j D%d", i, i+1))
	}
	deepJumps := strings.Join(append(deep, "-A INPUT -j D0"), ";")
	for _, tc := range []struct {
		fam  ir.Family
		cmds string
		want string // "" compiles
	}{
		{ir.IPv4, "-t nat -A PREROUTING -p dccp -j DNAT --to-destination 10.0.0.2", "-p dccp"},
		{ir.IPv4, "-t nat -A PREROUTING -i eth0 -p dccp -j DNAT --to-destination 10.0.0.2", "-p dccp"},
		{ir.IPv4, "-t nat -N X;-t nat -A X -p dccp -j DNAT --to-destination 10.0.0.1;-t nat -A OUTPUT -o eth0 -g X", "-p dccp"},
		{ir.IPv6, "-t nat -N X;-t nat -A X -p tcp -j DNAT --to-destination [::ffff:10.0.0.1];-t nat -A PREROUTING -j X", "for IPv6"},
		{ir.IPv4, "-t nat -A POSTROUTING -o eth0 -p tcp -j SNAT --to-source 10.0.0.2:80-90/100", "port maps"},
		// The flattening refuses the filter table's nesting first.
		{ir.IPv4, deepJumps + ";-t nat -A PREROUTING -i eth0 -p dccp -j DNAT --to-destination 10.0.0.2", "-p dccp"},
		{ir.IPv4, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.2", ""},
	} {
		rs := parseRuleset(t, tc.fam, append(strings.Split(tc.cmds, ";"), "-t nat -N FILL", "-t nat -A PREROUTING -j FILL",
			"-t nat -A FILL -p tcp --dport 80 -j ACCEPT")...)
		fill := rs.TableByName(ir.TableNat).Chain("FILL")
		for i := 1; i < filler; i++ {
			fill.Rules = append(fill.Rules, fill.Rules[0].Clone())
		}
		opts := Options{Interfaces: []Interface{{Index: 1, Name: "lo"}}}
		compileWith := func(min int) (*Generation, error) {
			minConcurrentNatRules = min
			return Compile(rs, opts)
		}
		serialG, serialErr := compileWith(1 << 30)
		besideG, besideErr := compileWith(filler)
		if tc.want == "" {
			if serialErr != nil || besideErr != nil {
				t.Fatalf("%q: errors %v, %v", tc.cmds, serialErr, besideErr)
			}
			if len(serialG.Entries) != len(besideG.Entries) || serialG.String() != besideG.String() {
				t.Errorf("%q: serial %s, beside %s", tc.cmds, serialG, besideG)
			}
			continue
		}
		if serialErr == nil || !strings.Contains(serialErr.Error(), tc.want) {
			t.Fatalf("%q: serial compile got %v, want a refusal saying %q", tc.cmds, serialErr, tc.want)
		}
		if besideErr == nil || besideErr.Error() != serialErr.Error() {
			t.Errorf("%q: compiled beside the check got %v, want %v", tc.cmds, besideErr, serialErr)
		}
	}
}
