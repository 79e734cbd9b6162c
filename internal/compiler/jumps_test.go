package compiler

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// kubeProxyShaped returns commands for a kube-proxy-like ruleset of n
// services, 3 endpoints each: enough rules (over minParallelRules) for
// the parallel paths, jumps and gotos in nat and filter, one jump to a
// chain that does not exist (refused by the front end, so none stays).
func kubeProxyShaped(n int) []string {
	cmds := []string{
		"-t nat -N KUBE-SERVICES", "-t nat -N KUBE-MARK-MASQ", "-t nat -N KUBE-POSTROUTING",
		"-t nat -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
		"-t nat -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
		"-t nat -A KUBE-POSTROUTING -j MASQUERADE",
		"-t nat -A PREROUTING -j KUBE-SERVICES", "-t nat -A OUTPUT -j KUBE-SERVICES",
		"-t nat -A POSTROUTING -j KUBE-POSTROUTING",
		"-N KUBE-FW", "-A FORWARD -j KUBE-FW", "-A INPUT -g KUBE-FW",
		"-A KUBE-FW -p tcp --dport 22 -j ACCEPT",
		"-t nat -A KUBE-SERVICES -j NO-SUCH-CHAIN",
	}
	for s := range n {
		svc := fmt.Sprintf("KUBE-SVC-%d", s)
		cmds = append(cmds, "-t nat -N "+svc,
			fmt.Sprintf("-t nat -A KUBE-SERVICES -d 10.96.%d.%d/32 -p tcp --dport 80 -j %s", s/250, s%250+1, svc))
		for e := range 3 {
			sep := fmt.Sprintf("KUBE-SEP-%d-%d", s, e)
			cmds = append(cmds, "-t nat -N "+sep,
				fmt.Sprintf("-t nat -A %s -s 10.244.%d.%d/32 -j KUBE-MARK-MASQ", sep, s/250, e+1),
				fmt.Sprintf("-t nat -A %s -p tcp -j DNAT --to-destination 10.244.%d.%d:8080", sep, s/250, e+1))
			if e < 2 {
				cmds = append(cmds, fmt.Sprintf("-t nat -A %s -m statistic --mode random --probability 0.5 -j %s", svc, sep))
			} else {
				cmds = append(cmds, fmt.Sprintf("-t nat -A %s -g %s", svc, sep))
			}
		}
		cmds = append(cmds, fmt.Sprintf("-A KUBE-FW -d 10.96.%d.%d/32 -p tcp --dport 81 -j REJECT", s/250, s%250+1))
	}
	return cmds
}

// TestResolvedJumpsSameGeneration compiles rulesets with the jumps
// resolved ahead (resolveJumps) and looked up by name: the generations
// are the same, for the rulesets as they are and after their chains and
// rules changed since the resolution (a stale resolution is not used).
func TestResolvedJumpsSameGeneration(t *testing.T) {
	rs := applyAccepted(ir.IPv4, kubeProxyShaped(300))
	nat := rs.TableByName(ir.TableNat)
	if nat == nil || len(nat.Chains) < 1000 {
		t.Fatalf("ruleset too small: %v", nat)
	}
	compile := func(jumps *jumpIndex) *Generation {
		t.Helper()
		if err := checkNatReach(rs, jumps); err != nil {
			t.Fatal(err)
		}
		g, err := compileChecked(rs, Options{Interfaces: testIfaces}, jumps)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	want := compile(nil)
	if got := compile(resolveJumps(rs)); !reflect.DeepEqual(got, want) {
		t.Fatal("generation with jumps resolved ahead differs")
	}
	// Resolved, then changed: a service's rules retarget (a rule
	// replaced in place), chains swap places (same slice), a chain is
	// appended and jumped to.
	jumps := resolveJumps(rs)
	svc := nat.Chain("KUBE-SVC-7")
	r := *svc.Rules[0]
	r.Target.Chain = "KUBE-SEP-8-0"
	svc.Rules[0] = &r
	if jumps.of(nat) == nil {
		t.Fatal("chains unchanged, yet the resolution does not cover the table")
	}
	want = compile(nil)
	if got := compile(jumps); !reflect.DeepEqual(got, want) {
		t.Fatal("generation with a rule changed since the resolution differs from the lookup's")
	}
	i, j := 5, len(nat.Chains)-3
	nat.Chains[i], nat.Chains[j] = nat.Chains[j], nat.Chains[i]
	want = compile(nil)
	if got := compile(jumps); !reflect.DeepEqual(got, want) {
		t.Fatal("generation with stale resolved jumps differs from the lookup's")
	}
	if jumps.of(nat) != nil {
		t.Fatal("chains swapped, yet the resolution covers the table")
	}
}
