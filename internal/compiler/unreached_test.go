package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestUnreachedChainsChecked: a chain reached only through a jump that
// cannot match yet (its interface does not exist) is checked as if it
// were reached: what xfw refuses in it is refused now, not at the compile
// the interface's arrival triggers.
func TestUnreachedChainsChecked(t *testing.T) {
	lo := Options{Interfaces: []Interface{{Index: 1, Name: "lo"}}}
	for _, tc := range []struct {
		name  string
		fam   ir.Family
		rules string
		want  string // "" when the ruleset compiles
	}{
		{"match refused behind an absent interface", ir.IPv6,
			"-N X;-A X -m addrtype --src-type UNREACHABLE;-A INPUT -i absent0 -j X", "UNREACHABLE"},
		{"goto, nested chain", ir.IPv6,
			"-N X;-N Y;-A Y -m addrtype --src-type UNREACHABLE;-A X -j Y;-A INPUT -i absent0 -g X", "UNREACHABLE"},
		{"the same chain reached: refused as before", ir.IPv6,
			"-N X;-A X -m addrtype --src-type UNREACHABLE;-A INPUT -j X", "UNREACHABLE"},
		{"supported rules behind an absent interface compile", ir.IPv4,
			"-N X;-A X -p tcp --dport 22 -j ACCEPT;-A X -m mac --mac-source 00:11:22:33:44:55 -j DROP;-A INPUT -i absent0 -j X", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := parseRuleset(t, tc.fam, strings.Split(tc.rules, ";")...)
			_, err := Compile(rs, lo)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want the ruleset compiled", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
