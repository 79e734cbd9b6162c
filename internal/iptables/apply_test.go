package iptables

import (
	"errors"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// run executes iptables command lines on rs, stopping at the first error.
func run(t *testing.T, rs *ir.Ruleset, lines ...string) error {
	t.Helper()
	for _, l := range lines {
		args, err := shellSplit(l)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseCommand(rs.Family, args)
		if err != nil {
			return err
		}
		if _, err := c.Apply(rs); err != nil {
			return err
		}
	}
	return nil
}

// TestApply checks command execution and its errors (expected values from
// iptables 1.8.9).
func TestApply(t *testing.T) {
	tests := []struct {
		name   string
		setup  []string
		cmd    string
		status int
		msg    string
		save   string // rules and chain lines expected afterwards ("" = unchecked)
	}{
		{"append to missing chain", nil, "-A nope -j ACCEPT", 1, "iptables: No chain/target/match by that name.", ""},
		{"jump to missing chain", nil, "-A INPUT -j nope", 2, "iptables v1.8.9 (legacy): Couldn't load target `nope':No such file or directory\n\nTry `iptables -h' or 'iptables --help' for more information.", ""},
		{"goto missing chain", nil, "-A INPUT -g nope", 2, "iptables v1.8.9 (legacy): goto 'nope' is not a chain\nTry `iptables -h' or 'iptables --help' for more information.", ""},
		{"jump to built-in chain", nil, "-A FORWARD -j INPUT", 1, "iptables: Invalid argument. Run `dmesg' for more information.", ""},
		{"loop", []string{"-N a", "-N b", "-A a -j b", "-A b -j a"}, "-A INPUT -j a", 1, "iptables: Too many levels of symbolic links.", ""},
		{"unreachable loop is fine", []string{"-N a", "-N b", "-A a -j b"}, "-A b -j a", 0, "", ":a - [0:0]\n:b - [0:0]\n-A a -j b\n-A b -j a"},
		{"mac reachable from OUTPUT", []string{"-N x", "-A x -m mac --mac-source 0:1:2:3:4:5"}, "-A OUTPUT -j x", 1, "iptables: Invalid argument. Run `dmesg' for more information.", ""},
		{"delete referenced chain", []string{"-N a", "-A INPUT -j a"}, "-X a", 1, "iptables: Too many links.", ""},
		{"delete non-empty chain", []string{"-N a", "-A a -j ACCEPT"}, "-X a", 1, "iptables: Directory not empty.", ""},
		{"delete built-in chain", nil, "-X INPUT", 1, "iptables: Invalid argument. Run `dmesg' for more information.", ""},
		{"create existing chain", nil, "-N INPUT", 1, "iptables: Chain already exists.", ""},
		{"chain named like a target", nil, "-N MARK", 2, "iptables v1.8.9 (legacy): chain name may not clash with target name\nTry `iptables -h' or 'iptables --help' for more information.", ""},
		{"rename keeps references", []string{"-N a", "-A INPUT -j a", "-A INPUT -g a"}, "-E a b", 0, "", ":b - [0:0]\n-A INPUT -j b\n-A INPUT -g b"},
		{"rename onto built-in", []string{"-N a"}, "-E a INPUT", 1, "iptables: File exists.", ""},
		{"policy on user chain", []string{"-N a"}, "-P a DROP", 1, "iptables: Bad built-in chain name.", ""},
		{"bad policy", nil, "-P INPUT REJECT", 1, "iptables: Bad policy name. Run `dmesg' for more information.", ""},
		{"insert with list reverses", nil, "-I INPUT -s 1.1.1.1,2.2.2.2", 0, "", "-A INPUT -s 2.2.2.2/32\n-A INPUT -s 1.1.1.1/32"},
		{"insert too far", nil, "-I INPUT 2 -j ACCEPT", 1, "iptables: Index of insertion too big.", ""},
		{"delete by spec", []string{"-A INPUT -s 1.2.3.4 -j DROP", "-A INPUT -j ACCEPT"}, "-D INPUT -s 1.2.3.4/32 -j DROP", 0, "", "-A INPUT -j ACCEPT"},
		{"delete missing rule", nil, "-D INPUT -j DROP", 1, "iptables: Bad rule (does a matching rule exist in that chain?).", ""},
		{"delete -i + matches no -i", []string{"-A INPUT -j RETURN"}, "-D INPUT -i + -j RETURN", 0, "", ""},
		{"replace", []string{"-A INPUT -j DROP"}, "-R INPUT 1 -j ACCEPT", 0, "", "-A INPUT -j ACCEPT"},
		{"chain named like a target wins over the target", []string{"-N x", "-E x LOG"}, "-A INPUT -j LOG", 0, "", ":LOG - [0:0]\n-A INPUT -j LOG"},
	}
	for _, tt := range tests {
		rs := ir.NewRuleset(ir.IPv4)
		if err := run(t, rs, tt.setup...); err != nil {
			t.Fatalf("%s: setup: %v", tt.name, err)
		}
		before := SaveTable(rs, true)
		err := run(t, rs, tt.cmd)
		var e *Error
		switch {
		case tt.status == 0 && err != nil:
			t.Errorf("%s: %v", tt.name, err)
			continue
		case tt.status != 0 && !errors.As(err, &e):
			t.Errorf("%s: got %v, want error", tt.name, err)
			continue
		case tt.status != 0 && (e.Status != tt.status || e.Msg != tt.msg):
			t.Errorf("%s:\n got (%d) %q\nwant (%d) %q", tt.name, e.Status, e.Msg, tt.status, tt.msg)
		case tt.status != 0 && SaveTable(rs, true) != before:
			t.Errorf("%s: failed command changed the ruleset", tt.name)
		}
		if tt.save != "" {
			var got []string
			for _, l := range strings.Split(SaveTable(rs, false), "\n") {
				if strings.HasPrefix(l, "-A") || (strings.HasPrefix(l, ":") && !strings.Contains(l, " ACCEPT [")) {
					got = append(got, l)
				}
			}
			if strings.Join(got, "\n") != tt.save {
				t.Errorf("%s: got\n%s\nwant\n%s", tt.name, strings.Join(got, "\n"), tt.save)
			}
		}
	}
}

// TestRulesEqual checks the -D/-C rule comparison.
func TestRulesEqual(t *testing.T) {
	tests := []struct {
		fam   ir.Family
		a, b  string
		equal bool
	}{
		{ir.IPv4, "-s 1.2.3.4 -j DROP", "-s 1.2.3.4/32 -j DROP -c 5 6", true},
		{ir.IPv4, "-p tcp --dport 22", "-p 6 -m tcp --dport ssh", true},
		{ir.IPv4, "-p tcp -m tcp --sport 0:65535", "-p tcp -m tcp", true},
		{ir.IPv4, "-j LOG --log-level 4", "-j LOG", true},
		{ir.IPv4, "-p all", "", true},
		{ir.IPv6, "-p all", "", false},
		{ir.IPv4, "-i +", "", true},
		{ir.IPv4, "-s 0.0.0.0/0", "", true},
		{ir.IPv4, "! -s 0.0.0.0/0", "", false},
		{ir.IPv4, "-j ACCEPT", "-j DROP", false},
		{ir.IPv4, "-m comment --comment a -m comment --comment b", "-m comment --comment b -m comment --comment a", false},
		{ir.IPv4, "-g x", "-j x", false},
	}
	handmade := &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: protoTCP},
		Matches: []ir.Match{&ir.TCPMatch{DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 22, Last: 22}}}}}
	if parsed := mustParseRule(t, ir.IPv4, "x", "-p tcp --dport 22")[0]; !RulesEqual(ir.IPv4, handmade, parsed) {
		t.Error("a hand-built rule with an absent --sport differs from the parsed one")
	}
	if got := FormatRuleSpec(ir.IPv4, handmade); got != "-p tcp -m tcp --dport 22" {
		t.Errorf("hand-built rule prints as %q", got)
	}
	for _, tt := range tests {
		a := mustParseRule(t, tt.fam, "x", tt.a)[0]
		b := mustParseRule(t, tt.fam, "x", tt.b)[0]
		if got := RulesEqual(tt.fam, a, b); got != tt.equal {
			t.Errorf("%s %q vs %q: equal %v, want %v", tt.fam, tt.a, tt.b, got, tt.equal)
		}
	}
}
