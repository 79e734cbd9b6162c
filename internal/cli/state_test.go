package cli

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRestoreTables checks which tables an iptables-restore input names,
// however the input is cut into writes.
func TestRestoreTables(t *testing.T) {
	in := "# comment *not\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m comment --comment \"*x\"\nCOMMIT\n*nat \nCOMMIT\n*filter\nCOMMIT\n*raw"
	for _, chunk := range []int{1, 3, 7, len(in)} {
		tr := &restoreTables{}
		for i := 0; i < len(in); i += chunk {
			if _, err := tr.Write([]byte(in[i:min(i+chunk, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		// The last line has no newline: the restore itself refuses such
		// an input, so it need not count.
		if want := []string{"filter", "nat"}; !slices.Equal(tr.names, want) {
			t.Errorf("chunks of %d: tables %q, want %q", chunk, tr.names, want)
		}
	}
	var tr restoreTables
	if _, err := io.Copy(&tr, strings.NewReader("*mangle\n")); err != nil || !slices.Equal(tr.names, []string{"mangle"}) {
		t.Errorf("the zero restoreTables took %q (%v), want mangle", tr.names, err)
	}
}

// TestCounterSourcesRestartPolicies checks that a commit of the filter
// table restarts its policies' counters and carries its rules', and that
// a commit of nothing (sync) carries both.
func TestCounterSourcesRestartPolicies(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	in := rs.Chain("INPUT")
	in.Counters = ir.Counters{Packets: 5, Bytes: 500}
	in.Rules = append(in.Rules, &ir.Rule{Handle: 1, Counters: ir.Counters{Packets: 2, Bytes: 20}})
	for _, tc := range []struct {
		name       string
		restarted  []string
		wantPolicy int
	}{
		{"sync", nil, 0},
		{"filter command", []string{ir.TableFilter}, -1},
		{"nat command", []string{ir.TableNat}, 0},
	} {
		src := counterSources(rs, rs, true, tc.restarted)
		if src[0].From != tc.wantPolicy {
			t.Errorf("%s: INPUT policy from %d, want %d", tc.name, src[0].From, tc.wantPolicy)
		}
		if tc.wantPolicy < 0 && src[0].Initial != (ir.Counters{}) {
			t.Errorf("%s: restarted INPUT policy starts at %+v", tc.name, src[0].Initial)
		}
		if rule := src[len(src)-1]; rule.From != 0 {
			t.Errorf("%s: the rule's counter from %d, want 0 (carried)", tc.name, rule.From)
		}
	}
}

// TestLimitSources checks which rules' limit buckets a command carries
// over: those with a limit match in a table it did not commit, none for
// a command naming no table (sync keeps the whole map) or for rules
// without a limit match or a running origin.
func TestLimitSources(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	in := rs.Chain("INPUT")
	in.Rules = append(in.Rules,
		&ir.Rule{Handle: 1, Matches: []ir.Match{&ir.LimitMatch{Avg: 1, Burst: 2}}},
		&ir.Rule{Handle: 2},
		&ir.Rule{Matches: []ir.Match{&ir.LimitMatch{Avg: 1, Burst: 2}}}, // added by the command
	)
	filterLimit := uint32(0)
	compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
		if r != nil && r.Handle == 1 {
			filterLimit = uint32(i)
		}
	})
	for _, tc := range []struct {
		name string
		mode installMode
		want map[uint32]uint32
	}{
		{"nat committed", installMode{committed: []string{ir.TableNat}}, map[uint32]uint32{filterLimit: 0}},
		{"filter committed", installMode{committed: []string{ir.TableFilter}}, nil},
		{"sync", installMode{sameRules: true}, nil},
		{"no table named", installMode{}, nil},
	} {
		if got := limitSources(rs, tc.mode); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRestoreTablesChanges checks which inputs change a table for
// libiptc: a chain, a rule or a command line does, "*TABLE", COMMIT,
// comments and blank lines do not.
func TestRestoreTablesChanges(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"*filter\nCOMMIT\n", false},
		{"# saved\n*filter\n\n# nothing\nCOMMIT\n*nat\nCOMMIT\n", false},
		{"*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n", true},
		{"*filter\n-A INPUT -j ACCEPT\nCOMMIT\n", true},
		{"*filter\n-D INPUT 1\nCOMMIT\n", true},
		{"*filter\n:x - [0:0]\nCOMMIT\n", true},
	} {
		for _, chunk := range []int{1, 5, len(tc.in)} {
			tr := &restoreTables{}
			for i := 0; i < len(tc.in); i += chunk {
				if _, err := tr.Write([]byte(tc.in[i:min(i+chunk, len(tc.in))])); err != nil {
					t.Fatal(err)
				}
			}
			if tr.changes != tc.want {
				t.Errorf("%q in chunks of %d: changes %v, want %v", tc.in, chunk, tr.changes, tc.want)
			}
		}
	}
}
