package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCmdCacheMatchesDecode: after each command the agent's cache keeps
// (-A, -I, -D, -N in filter and nat, with match modules and targets of
// every kind the codec carries), the kept ruleset is the one a decode of
// its saved binary form gives, Handles and all.
func TestCmdCacheMatchesDecode(t *testing.T) {
	tests := []struct {
		fam  ir.Family
		cmds []string
	}{
		{ir.IPv4, []string{
			"-A INPUT -s 10.0.0.1/32 -p tcp -m tcp --dport 22 -j ACCEPT",
			"-N f2b-sshd",
			"-A f2b-sshd -j RETURN",
			"-I f2b-sshd 1 -s 192.0.2.7/32 -j REJECT --reject-with icmp-port-unreachable",
			"-I INPUT -p tcp -m multiport --dports 22,80 -j f2b-sshd",
			"-A FORWARD -i veth0 ! -o veth1 -p udp -m udp --sport 1000:2000 -m comment --comment \"a b\" -j DROP",
			"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
			"-A INPUT -p icmp -m icmp --icmp-type 8 -m limit --limit 5/sec -j LOG --log-prefix \"ping \"",
			"-A OUTPUT -m mark --mark 0x1/0xff -j MARK --set-xmark 0x2/0xff",
			"-D f2b-sshd -s 192.0.2.7/32 -j REJECT --reject-with icmp-port-unreachable",
			"-D INPUT 1",
			"-t nat -A POSTROUTING -s 10.9.0.0/16 -o eth0 -j MASQUERADE",
			"-t nat -N DOCKER",
			"-t nat -I PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
			"-t nat -A DOCKER -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
		}},
		{ir.IPv6, []string{
			"-A INPUT -s 2001:db8::1/128 -p tcp -m tcp --dport 22 -j ACCEPT",
			"-I INPUT -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT",
			"-D INPUT -s 2001:db8::1/128 -p tcp -m tcp --dport 22 -j ACCEPT",
		}},
	}
	for _, tt := range tests {
		rs := ir.NewRuleset(tt.fam)
		for _, line := range tt.cmds {
			args := splitArgs(line)
			cmd, err := iptables.ParseCommandWith(tt.fam, args, iptables.ParseOptions{})
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			next := rs.Clone()
			if _, err := cmd.Apply(next); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if !cacheableChange(cmd.Kind) {
				t.Fatalf("%s: not a command the cache keeps", line)
			}
			orderChains(next)
			if err := asDecoded(next); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			saved, err := next.MarshalBinary()
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			decoded, err := ir.UnmarshalRuleset(saved)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			dataplane.ApplyCounters(next, nil)
			dataplane.ApplyCounters(decoded, nil)
			if !reflect.DeepEqual(next, decoded) {
				t.Fatalf("after %q the kept ruleset differs from its decode:\nkept    %+v\ndecoded %+v", line, next, decoded)
			}
			rs = next
		}
	}
}

// splitArgs splits a command line at spaces, keeping double-quoted words.
func splitArgs(line string) []string {
	var out []string
	for i, part := range strings.Split(line, "\"") {
		if i%2 == 1 {
			out = append(out, part)
			continue
		}
		out = append(out, strings.Fields(part)...)
	}
	return out
}

// TestReadOnlyCommand: which failed commands leave the agent's kept state.
func TestReadOnlyCommand(t *testing.T) {
	tests := []struct {
		name string
		line string
		want bool
	}{
		{"iptables", "-w -C INPUT -s 10.0.0.1/32 -j DROP", true},
		{"ip6tables", "-S INPUT", true},
		{"iptables", "-L -n -v", true},
		{"iptables", "-L -Z", false},
		{"iptables", "-A INPUT -j DROP", false},
		{"iptables", "-D INPUT 1", false},
		{"iptables", "--bogus", false},
		{"iptables-restore", "-w", false},
	}
	for _, tt := range tests {
		args := splitArgs(tt.line)
		if got := readOnlyCommand(tt.name, args); got != tt.want {
			t.Errorf("%s %s: read only %v, want %v", tt.name, tt.line, got, tt.want)
		}
	}
}

