package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// reuseRunningText is the running ruleset of TestReusableEncoding.
const reuseRunningText = `*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:SVC - [0:0]
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -j SVC
-A SVC -s 10.0.0.1/32 -j ACCEPT
-A SVC -s 10.0.0.2/32 -m comment --comment "ns/svc" -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.1.0.1:8080
COMMIT
`

// TestReusableEncoding checks which restores onto a running ruleset leave
// it, rule for rule, as it was (the running generation is installed
// again) and which change it.
func TestReusableEncoding(t *testing.T) {
	svcAgain := "*filter\n:SVC - [0:0]\n-A SVC -s 10.0.0.1/32 -j ACCEPT\n-A SVC -s 10.0.0.2/32 -m comment --comment \"ns/svc\" -j ACCEPT\nCOMMIT\n"
	tests := []struct {
		name    string
		noflush bool
		input   string
		same    bool
	}{
		{"the same rules again", false, reuseRunningText, true},
		{"the same rules with counters", false, strings.Replace(reuseRunningText, "-A INPUT -p tcp", "[5:300] -A INPUT -p tcp", 1), true},
		{"a chain written as it is (--noflush)", true, svcAgain, true},
		{"nat's chain written as it is (--noflush)", true, "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.1.0.1:8080\nCOMMIT\n", true},
		{"nothing restored (--noflush)", true, "*filter\nCOMMIT\n", true},
		{"an address changed (--noflush)", true, strings.Replace(svcAgain, "10.0.0.2", "10.0.0.3", 1), false},
		{"a DNAT target changed (--noflush)", true, "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.1.0.2:8080\nCOMMIT\n", false},
		{"a comment changed (--noflush)", true, strings.Replace(svcAgain, "ns/svc", "ns/other", 1), false},
		{"rules in another order (--noflush)", true, "*filter\n:SVC - [0:0]\n-A SVC -s 10.0.0.2/32 -m comment --comment \"ns/svc\" -j ACCEPT\n-A SVC -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n", false},
		{"a rule less (--noflush)", true, "*filter\n:SVC - [0:0]\n-A SVC -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n", false},
		{"a policy changed", false, strings.Replace(reuseRunningText, ":INPUT DROP", ":INPUT ACCEPT", 1), false},
		{"an empty chain more (--noflush)", true, "*filter\n:NEW - [0:0]\nCOMMIT\n", false},
		{"a table more (--noflush)", true, "*mangle\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n", false},
	}
	running := restoreText(t, nil, reuseRunningText, false)
	orderChains(running) // as the commit saves it
	data, err := running.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The running ruleset as a decode gives it, or as the agent's cache
	// keeps it (where its rules lie in the binary form it was encoded to
	// rather than decoded from).
	for _, cached := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/cached=%v", tt.name, cached), func(t *testing.T) {
				old, enc, err := ir.UnmarshalRulesetEncoded(data)
				if err != nil {
					t.Fatal(err)
				}
				if cached {
					kept := old.CloneChains()
					if _, enc, err = kept.MarshalBinaryIndexed(enc); err != nil {
						t.Fatal(err)
					}
					old = kept
				}
				rs := restoreText(t, old, tt.input, tt.noflush)
				orderChains(rs)
				saved, _, same := reusableEncoding(old, rs, enc, cached)
				if same != tt.same {
					t.Errorf("same = %v, want %v", same, tt.same)
				}
				if same && string(saved) != string(data) {
					t.Error("the saved form is not the running one's")
				}
			})
		}
	}
}

// restoreText restores input onto base (nil: an empty ruleset) as
// iptables-restore does.
func restoreText(t *testing.T, base *ir.Ruleset, input string, noflush bool) *ir.Ruleset {
	t.Helper()
	if base == nil {
		base = ir.NewRuleset(ir.IPv4)
	}
	rs, err := iptables.RestoreOnto(ir.IPv4, strings.NewReader(input), func() (*ir.Ruleset, error) { return base, nil },
		iptables.RestoreOptions{NoFlush: noflush, Counters: true})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return rs
}
