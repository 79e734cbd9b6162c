package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCounterSourcesSkippedChains checks that a --noflush restore onto a
// running ruleset decoded without the chains it flushes (ir.Skip.Rules)
// gets the counter sources it gets onto the full decode: the kept rules
// carried from their own counters, the policies of the tables it does not
// commit from theirs (their indexes come after the skipped rules), the new
// rules from zero.
func TestCounterSourcesSkippedChains(t *testing.T) {
	running := "*filter\n:f1 - [0:0]\n-A INPUT -j f1\n-A f1 -p tcp -j ACCEPT\n-A f1 -p udp -j ACCEPT\n-A OUTPUT -j ACCEPT\nCOMMIT\n" +
		"*nat\n:svc - [0:0]\n:keep - [0:0]\n-A PREROUTING -j svc\n-A svc -p tcp -j DNAT --to-destination 10.0.0.1\n-A svc -p udp -j DNAT --to-destination 10.0.0.2\n-A keep -j RETURN\nCOMMIT\n" +
		"*mangle\n-A PREROUTING -j MARK --set-mark 1\nCOMMIT\n"
	input := "*filter\n:f1 - [0:0]\n-A f1 -j ACCEPT\nCOMMIT\n*nat\n:svc - [0:0]\n-A svc -j DNAT --to-destination 10.0.0.3\nCOMMIT\n"
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(running), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := rs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	counters := make([]ir.Counters, 32)
	for i := range counters {
		counters[i] = ir.Counters{Packets: uint64(i + 1), Bytes: uint64(100 * (i + 1))}
	}
	flushed := map[string]bool{"filter/f1": true, "nat/svc": true}
	decode := func(skip bool) (*ir.Ruleset, []int) {
		s := ir.Skip{}
		if skip {
			s.Rules = func(table string) func(string) bool {
				return func(chain string) bool { return flushed[table+"/"+chain] }
			}
		}
		old, enc, err := ir.UnmarshalRulesetSkip(data, s)
		if err != nil {
			t.Fatal(err)
		}
		dataplane.ApplyCountersCounted(old, enc.RuleCounts(), counters)
		return old, enc.RuleCounts()
	}
	var got [2]string
	for i, skip := range []bool{false, true} {
		old, counts := decode(skip)
		nw, err := iptables.Restore(ir.IPv4, strings.NewReader(input), old, iptables.RestoreOptions{NoFlush: true})
		if err != nil {
			t.Fatal(err)
		}
		src := counterSourcesCounted(old, counts, nw, true, []string{ir.TableFilter, ir.TableNat})
		got[i] = fmt.Sprint(src)
		// Laid out by the rules decoded, the policies after a skipped
		// chain would come from the wrong counters.
		if uncounted := fmt.Sprint(counterSources(old, nw, true, []string{ir.TableFilter, ir.TableNat})); skip && uncounted == got[i] {
			t.Errorf("the counts change nothing: %s", uncounted)
		}
	}
	if got[0] != got[1] {
		t.Errorf("counter sources onto the skipping decode\n%s\nonto the full decode\n%s", got[1], got[0])
	}
	// mangle's PREROUTING policy: after filter's 3 policies and 4 rules,
	// nat's 4 policies and 4 rules.
	if !strings.Contains(got[1], "{15 {16 1600}}") {
		t.Errorf("mangle's policy not carried from counter 15: %s", got[1])
	}
}
