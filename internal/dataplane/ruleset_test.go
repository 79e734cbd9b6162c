package dataplane

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestApplyCountersCounted checks that a decode without some tables'
// rules (RunningRulesetSkip with Skip.Tables), or without some user chains' rules
// (RunningRulesetSkip), gives the other rules and every policy the
// counters and Handles a full decode gives them.
func TestApplyCountersCounted(t *testing.T) {
	var text strings.Builder
	text.WriteString("*filter\n:user - [0:0]\n")
	for i := range 5 {
		fmt.Fprintf(&text, "-A INPUT -p tcp -m tcp --dport %d -j user\n-A user -s 10.0.0.%d/32 -j DROP\n", 100+i, i)
	}
	text.WriteString("COMMIT\n*nat\n:svc - [0:0]\n-A PREROUTING -j svc\n")
	for i := range 7 {
		fmt.Fprintf(&text, "-A svc -d 10.96.0.%d/32 -p tcp -j DNAT --to-destination 10.244.0.%d\n", i, i)
	}
	text.WriteString("COMMIT\n*mangle\n-A PREROUTING -p udp -j MARK --set-mark 1\n-A OUTPUT -j MARK --set-mark 2\nCOMMIT\n")
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text.String()), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := rs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	counters := make([]ir.Counters, 64)
	for i := range counters {
		counters[i] = ir.Counters{Packets: uint64(i + 1), Bytes: uint64(1000 * (i + 1))}
	}
	full, _, err := ir.UnmarshalRulesetEncoded(data)
	if err != nil {
		t.Fatal(err)
	}
	applyCounters(full, counters)
	// A table skipped whole, or one user chain of filter or nat
	// (a --noflush restore's flushed chains, ir.Skip.Rules).
	for _, skipped := range []string{ir.TableFilter, ir.TableNat, ir.TableMangle, "filter/user", "nat/svc"} {
		skip := ir.Skip{Tables: func(table string) bool { return table == skipped }}
		if table, chain, ok := strings.Cut(skipped, "/"); ok {
			skip = ir.Skip{Rules: func(t string) func(string) bool {
				return func(c string) bool { return t == table && c == chain }
			}}
		}
		part, enc, err := ir.UnmarshalRulesetSkip(data, skip)
		if err != nil {
			t.Fatal(err)
		}
		applyCountersCounted(part, enc.RuleCounts(), counters)
		tables, fullTables := append([]*ir.Ruleset{part}, part.Tables...), append([]*ir.Ruleset{full}, full.Tables...)
		for i, ft := range fullTables {
			for j, fc := range ft.Chains {
				pc := tables[i].Chains[j]
				if pc.Counters != fc.Counters {
					t.Errorf("skip %s: chain %s counters %v, want %v", skipped, fc.Name, pc.Counters, fc.Counters)
				}
				if len(pc.Rules) == 0 {
					continue
				}
				for k, r := range fc.Rules {
					if p := pc.Rules[k]; p.Counters != r.Counters || p.Handle != r.Handle {
						t.Errorf("skip %s: %s rule %d counters %v handle %d, want %v %d", skipped, fc.Name, k, p.Counters, p.Handle, r.Counters, r.Handle)
					}
				}
			}
		}
	}
}
