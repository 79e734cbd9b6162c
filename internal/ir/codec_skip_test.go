package ir_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// skipText is a ruleset with rules in filter, nat and mangle (nat between
// the other two in the encoding).
func skipText() string {
	var text strings.Builder
	text.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:user - [0:0]\n")
	for i := range 20 {
		fmt.Fprintf(&text, "-A INPUT -p tcp -m tcp --dport %d -m comment --comment \"f%d\" -j user\n", 1000+i, i)
	}
	text.WriteString("-A user -j LOG --log-prefix \"x \"\nCOMMIT\n")
	text.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n")
	for i := range 10 {
		fmt.Fprintf(&text, ":KUBE-SEP-%d - [0:0]\n", i)
	}
	text.WriteString("-A PREROUTING -j KUBE-SERVICES\n")
	for i := range 10 {
		fmt.Fprintf(&text, "-A KUBE-SERVICES -d 10.96.0.%d/32 -p tcp -m tcp --dport 80 -m comment --comment \"s%d\" -j KUBE-SEP-%d\n", i, i, i)
		fmt.Fprintf(&text, "-A KUBE-SEP-%d -p tcp -j DNAT --to-destination 10.244.0.%d:8080\n", i, i)
	}
	text.WriteString("COMMIT\n*mangle\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p udp -j MARK --set-xmark 0x1/0xffffffff\nCOMMIT\n")
	return text.String()
}

// skipFixture returns skipText's binary form and its full decode.
func skipFixture(t *testing.T) ([]byte, *ir.Ruleset, *ir.Encoded) {
	t.Helper()
	data, err := restored(t, skipText()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	full, fullEnc, err := ir.UnmarshalRulesetEncoded(data)
	if err != nil {
		t.Fatal(err)
	}
	return data, full, fullEnc
}

// TestUnmarshalRulesetSkipTables checks that the tables a decode skips
// (Skip.Tables) keep their chains and policies and no rule, that
// RuleCounts still counts their rules, and that the other tables decode
// as in a full decode.
func TestUnmarshalRulesetSkipTables(t *testing.T) {
	data, full, fullEnc := skipFixture(t)
	for _, skipped := range []string{ir.TableFilter, ir.TableNat, ir.TableMangle} {
		var asked []string
		rs, enc, err := ir.UnmarshalRulesetSkip(data, ir.Skip{Tables: func(table string) bool {
			asked = append(asked, table)
			return table == skipped
		}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{ir.TableFilter, ir.TableNat, ir.TableMangle}; fmt.Sprint(asked) != fmt.Sprint(want) {
			t.Errorf("skip %s: asked %v, want %v", skipped, asked, want)
		}
		if fmt.Sprint(enc.RuleCounts()) != fmt.Sprint(fullEnc.RuleCounts()) {
			t.Errorf("skip %s: rule counts %v, want %v", skipped, enc.RuleCounts(), fullEnc.RuleCounts())
		}
		if len(rs.Tables) != len(full.Tables) {
			t.Fatalf("skip %s: %d tables, want %d", skipped, len(rs.Tables), len(full.Tables))
		}
		for i, ft := range append([]*ir.Ruleset{full}, full.Tables...) {
			st := append([]*ir.Ruleset{rs}, rs.Tables...)[i]
			name := ft.Table
			if name == "" {
				name = ir.TableFilter
			}
			if len(st.Chains) != len(ft.Chains) {
				t.Fatalf("skip %s: table %s has %d chains, want %d", skipped, name, len(st.Chains), len(ft.Chains))
			}
			for j, fc := range ft.Chains {
				sc := st.Chains[j]
				if sc.Name != fc.Name || sc.Policy != fc.Policy || sc.Builtin != fc.Builtin {
					t.Errorf("skip %s: chain %s %v, want %s %v", skipped, sc.Name, sc.Policy, fc.Name, fc.Policy)
				}
				want := len(fc.Rules)
				if name == skipped {
					want = 0
				}
				if len(sc.Rules) != want {
					t.Errorf("skip %s: chain %s/%s decoded %d rules, want %d", skipped, name, sc.Name, len(sc.Rules), want)
					continue
				}
				for k := range sc.Rules {
					if !reflect.DeepEqual(*sc.Rules[k], *fc.Rules[k]) {
						t.Errorf("skip %s: %s rule %d is %+v, want %+v", skipped, sc.Name, k, *sc.Rules[k], *fc.Rules[k])
					}
				}
			}
		}
	}
}

// TestUnmarshalRulesetSkipChains checks a decode that steps over the
// rules of some user chains (Skip.Rules): it asks once per table that has
// a user chain with rules, those chains keep their names (copies, not
// parts of the data) and policies and have no rules, built-in chains are
// never stepped over, RuleCounts counts every chain's rules, and every
// other chain decodes as in a full decode.
func TestUnmarshalRulesetSkipChains(t *testing.T) {
	data, full, fullEnc := skipFixture(t)
	flushed := map[string]bool{"filter/user": true, "nat/KUBE-SEP-3": true, "nat/KUBE-SERVICES": true, "nat/PREROUTING": true, "mangle/PREROUTING": true}
	var asked []string
	rs, enc, err := ir.UnmarshalRulesetSkip(data, ir.Skip{Rules: func(table string) func(string) bool {
		asked = append(asked, table)
		return func(chain string) bool { return flushed[table+"/"+chain] }
	}})
	if err != nil {
		t.Fatal(err)
	}
	// mangle has no user chain with rules: not asked.
	if want := []string{ir.TableFilter, ir.TableNat}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	if fmt.Sprint(enc.RuleCounts()) != fmt.Sprint(fullEnc.RuleCounts()) {
		t.Errorf("rule counts %v, want %v", enc.RuleCounts(), fullEnc.RuleCounts())
	}
	clear(data) // names must not be parts of it
	skipped := 0
	for i, ft := range append([]*ir.Ruleset{full}, full.Tables...) {
		st := append([]*ir.Ruleset{rs}, rs.Tables...)[i]
		name := ft.Table
		if name == "" {
			name = ir.TableFilter
		}
		if len(st.Chains) != len(ft.Chains) {
			t.Fatalf("table %s has %d chains, want %d", name, len(st.Chains), len(ft.Chains))
		}
		for j, fc := range ft.Chains {
			sc := st.Chains[j]
			if sc.Name != fc.Name || sc.Policy != fc.Policy || sc.Builtin != fc.Builtin {
				t.Errorf("chain %q %v, want %s %v", sc.Name, sc.Policy, fc.Name, fc.Policy)
			}
			want := len(fc.Rules)
			if flushed[name+"/"+fc.Name] && !fc.Builtin {
				want = 0
				skipped++
			}
			if len(sc.Rules) != want {
				t.Errorf("chain %s/%s decoded %d rules, want %d", name, sc.Name, len(sc.Rules), want)
				continue
			}
			for k := range sc.Rules {
				if !reflect.DeepEqual(*sc.Rules[k], *fc.Rules[k]) {
					t.Errorf("%s rule %d is %+v, want %+v", sc.Name, k, *sc.Rules[k], *fc.Rules[k])
				}
			}
		}
	}
	if skipped != 3 {
		t.Errorf("%d chains stepped over, want 3", skipped)
	}
}
