package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestPreEnd checks Layout.PreEnd: set for the INPUT and FORWARD walks
// (never OUTPUT's) exactly when a PREROUTING chain, or a user chain it
// reaches, can change the packet's mark, and then just after the walk's
// PREROUTING segments (before filter's chain; at the DNAT resume position
// when nat PREROUTING is the last of them).
func TestPreEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
		want  bool
	}{
		{"filter only", []string{"-A INPUT -j ACCEPT"}, false},
		{"MARK in mangle PREROUTING", []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 1"}, true},
		{"MARK in raw PREROUTING, nat present", []string{"-t raw -A PREROUTING -j MARK --set-mark 1",
			"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1"}, true},
		{"MARK in a chain mangle PREROUTING jumps to", []string{"-t mangle -N M", "-t mangle -N N",
			"-t mangle -A M -j N", "-t mangle -A N -j MARK --set-mark 1", "-t mangle -A PREROUTING -g M"}, true},
		{"CONNMARK --restore-mark in mangle PREROUTING", []string{"-t mangle -A PREROUTING -j CONNMARK --restore-mark"}, true},
		{"CONNMARK --save-mark in mangle PREROUTING", []string{"-t mangle -A PREROUTING -j CONNMARK --save-mark"}, false},
		{"MARK in mangle FORWARD and POSTROUTING only", []string{"-t mangle -A FORWARD -j MARK --set-mark 1",
			"-t mangle -A POSTROUTING -j MARK --set-mark 2", "-t mangle -A PREROUTING -p udp"}, false},
		{"MARK in a user chain PREROUTING does not reach", []string{"-t mangle -N M",
			"-t mangle -A M -j MARK --set-mark 1", "-t mangle -A FORWARD -j M"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(parseRuleset(t, ir.IPv4, tc.rules...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p := g.Layout.PreEnd[ChainOutput]; p != 0 {
				t.Errorf("OUTPUT's walk has PreEnd %d, want 0", p)
			}
			for _, h := range []int{ChainInput, ChainForward} {
				p := g.Layout.PreEnd[h]
				if (p != 0) != tc.want {
					t.Fatalf("chain %d: PreEnd %d, want set %v", h, p, tc.want)
				}
				if p == 0 {
					continue
				}
				if start, _ := g.Walk(h); p-1 <= start || p-1 > g.ChainStart[h] {
					t.Errorf("chain %d: PreEnd-1 %d not after the walk's start %d and by filter's %d",
						h, p-1, start, g.ChainStart[h])
				}
				if r := g.Layout.NatResume[h]; r != 0 && r != p {
					t.Errorf("chain %d: PreEnd %d, DNAT resumes at %d", h, p, r)
				}
			}
		})
	}
}