// TestCmdCacheRestoreMatchesDecode: after each restore the agent's cache
// keeps (a first load, then --noflush restores as kube-proxy's partial
// syncs write them: chains flushed and written again, chains added and
// deleted, tables added, counters given), the kept ruleset is the one a
// decode of its saved binary form gives, Handles and all; each restore
// starts from the ruleset the previous one kept, as in the agent.
func TestCmdCacheRestoreMatchesDecode(t *testing.T) {
	steps := []struct {
		noflush bool
		input   string
	}{
		{false, reuseRunningText},
		{true, "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-A1 - [0:0]\n" +
			"-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m comment --comment \"ns/a:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-A\n" +
			"-A KUBE-SVC-A -m comment --comment \"ns/a:http -> 10.1.0.1:8080\" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A1\n" +
			"-A KUBE-SEP-A1 -s 10.1.0.1/32 -m comment --comment ns/a:http -j MARK --set-xmark 0x4000/0x4000\n" +
			"-A KUBE-SEP-A1 -p tcp -m comment --comment ns/a:http -m tcp -j DNAT --to-destination 10.1.0.1:8080\nCOMMIT\n"},
		{true, "*filter\n:SVC - [0:0]\n-A SVC -s 10.0.0.3/32 -m conntrack --ctstate NEW -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n"},
		{true, "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-A1 - [0:0]\n:KUBE-SEP-A2 - [0:0]\n" +
			"-A KUBE-SVC-A -j KUBE-SEP-A2\n-A KUBE-SEP-A2 -p tcp -j DNAT --to-destination 10.1.0.2:8080\n-X KUBE-SEP-A1\nCOMMIT\n"},
		{true, "*mangle\n:PREROUTING ACCEPT [3:180]\n:MARKS - [0:0]\n[7:420] -A PREROUTING -i lo -j MARKS\n-A MARKS -j MARK --set-mark 0x1\nCOMMIT\n"},
		{true, "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m limit --limit 3/min -j LOG --log-prefix \"in \"\nCOMMIT\n"},
		{true, "*filter\nCOMMIT\n"},
	}
	var rs *ir.Ruleset
	for i, st := range steps {
		next := restoreText(t, rs, st.input, st.noflush)
		orderChains(next)
		if err := asDecoded(next); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		saved, err := next.MarshalBinary()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		decoded, err := ir.UnmarshalRuleset(saved)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		// As at the next command's lookup: counters read (all of them,
		// the restore's own given included), Handles numbered.
		live := make([]ir.Counters, numCounters(next))
		dataplane.ApplyCounters(next, live)
		dataplane.ApplyCounters(decoded, live)
		if !reflect.DeepEqual(next, decoded) {
			for ti, tb := range append([]*ir.Ruleset{next}, next.Tables...) {
				db := append([]*ir.Ruleset{decoded}, decoded.Tables...)[ti]
				t.Logf("table %q/%q chains %d/%d", tb.Table, db.Table, len(tb.Chains), len(db.Chains))
				for ci, c := range tb.Chains {
					if !reflect.DeepEqual(c, db.Chains[ci]) {
						t.Logf("chain %+v\n vs %+v", *c, *db.Chains[ci])
						for ri, r := range c.Rules {
							t.Logf("rule %+v\n vs %+v", *r, *db.Chains[ci].Rules[ri])
						}
					}
				}
			}
			t.Fatalf("after step %d the kept ruleset differs from its decode:\nkept    %+v\ndecoded %+v", i, next, decoded)
		}
		if madeRules(next) != 0 {
			t.Fatalf("step %d: rules without a Handle after the lookup", i)
		}
		rs = next
	}
}

// TestAsDecodedFrom: after a served change of a ruleset whose rules have
// their Handles (filter chains and a nat table), the walk from the first
// rule without one (keptGeneration.numbered) leaves the same ruleset as a
// walk of every rule, and a walk from past it leaves that rule alone.
func TestAsDecodedFrom(t *testing.T) {
	base := "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n" +
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:USER - [0:0]\n" +
		"-A INPUT -s 10.0.0.1/32 -j ACCEPT\n-A INPUT -j USER\n-A FORWARD -p udp -m udp --dport 53 -j ACCEPT\n" +
		"-A FORWARD -p tcp -m tcp --dport 22 -j DROP\n-A OUTPUT -d 10.0.0.2/32 -j ACCEPT\n-A USER -j RETURN\nCOMMIT\n"
	for _, line := range []string{
		"-A FORWARD -s 10.9.0.1/32 -p udp -m udp --sport 1000 -j ACCEPT",
		"-I FORWARD -p icmp -j ACCEPT",
		"-A INPUT -m comment --comment \"x y\" -j LOG --log-prefix \"in \"",
		"-A OUTPUT -p tcp -m tcp --dport 80 -j REJECT --reject-with tcp-reset",
		"-I USER 1 -s 192.0.2.7/32 -j DROP",
	} {
		rs := restoreText(t, nil, base, false)
		orderChains(rs)
		if err := asDecoded(rs); err != nil {
			t.Fatal(err)
		}
		dataplane.ApplyCounters(rs, make([]ir.Counters, numCounters(rs)))
		cmd, err := iptables.ParseCommandWith(ir.IPv4, splitArgs(line), iptables.ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		orderChains(rs)
		from := -1
		compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
			if r != nil && r.Handle == 0 && from < 0 {
				from = i
			}
		})
		if from < compiler.NumChains {
			t.Fatalf("%s: no rule made", line)
		}
		all, part := rs.Clone(), rs.Clone()
		made := ruleAt(part, from)
		if err := asDecoded(all); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if err := asDecodedFrom(part, from); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if ruleAt(part, from) == made || !reflect.DeepEqual(all, part) {
			t.Errorf("%s: the walk from counter %d differs from the whole walk", line, from)
		}
		// Nothing before from is walked: from one past the rule made,
		// the rule stays as the command made it.
		past := rs.Clone()
		made = ruleAt(past, from)
		if err := asDecodedFrom(past, from+1); err != nil || ruleAt(past, from) != made {
			t.Errorf("%s: the walk from counter %d replaced the rule at %d (%v)", line, from+1, from, err)
		}
	}
}

// ruleAt returns the rule with counter index i of rs.
func ruleAt(rs *ir.Ruleset, i int) *ir.Rule {
	var at *ir.Rule
	compiler.ForEachCounter(rs, func(k int, _ compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
		if k == i {
			at = r
		}
	})
	return at
}
