package iptables_test

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// FuzzParseCommand checks that no command line panics and that whatever
// parses prints as a rule that parses and prints the same (printing may lose
// what iptables-save loses too, such as an ICMP code range's upper end).
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-A INPUT -qf -p tcp",
		"-I INPUT 2 -s 1.2.3.4,5.6.7.8 ! -d ::1 -m comment --comment x",
		"-A FORWARD -p icmp --icmp-type 3/1:4 -j LOG --log-prefix a",
		"-A INPUT -p udp -m multiport --ports 1:2,3 -j REJECT --reject-with tcp-reset",
		"-N x -6 --bad",
		"-D INPUT -m iprange --src-range 1.1.1.1-2.2.2.2 -m mac --mac-source 1:2:3:4:5:6",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, v6 bool) {
		fam := ir.IPv4
		if v6 {
			fam = ir.IPv6
		}
		words, err := iptables.Tokenize(line)
		if err != nil {
			return
		}
		c, err := iptables.ParseCommand(fam, words)
		if err != nil {
			return
		}
		rs := ir.NewRuleset(fam)
		rs.Chains = append(rs.Chains, &ir.Chain{Name: "x"}, &ir.Chain{Name: "y"})
		if _, err := c.Apply(rs); err != nil {
			return
		}
		for _, ch := range rs.Chains {
			for _, r := range ch.Rules {
				if strings.Contains(r.InIface.Name, " ") || strings.Contains(r.OutIface.Name, " ") {
					// iptables takes such a name with a warning and
					// prints it unquoted, as xfw does: it does not
					// parse again in either.
					continue
				}
				spec := iptables.FormatRuleSpec(fam, r)
				w, err := iptables.Tokenize(spec)
				if err != nil {
					t.Fatalf("printed rule %q does not tokenize: %v", spec, err)
				}
				again, err := iptables.ParseRule(fam, "y", w)
				if err != nil {
					if strings.Contains(err.Error(), "Can't use") || strings.Contains(err.Error(), "Invalid argument") {
						return
					}
					t.Fatalf("printed rule %q does not parse: %v", spec, err)
				}
				if again := iptables.FormatRuleSpec(fam, again[0]); again != spec {
					t.Fatalf("%q: printed %q prints again as %q", line, spec, again)
				}
			}
		}
	})
}

// FuzzRestore checks that no input panics iptables-restore, and that what
// a restore with counters leaves, saved, restores and saves the same.
func FuzzRestore(f *testing.F) {
	f.Add("*filter\n:INPUT DROP [1:2]\n:x - [0:0]\n[3:4] -A INPUT -j x\nCOMMIT\n")
	f.Add("*filter\n[1:] -A INPUT \"a\\\"b\nCOMMIT")
	f.Add("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080\nCOMMIT\n")
	f.Add("*mangle\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu\nCOMMIT\n")
	f.Fuzz(func(t *testing.T, in string) {
		rs, err := iptables.Restore(ir.IPv4, strings.NewReader(in), nil, iptables.RestoreOptions{Counters: true})
		_, _ = iptables.Restore(ir.IPv6, strings.NewReader(in), nil, iptables.RestoreOptions{NoFlush: true})
		if err != nil || hasSpacedIface(rs) {
			return // iptables-save prints such a name unquoted too
		}
		saved := withoutComments(iptables.SaveAll(rs, "", true))
		again, err := iptables.Restore(ir.IPv4, strings.NewReader(saved), nil, iptables.RestoreOptions{Counters: true})
		if err != nil {
			t.Fatalf("restore of %q saves as %q, which does not restore: %v", in, saved, err)
		}
		if twice := withoutComments(iptables.SaveAll(again, "", true)); twice != saved {
			t.Fatalf("restore of %q saves as %q, restored again as %q", in, saved, twice)
		}
	})
}

// hasSpacedIface reports whether a rule of rs's tables names an interface
// with a space (taken with a warning, printed unquoted, as iptables does).
func hasSpacedIface(rs *ir.Ruleset) bool {
	for _, t := range iptables.SaveOrder(rs) {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if strings.Contains(r.InIface.Name, " ") || strings.Contains(r.OutIface.Name, " ") {
					return true
				}
			}
		}
	}
	return false
}
