package iptables_test

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
)

// codecCorpus returns rulesets (restore text, by name) that cover every
// match and target the front end accepts: the oracle's rule
// specifications one by one, the realistic rulesets, the conformance
// dumps and random rulesets of the differential generator, with sets.
func codecCorpus(t *testing.T) map[string]struct {
	fam  ir.Family
	text string
	sets iptables.SetLookup
} {
	out := map[string]struct {
		fam  ir.Family
		text string
		sets iptables.SetLookup
	}{}
	f, err := os.Open("testdata/oracle_rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		fields := strings.SplitN(l, " ", 3)
		if len(fields) < 3 {
			continue
		}
		fam := ir.IPv4
		if fields[0] == "6" {
			fam = ir.IPv6
		}
		decl := ""
		if fields[1] != "INPUT" && fields[1] != "FORWARD" && fields[1] != "OUTPUT" {
			decl = ":" + fields[1] + " - [0:0]\n"
		}
		text := "*filter\n" + decl + "-A " + fields[1] + " " + fields[2] + "\nCOMMIT\n"
		out["oracle_rules.txt:"+strings.TrimSpace(l)] = struct {
			fam  ir.Family
			text string
			sets iptables.SetLookup
		}{fam, text, nil}
	}
	for name, c := range tablesCorpus(t) {
		out[name] = struct {
			fam  ir.Family
			text string
			sets iptables.SetLookup
		}{c.fam, c.text, nil}
	}
	named, err := difftest.Realistic()
	if err != nil {
		t.Fatal(err)
	}
	dumps, _, err := difftest.Dumps("../../../shared/conformance/iptables/dumps")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(named, dumps...) {
		out[n.Name] = struct {
			fam  ir.Family
			text string
			sets iptables.SetLookup
		}{n.Family, n.Text, nil}
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		for seed := int64(1); seed <= 40; seed++ {
			opts := difftest.DefaultGenOptions
			opts.Sets = seed%2 == 0
			text := difftest.GenerateRuleset(seed, difftest.NewPlan(fam, 1), opts)
			out["random "+fam.String()+" "+string(rune('0'+seed%10))+"/"+strings.Repeat("x", int(seed/10))] = struct {
				fam  ir.Family
				text string
				sets iptables.SetLookup
			}{fam, text, difftest.SetLookup(text)}
		}
	}
	return out
}

