package difftest

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestGenerateConnmark checks that stateful random rulesets use -m
// connmark and every CONNMARK spelling over a few seeds, and stateless
// ones never do (a connection's mark needs tracking).
func TestGenerateConnmark(t *testing.T) {
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	var stateful, stateless strings.Builder
	for seed := int64(0); seed < 400; seed++ {
		stateful.WriteString(GenerateRuleset(seed, plan, GenOptions{Conntrack: true}))
		stateless.WriteString(GenerateRuleset(seed, plan, GenOptions{}))
	}
	for _, w := range []string{"-m connmark --mark", "-m connmark ! --mark", "-j CONNMARK --set-mark", "--set-xmark",
		"--save-mark", "--restore-mark", "--and-mark", "--or-mark", "--xor-mark", "-shift-mark"} {
		if !strings.Contains(stateful.String(), w) {
			t.Errorf("no stateful ruleset has %q", w)
		}
	}
	if strings.Contains(strings.ToLower(stateless.String()), "connmark") {
		t.Error("a stateless ruleset uses connmark")
	}
	for _, w := range []string{"-m owner --uid-owner", "! --uid-owner", "--gid-owner", "--socket-exists",
		"-m devgroup --src-group", "! --dst-group", "--src-group default"} {
		if !strings.Contains(stateless.String(), w) {
			t.Errorf("no ruleset has %q", w)
		}
	}
}
