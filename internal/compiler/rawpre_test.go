package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRawPreLayout checks which rulesets have PREROUTING segments judged
// before the route lookup (Layout.RawPre) and, for those, that each walk's
// position is right after the last of them (its policy entry last, or the
// reroute entries after it), the INPUT and FORWARD segments hold the same
// counters, and no such walk is trivial.
func TestRawPreLayout(t *testing.T) {
	const raw, mangle = "raw/PREROUTING/policy", "mangle/PREROUTING/policy"
	cases := []struct {
		name  string
		rules []string
		last  string // the policy of the last segment judged before routing ("": none)
		// passive: those segments only count (Layout.PrePassive)
		passive bool
	}{
		{name: "raw DROP", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}, last: raw},
		{name: "raw policy DROP, no rule", rules: []string{"-t raw -P PREROUTING DROP"}, last: raw},
		{name: "empty raw PREROUTING", rules: []string{"-t raw -A OUTPUT -p icmp"}, last: raw, passive: true},
		{name: "empty raw and mangle PREROUTING", last: mangle, passive: true,
			rules: []string{"-t raw -A OUTPUT -p icmp", "-t mangle -A OUTPUT -p icmp"}},
		{name: "empty raw, mangle DROP", last: mangle,
			rules: []string{"-t raw -A OUTPUT -p icmp", "-t mangle -A PREROUTING -p icmp -j DROP"}},
		{name: "user chain, RETURN, LOG, MARK", last: raw, rules: []string{"-t raw -N R",
			"-t raw -A PREROUTING -p udp -j R", "-t raw -A R -p udp --dport 53 -j RETURN",
			"-t raw -A R -j LOG --log-prefix raw", "-t raw -A R -j MARK --set-mark 5", "-t raw -A R -j DROP"}},
		{name: "NOTRACK", last: raw, rules: []string{"-t raw -A PREROUTING -p udp -j NOTRACK",
			"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}},
		{name: "CT --notrack in a user chain", last: raw, rules: []string{"-t raw -N R", "-t raw -A PREROUTING -j R",
			"-t raw -A R -p udp -j CT --notrack"}},
		{name: "state match", last: raw, rules: []string{"-t raw -A PREROUTING -m conntrack --ctstate INVALID -j DROP",
			"-t raw -A PREROUTING -m state --state UNTRACKED -j ACCEPT"}},
		{name: "conntrack match on the tuple", rules: []string{"-t raw -A PREROUTING -m conntrack --ctorigsrc 10.0.0.1 -j DROP"}},
		{name: "connmark match", rules: []string{"-t raw -A PREROUTING -m connmark --mark 1 -j DROP"}},
		{name: "mangle PREROUTING only", rules: []string{"-t mangle -A PREROUTING -s 10.100.0.0/16 -j DROP"}, last: mangle},
		{name: "mangle MARK", last: mangle, rules: []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 7"}},
		{name: "mangle MARK, nat after it", last: mangle, rules: []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 7",
			"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.1.1.1"}},
		{name: "raw and mangle", last: mangle, rules: []string{"-t raw -A PREROUTING -p udp -j NOTRACK",
			"-t mangle -A PREROUTING -p udp -j MARK --set-mark 7"}},
		{name: "raw, mangle with a state match", last: raw, rules: []string{"-t raw -A PREROUTING -p udp -j DROP",
			"-t mangle -A PREROUTING -m state --state NEW -j MARK --set-mark 7"}},
		{name: "mangle after raw with a connmark match", rules: []string{"-t raw -A PREROUTING -m connmark --mark 1 -j DROP",
			"-t mangle -A PREROUTING -j MARK --set-mark 7"}},
		{name: "mangle TTL", rules: []string{"-t mangle -A PREROUTING -j TTL --ttl-set 9"}},
		{name: "mangle CONNMARK", rules: []string{"-t mangle -A PREROUTING -j CONNMARK --restore-mark"}},
		{name: "nat PREROUTING only", rules: []string{"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.1.1.1"}},
	}
	for _, tc := range cases {
		rs := parseRuleset(t, ir.IPv4, tc.rules...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g.Layout.PrePassive != tc.passive {
			t.Errorf("%s: PrePassive %v, want %v", tc.name, g.Layout.PrePassive, tc.passive)
		}
		// OUTPUT's is raw OUTPUT's (TestRawOutputLayout).
		if pos := g.Layout.RawPre[ChainOutput]; pos != 0 && counterName(g, g.Entries[pos-2].Rule) != "raw/OUTPUT/policy" {
			t.Errorf("%s: OUTPUT's RawPre %d is not after raw OUTPUT", tc.name, pos)
		}
		var segs [NumChains][]string
		for _, h := range []int{ChainInput, ChainForward} {
			pos := g.Layout.RawPre[h]
			if (pos != 0) != (tc.last != "") {
				t.Errorf("%s: chain %d RawPre %d, want set %v", tc.name, h, pos, tc.last != "")
				continue
			}
			if pos == 0 {
				continue
			}
			// Chains that only count are walked for unrouted packets
			// alone: the walk may stay trivial.
			if _, ok := g.TrivialWalk(h); ok && !g.Layout.PrePassive {
				t.Errorf("%s: chain %d walk trivial with PREROUTING judged first", tc.name, h)
			}
			start, end := g.Walk(h)
			if pos-1 <= start || pos-1 > end {
				t.Fatalf("%s: chain %d RawPre %d outside its walk [%d, %d)", tc.name, h, pos, start, end)
			}
			// The reroute entries (mark_route.go) after the last
			// segment are passed too: the route took its mark.
			last := pos - 2
			for last > start && g.Entries[last].Rule == NoRule {
				if a := g.Entries[last].Action; a != ActReroute && g.Entries[last].Flags&EFProbe == 0 {
					break
				}
				last--
			}
			if e := g.Entries[last]; e.Flags&EFCount == 0 || counterName(g, e.Rule) != tc.last {
				t.Errorf("%s: chain %d: the entry before RawPre is not %s (%+v)", tc.name, h, tc.last, e)
			}
			if g.Layout.NatResume[h] != 0 && g.Layout.NatResume[h] <= pos {
				t.Errorf("%s: chain %d: nat PREROUTING (resume %d) before RawPre %d", tc.name, h, g.Layout.NatResume[h], pos)
			}
			for i := start; i < pos-1; i++ {
				if e := g.Entries[i]; e.Flags&EFCount != 0 && e.Rule != NoRule {
					segs[h] = append(segs[h], counterName(g, e.Rule))
				}
			}
		}
		if tc.last != "" && !slices.Equal(segs[ChainInput], segs[ChainForward]) {
			t.Errorf("%s: INPUT's PREROUTING segments count %v, FORWARD's %v", tc.name, segs[ChainInput], segs[ChainForward])
		}
	}
}

// TestPreEndLayout checks Layout.PreEnd, where the walk of a packet the
// routing drops ends: right after the last PREROUTING segment of the
// INPUT and FORWARD walks (its policy entry, or the reroute entries after
// it), not before RawPre or NatResume, and 0 without PREROUTING chains
// and for OUTPUT.
func TestPreEndLayout(t *testing.T) {
	const raw, mangle, nat = "raw/PREROUTING/policy", "mangle/PREROUTING/policy", "nat/PREROUTING/policy"
	cases := []struct {
		name  string
		rules []string
		last  string // the policy of the walks' last PREROUTING segment ("": none)
	}{
		{name: "filter only", rules: []string{"-A INPUT -p udp -j DROP"}},
		{name: "raw only", rules: []string{"-t raw -A PREROUTING -p udp -j DROP"}, last: raw},
		{name: "mangle TTL", rules: []string{"-t mangle -A PREROUTING -j TTL --ttl-set 9"}, last: mangle},
		{name: "mangle MARK and TTL", last: mangle, rules: []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 7",
			"-t mangle -A PREROUTING -p udp -j TTL --ttl-inc 1"}},
		{name: "nat PREROUTING", last: nat, rules: []string{"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.1.1.1"}},
		{name: "raw, mangle MARK, nat", last: nat, rules: []string{"-t raw -A PREROUTING -p udp -j NOTRACK",
			"-t mangle -A PREROUTING -p udp -j MARK --set-mark 7",
			"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.1.1.1"}},
		{name: "nat OUTPUT only", last: nat, rules: []string{"-t nat -A OUTPUT -p tcp --dport 80 -j DNAT --to-destination 10.1.1.1"}},
	}
	for _, tc := range cases {
		rs := parseRuleset(t, ir.IPv4, tc.rules...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g.Layout.PreEnd[ChainOutput] != 0 {
			t.Errorf("%s: OUTPUT has a PREROUTING end %d", tc.name, g.Layout.PreEnd[ChainOutput])
		}
		for _, h := range []int{ChainInput, ChainForward} {
			pos := g.Layout.PreEnd[h]
			if (pos != 0) != (tc.last != "") {
				t.Errorf("%s: chain %d PreEnd %d, want set %v", tc.name, h, pos, tc.last != "")
				continue
			}
			if pos == 0 {
				continue
			}
			start, end := g.Walk(h)
			if pos-1 <= start || pos-1 > end {
				t.Fatalf("%s: chain %d PreEnd %d outside its walk [%d, %d)", tc.name, h, pos, start, end)
			}
			if pos < g.Layout.RawPre[h] || pos < g.Layout.NatResume[h] || pos < g.Layout.Reroute[h] {
				t.Errorf("%s: chain %d PreEnd %d before RawPre %d, NatResume %d or Reroute %d", tc.name, h, pos,
					g.Layout.RawPre[h], g.Layout.NatResume[h], g.Layout.Reroute[h])
			}
			last := pos - 2
			for last > start && g.Entries[last].Rule == NoRule {
				if a := g.Entries[last].Action; a != ActReroute && g.Entries[last].Flags&EFProbe == 0 {
					break
				}
				last--
			}
			if e := g.Entries[last]; e.Flags&EFCount == 0 || counterName(g, e.Rule) != tc.last {
				t.Errorf("%s: chain %d: the entry before PreEnd is not %s (%+v)", tc.name, h, tc.last, e)
			}
		}
	}
}

// TestRawOutputLayout checks Layout.RawPre[ChainOutput], the OUTPUT
// walk's raw segment judged before the host's packet is translated and
// tracked (rawOutputPreWalked): set, right after raw OUTPUT's policy
// entry, for a raw table with a notrack rule whose OUTPUT reads the
// packet alone; 0 otherwise.
func TestRawOutputLayout(t *testing.T) {
	cases := []struct {
		name  string
		rules []string
		set   bool
	}{
		{"filter only", []string{"-A OUTPUT -p tcp -j ACCEPT"}, false},
		{"raw OUTPUT without notrack", []string{"-t raw -A OUTPUT -p udp -j DROP"}, false},
		{"raw OUTPUT NOTRACK", []string{"-t raw -A OUTPUT -p tcp --tcp-flags RST RST -j NOTRACK"}, true},
		{"CT --notrack in a user chain", []string{"-t raw -N R", "-t raw -A OUTPUT -j R", "-t raw -A R -p udp -j CT --notrack"}, true},
		{"PREROUTING notrack, OUTPUT counts", []string{"-t raw -A PREROUTING -p udp -j NOTRACK", "-t raw -A OUTPUT -p udp"}, true},
		{"state match", []string{"-t raw -A OUTPUT -m state --state INVALID", "-t raw -A OUTPUT -p udp -j NOTRACK"}, true},
		{"owner match", []string{"-t raw -A OUTPUT -m owner --uid-owner 0 -j NOTRACK"}, false},
		{"tcpmss match", []string{"-t raw -A OUTPUT -p tcp -m tcpmss --mss 1000:1500 -j NOTRACK"}, false},
		{"connmark match", []string{"-t raw -A OUTPUT -m connmark --mark 1 -j NOTRACK"}, false},
	}
	for _, tc := range cases {
		rs := parseRuleset(t, ir.IPv4, tc.rules...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pos := g.Layout.RawPre[ChainOutput]
		if (pos != 0) != tc.set {
			t.Errorf("%s: RawPre[OUTPUT] %d, want set %v", tc.name, pos, tc.set)
			continue
		}
		if pos == 0 {
			continue
		}
		start, end := g.Walk(ChainOutput)
		if pos-1 <= start || pos-1 > end {
			t.Fatalf("%s: RawPre %d outside the OUTPUT walk [%d, %d)", tc.name, pos, start, end)
		}
		if e := g.Entries[pos-2]; e.Flags&EFCount == 0 || counterName(g, e.Rule) != "raw/OUTPUT/policy" {
			t.Errorf("%s: the entry before RawPre[OUTPUT] is not raw OUTPUT's policy (%+v)", tc.name, e)
		}
		if _, ok := g.TrivialWalk(ChainOutput); ok {
			t.Errorf("%s: OUTPUT walk trivial with raw OUTPUT judged first", tc.name)
		}
	}
}
