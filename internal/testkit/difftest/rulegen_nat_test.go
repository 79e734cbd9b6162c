package difftest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNATRulesetsLoad: the random nat rulesets parse and compile in xfw
// (both tables), use every translation (DNAT and REDIRECT in nat OUTPUT
// too, of every protocol; SNAT in nat INPUT, of UDP too), and are the same
// for a seed.
func TestNATRulesetsLoad(t *testing.T) {
	seen := map[string]bool{}
	for seed := int64(1); seed <= 60; seed++ {
		text := loadNATRuleset(t, ir.IPv4, seed)
		for _, w := range []string{"-j DNAT", "-j SNAT", "-j MASQUERADE", "-j REDIRECT", "--random-fully", "--persistent", "--to-ports"} {
			if strings.Contains(text, w) {
				seen[w] = true
			}
		}
		natTable := text[:strings.Index(text, "*filter")]
		for _, l := range strings.Split(natTable, "\n") {
			if strings.HasPrefix(l, "-A OUTPUT ") && (strings.Contains(l, "-j DNAT") || strings.Contains(l, "-j REDIRECT")) {
				seen["nat OUTPUT"] = true
			}
			if natDstNotTCPUDP(l) {
				seen["DNAT without tcp or udp"] = true
			}
			if strings.HasPrefix(l, "-A OUTPUT ") && natDstNotTCPUDP(l) {
				seen["nat OUTPUT's DNAT without tcp or udp"] = true
			}
			if strings.HasPrefix(l, "-A INPUT ") && strings.Contains(l, "-j SNAT") {
				seen["nat INPUT's SNAT"] = true
			}
			if strings.HasPrefix(l, "-A INPUT ") && strings.Contains(l, "-p udp") && strings.Contains(l, "-j SNAT") {
				seen["nat INPUT's SNAT of UDP"] = true
			}
		}
		if !HasNATTable(text) || !Stateful(text) {
			t.Fatalf("seed %d: not a stateful nat ruleset", seed)
		}
	}
	if len(seen) != 12 {
		t.Errorf("the rulesets use only %v", seen)
	}
}

// loadNATRuleset returns the random nat ruleset of family fam and seed,
// checked to be the same when drawn again and to parse and compile in xfw
// (both tables).
func loadNATRuleset(t *testing.T, fam ir.Family, seed int64) string {
	t.Helper()
	plan := NewPlan(fam, DefaultSubnet)
	text := GenerateNATRuleset(seed, plan)
	if text != GenerateNATRuleset(seed, plan) {
		t.Fatalf("seed %d: two rulesets", seed)
	}
	rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatalf("seed %d: %v\n%s", seed, err, text)
	}
	if _, err := compiler.Compile(rs, compiler.Options{}); err != nil {
		t.Fatalf("seed %d: compile: %v\n%s", seed, err, text)
	}
	return text
}

// TestNATRandomRangeFilterNamesRange: a filter rule naming a translation
// whose port a nat rule picks at random from a range (--random,
// --random-fully) names the whole range, not its first port: each side
// picks its own port (difftest nat seed 37: DNAT to 203.0.113.20:80-81
// --random, and a DROP of port 80 in filter OUTPUT).
func TestNATRandomRangeFilterNamesRange(t *testing.T) {
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	target := regexp.MustCompile(`--to-(?:destination|source) ([0-9.]+)(?:-[0-9.]+)?:([0-9]+)-([0-9]+)\b.*--random`)
	ranges := 0
	for seed := int64(1); seed <= 400; seed++ {
		text := GenerateNATRuleset(seed, plan)
		at := strings.Index(text, "*filter")
		for _, l := range strings.Split(text[:at], "\n") {
			m := target.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			ranges++
			single := "-d " + m[1] + " -p "
			for _, f := range strings.Split(text[at:], "\n") {
				if strings.Contains(f, single) && strings.Contains(f, "--dport "+m[2]+" ") {
					t.Errorf("seed %d: %q names one port of %q", seed, f, l)
				}
			}
		}
	}
	if ranges == 0 {
		t.Fatal("no nat rule picks a port at random from a range")
	}
}

// TestNAT6RulesetsLoad: the random IPv6 nat rulesets parse and compile in
// xfw (both tables), use every translation (DNAT of every protocol in nat
// OUTPUT, SNAT in nat INPUT among them), ICMPv6 echo, SNAT without -p,
// ports in brackets, and are the same for a seed; the kernel's
// ip6tables-restore accepting them is checked by the tester's runs.
func TestNAT6RulesetsLoad(t *testing.T) {
	seen := map[string]bool{}
	for seed := int64(1); seed <= 60; seed++ {
		text := loadNATRuleset(t, ir.IPv6, seed)
		natTable := text[:strings.Index(text, "*filter")]
		for _, w := range []string{"-j DNAT", "-j SNAT", "-j MASQUERADE", "-j REDIRECT", "--icmpv6-type", "]:", "--random"} {
			if strings.Contains(natTable, w) {
				seen[w] = true
			}
		}
		for _, l := range strings.Split(natTable, "\n") {
			if strings.HasPrefix(l, "-A POSTROUTING ") && !strings.Contains(l, " -p ") && strings.Contains(l, "NAT") {
				seen["no -p"] = true
			}
			if natDstNotTCPUDP(l) {
				seen["DNAT without tcp or udp"] = true
			}
			if strings.HasPrefix(l, "-A OUTPUT ") && natDstNotTCPUDP(l) {
				seen["nat OUTPUT's DNAT without tcp or udp"] = true
			}
			if strings.HasPrefix(l, "-A INPUT ") && strings.Contains(l, "-j SNAT") {
				seen["nat INPUT's SNAT"] = true
			}
			if strings.HasPrefix(l, "-A INPUT ") && strings.Contains(l, "MASQUERADE") {
				t.Errorf("seed %d: MASQUERADE in nat INPUT (the kernel refuses it): %s", seed, l)
			}
			if strings.Contains(l, "10.") || strings.Contains(l, "icmp-type") {
				t.Errorf("seed %d: an IPv4 rule: %s", seed, l)
			}
		}
	}
	if len(seen) != 11 {
		t.Errorf("the rulesets use only %v", seen)
	}
}

// natDstNotTCPUDP reports whether nat rule line l is a DNAT or REDIRECT
// not restricted to TCP or UDP (the address alone translated).
func natDstNotTCPUDP(l string) bool {
	return (strings.Contains(l, "-j DNAT") || strings.Contains(l, "-j REDIRECT")) &&
		!strings.Contains(l, " -p tcp") && !strings.Contains(l, " -p udp")
}