// TestBinaryRulesetRoundTrip checks that the binary form the control plane
// keeps with a running ruleset gives back the very ruleset: the same IR
// (counters aside, which the data plane keeps) and the same saved text.
func TestBinaryRulesetRoundTrip(t *testing.T) {
	tried, matches := 0, map[string]bool{}
	for name, c := range codecCorpus(t) {
		rs, err := iptables.Restore(c.fam, strings.NewReader(c.text), nil, iptables.RestoreOptions{Sets: c.sets})
		if err != nil {
			continue // a specification iptables refuses
		}
		for _, table := range iptables.SaveOrder(rs) {
			for _, ch := range table.Chains {
				ch.Counters = ir.Counters{}
				if len(ch.Rules) == 0 {
					ch.Rules = nil // a cloned, untouched chain has an empty list
				}
				for _, r := range ch.Rules {
					r.Counters = ir.Counters{}
					for _, m := range r.Matches {
						matches[m.ModuleName()] = true
					}
					if r.Target.Nat != nil {
						matches["target "+iptables.FormatRule(rs.Family, "", r, false)[4:]] = true
					}
				}
			}
		}
		tried++
		data, err := rs.MarshalBinary()
		if err != nil {
			t.Errorf("%s: encode: %v", name, err)
			continue
		}
		back, err := ir.UnmarshalRuleset(data)
		if err != nil {
			t.Errorf("%s: decode: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(rs, back) {
			t.Errorf("%s: decoded IR differs: %s", name, irDiff(rs, back))
		}
		if a, b := withoutComments(iptables.SaveAll(rs, "", false)), withoutComments(iptables.SaveAll(back, "", false)); a != b {
			t.Errorf("%s: saved text differs\nwant %s\ngot  %s", name, a, b)
		}
		for cut := 0; cut < len(data); cut += 1 + len(data)/7 {
			if _, err := ir.UnmarshalRuleset(data[:cut]); err == nil {
				t.Errorf("%s: a binary ruleset cut to %d of %d bytes decoded", name, cut, len(data))
			}
		}
	}
	if tried < 400 {
		t.Errorf("only %d rulesets of the corpus restored", tried)
	}
	for _, m := range []string{"tcp", "udp", "multiport", "icmp", "icmp6", "iprange", "comment", "length", "ttl", "hl", "mac", "set", "conntrack", "state"} {
		if !matches[m] {
			t.Errorf("no ruleset of the corpus uses -m %s", m)
		}
	}
	nat := 0
	for m := range matches {
		if strings.HasPrefix(m, "target ") {
			nat++
		}
	}
	if nat < 40 {
		t.Errorf("only %d NAT target rules in the corpus", nat)
	}
	t.Logf("%d rulesets round-tripped; matches %v", tried, matches)
}

// tablesCorpus returns, for every accepted case of the recorded tables
// transcripts (testdata/nat_oracle_*.txt), its table as iptables -S
// printed it, as restore text.
func tablesCorpus(t *testing.T) map[string]struct {
	fam  ir.Family
	text string
} {
	out := map[string]struct {
		fam  ir.Family
		text string
	}{}
	for fam, file := range map[ir.Family]string{ir.IPv4: "testdata/nat_oracle_v4.txt", ir.IPv6: "testdata/nat_oracle_v6.txt"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var name string
		var text strings.Builder
		flush := func() {
			if text.Len() > 0 {
				out[file+":"+name] = struct {
					fam  ir.Family
					text string
				}{fam, text.String() + "COMMIT\n"}
			}
			text.Reset()
		}
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(l, "#") || l == "":
			case !strings.HasPrefix(l, "  "):
				flush()
				name = l
			case strings.HasPrefix(l, "  S: "):
				if text.Len() == 0 {
					table := "filter"
					if f := strings.Fields(name); len(f) > 1 && f[0] == "-t" {
						table = f[1]
					}
					text.WriteString("*" + table + "\n")
				}
				words := strings.Fields(l[5:])
				switch words[0] {
				case "-P":
					fmt.Fprintf(&text, ":%s %s [0:0]\n", words[1], words[2])
				case "-N":
					fmt.Fprintf(&text, ":%s - [0:0]\n", words[1])
				default:
					text.WriteString(l[5:] + "\n")
				}
			}
		}
		flush()
	}
	return out
}

// irDiff describes the first difference between two rulesets.
func irDiff(a, b *ir.Ruleset) string {
	if len(a.Chains) != len(b.Chains) {
		return fmt.Sprintf("%d chains, decoded %d", len(a.Chains), len(b.Chains))
	}
	for i, c := range a.Chains {
		d := b.Chains[i]
		if len(c.Rules) != len(d.Rules) {
			return fmt.Sprintf("chain %s: %d rules, decoded %d", c.Name, len(c.Rules), len(d.Rules))
		}
		for j, r := range c.Rules {
			if !reflect.DeepEqual(r, d.Rules[j]) {
				return fmt.Sprintf("chain %s rule %d:\n%#v\n%#v\nmatches %#v / %#v\ntarget log %#v / %#v", c.Name, j+1, *r, *d.Rules[j], r.Matches, d.Rules[j].Matches, r.Target.Log, d.Rules[j].Target.Log)
			}
		}
		cc, dd := *c, *d
		cc.Rules, dd.Rules = nil, nil
		if !reflect.DeepEqual(cc, dd) {
			return fmt.Sprintf("chain %#v, decoded %#v", cc, dd)
		}
	}
	return "rulesets"
}

// withoutComments drops the "# Generated/Completed on DATE" lines of a
// save, whose clock second may change between two saves.
func withoutComments(save string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(save, "\n") {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}
