package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// parseRuleset applies iptables commands to a new ruleset of fam.
func parseRuleset(t testing.TB, fam ir.Family, rules ...string) *ir.Ruleset {
	t.Helper()
	rs := ir.NewRuleset(fam)
	for _, rule := range rules {
		words, err := iptables.Tokenize(rule)
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		cmd, err := iptables.ParseCommand(fam, words)
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
	}
	return rs
}

// TestConntrackCompiles checks that the state, protocol, status and
// direction options of the conntrack and state matches compile, in either
// family and in any chain, and make FieldCt active.
func TestConntrackCompiles(t *testing.T) {
	tests := []struct {
		fam  ir.Family
		rule string
	}{
		{ir.IPv4, "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"},
		{ir.IPv4, "-A INPUT -m state --state NEW -j ACCEPT"},
		{ir.IPv4, "-A INPUT -m state ! --state INVALID -j ACCEPT"},
		{ir.IPv4, "-A FORWARD -p tcp --dport 22 -m conntrack ! --ctproto udp --ctstatus ASSURED --ctdir REPLY -j DROP"},
		{ir.IPv4, "-A FORWARD -m conntrack ! --ctstatus NONE -j DROP"},
		{ir.IPv4, "-A FORWARD -m conntrack ! --ctstatus EXPECTED,SEEN_REPLY --ctdir ORIGINAL -j DROP"},
		{ir.IPv4, "-A INPUT -m conntrack --ctstate SNAT,DNAT,UNTRACKED -j ACCEPT"},
		{ir.IPv6, "-A OUTPUT -m conntrack --ctproto ipv6-icmp -m state --state RELATED -j ACCEPT"},
		{ir.IPv6, "-A OUTPUT -p udp -m conntrack --ctstate NEW -m udp --dport 53 -j ACCEPT"},
		{ir.IPv6, "-A OUTPUT -m conntrack --ctrepldst 2001:db8::/32 -j DROP"},
		{ir.IPv4, "-A INPUT -m conntrack --ctstate NEW --ctorigdst 10.0.0.0/8 --ctreplsrc 10.0.0.1 -j ACCEPT"},
		{ir.IPv4, "-A INPUT -m conntrack --ctorigsrcport 1 --ctorigdstport 2:3 ! --ctrepldstport 4 -j ACCEPT"},
		{ir.IPv4, "-A FORWARD -p tcp --dport 22 -m conntrack ! --ctproto udp --ctorigsrc 10.0.0.0/255.0.255.0 --ctreplsrcport 80 --ctstatus ASSURED --ctdir REPLY"},
	}
	for _, tt := range tests {
		rs := parseRuleset(t, tt.fam, tt.rule)
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Errorf("%s: %v", tt.rule, err)
			continue
		}
		// (--ctstatus NONE compiles too, to a rule that never matches:
		// TestConntrackMatches.)
		if g.Active&(1<<FieldCt) == 0 {
			t.Errorf("%s: FieldCt not active (%#x)", tt.rule, g.Active)
		}
	}
}

// TestConntrackUnsupported checks that rules with conntrack options the
// data plane does not match (tuple options in two conntrack matches of
// one rule) are refused with a message naming them.
func TestConntrackUnsupported(t *testing.T) {
	tests := []struct {
		fam     ir.Family
		rules   []string
		wantErr string
	}{
		{ir.IPv4, []string{"-A INPUT -m conntrack --ctorigsrc 10.0.0.1 -m conntrack --ctorigdstport 80 -j ACCEPT"},
			"chain INPUT rule 1: conntrack match: one conntrack match per rule may test the connection's addresses or ports"},
	}
	for _, tt := range tests {
		rs := parseRuleset(t, tt.fam, tt.rules...)
		if _, err := Compile(rs, Options{}); err == nil || err.Error() != tt.wantErr {
			t.Errorf("%v:\n got %v\nwant %s", tt.rules, err, tt.wantErr)
		}
	}
}

// TestCtExpireProbes checks that a conntrack match with --ctexpire gets a
// probe before its rule naming its range, while its other options stay
// the rule's terms.
func TestCtExpireProbes(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-A FORWARD -p tcp --dport 22 -m conntrack ! --ctproto udp --ctorigsrc 10.0.0.0/8 --ctreplsrcport 80 --ctstatus ASSURED --ctexpire 1:9 --ctdir REPLY",
		"-A INPUT -m conntrack ! --ctexpire 5 -j ACCEPT")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []CtExpire{{Min: 5, Max: 5, Invert: true}, {Min: 1, Max: 9}} // INPUT flattens first
	if len(g.CtExpires) != len(want) {
		t.Fatalf("CtExpires %+v, want %+v", g.CtExpires, want)
	}
	for i, w := range want {
		if g.CtExpires[i] != w {
			t.Errorf("CtExpires[%d] = %+v, want %+v", i, g.CtExpires[i], w)
		}
	}
	kinds := 0
	for _, p := range g.Probes {
		if p.Kind == ProbeCtExpire {
			kinds++
		}
	}
	if kinds != 2 || g.Active&(1<<FieldCt) == 0 {
		t.Errorf("probes %+v, active %#x: want two ProbeCtExpire and FieldCt active", g.Probes, g.Active)
	}
	// The expiry decides: a packet of an established connection passes
	// the INPUT rule only when its probe says the expiry is outside 5.
	for _, in := range []bool{true, false} {
		p := &Packet{Proto: 17, Src: U64(0x0a000001), Dst: U64(0x0a000002), Sport: 1, Dport: 2,
			Ct: CtValue(CtsEstablished, false, uint8(ir.CtStatusConfirmed), 17), CtExpire: func(int) bool { return in }}
		if res := g.Classify(p, ChainInput); (res.Entry >= 0) != in {
			t.Errorf("probe %v: entry %d", in, res.Entry)
		}
	}
}

// Hand-made FieldCt values for TestConntrackMatches.
var (
	ctInvalid    = CtValue(CtsInvalid, false, 0, 0)
	ctUntracked  = CtValue(CtsUntracked, false, 0, 0)
	ctNewTCP     = CtValue(CtsNew, false, uint8(ir.CtStatusConfirmed), 6)
	ctNewUDP     = CtValue(CtsNew, false, 0, 17)
	ctEstOrigTCP = CtValue(CtsEstablished, false, uint8(ir.CtStatusSeenReply|ir.CtStatusAssured|ir.CtStatusConfirmed), 6)
	ctEstReplTCP = CtValue(CtsEstablished, true, uint8(ir.CtStatusSeenReply|ir.CtStatusConfirmed), 6)
	ctEstReplUDP = CtValue(CtsEstablished, true, uint8(ir.CtStatusSeenReply|ir.CtStatusConfirmed), 17)
	ctRelOrigICM = CtValue(CtsRelated, false, uint8(ir.CtStatusExpected), 1)
	ctRelReplTCP = CtValue(CtsRelated, true, uint8(ir.CtStatusExpected|ir.CtStatusSeenReply), 6)
	ctNoStatus   = CtValue(CtsEstablished, false, 0, 6)
)

// TestConntrackMatches checks conntrack and state matches on hand-picked
// packets, both ctMatches and the compiled generation (Classify), against
// conntrack_mt's logic: a packet without a connection matches exactly
// when the state option does, whatever the other options.
func TestConntrackMatches(t *testing.T) {
	tests := []struct {
		match string
		yes   []uint32 // values the match accepts
		no    []uint32 // values it rejects
	}{
		{"-m conntrack --ctstate ESTABLISHED,RELATED",
			[]uint32{ctEstOrigTCP, ctEstReplTCP, ctEstReplUDP, ctRelOrigICM, ctRelReplTCP, ctNoStatus},
			[]uint32{ctNewTCP, ctNewUDP, ctInvalid, ctUntracked}},
		{"-m state --state NEW",
			[]uint32{ctNewTCP, ctNewUDP},
			[]uint32{ctEstOrigTCP, ctRelOrigICM, ctInvalid, ctUntracked}},
		{"-m conntrack ! --ctstate INVALID",
			[]uint32{ctNewTCP, ctEstReplUDP, ctRelOrigICM, ctUntracked},
			[]uint32{ctInvalid}},
		{"-m state --state INVALID",
			[]uint32{ctInvalid},
			[]uint32{ctNewTCP, ctEstOrigTCP, ctUntracked}},
		{"-m conntrack --ctstate UNTRACKED",
			[]uint32{ctUntracked},
			[]uint32{ctInvalid, ctNewTCP, ctEstOrigTCP}},
		{"-m conntrack --ctstate SNAT,DNAT", // no NAT: never
			nil,
			[]uint32{ctInvalid, ctUntracked, ctNewTCP, ctEstOrigTCP, ctRelReplTCP}},
		{"-m conntrack ! --ctstate SNAT",
			[]uint32{ctInvalid, ctUntracked, ctNewTCP, ctEstOrigTCP, ctRelReplTCP},
			nil},
		{"-m conntrack --ctstatus NONE", // no status bit is in the empty mask
			nil,
			[]uint32{ctInvalid, ctUntracked, ctNewTCP, ctNewUDP, ctEstOrigTCP, ctNoStatus}},
		{"-m conntrack ! --ctstatus NONE", // every connection, none without
			[]uint32{ctNewTCP, ctNewUDP, ctEstOrigTCP, ctNoStatus, ctRelOrigICM},
			[]uint32{ctInvalid, ctUntracked}},
		{"-m conntrack --ctstatus ASSURED",
			[]uint32{ctEstOrigTCP},
			[]uint32{ctEstReplTCP, ctNewTCP, ctNoStatus, ctInvalid}},
		{"-m conntrack ! --ctstatus EXPECTED,ASSURED",
			[]uint32{ctNewTCP, ctEstReplTCP, ctNoStatus},
			[]uint32{ctEstOrigTCP, ctRelOrigICM, ctRelReplTCP, ctInvalid, ctUntracked}},
		{"-m conntrack --ctproto tcp",
			[]uint32{ctNewTCP, ctEstOrigTCP, ctEstReplTCP, ctRelReplTCP},
			[]uint32{ctNewUDP, ctEstReplUDP, ctRelOrigICM, ctInvalid, ctUntracked}},
		{"-m conntrack ! --ctproto tcp",
			[]uint32{ctNewUDP, ctEstReplUDP, ctRelOrigICM},
			[]uint32{ctNewTCP, ctEstOrigTCP, ctInvalid, ctUntracked}},
		{"-m conntrack --ctstate INVALID --ctproto tcp", // no connection: the protocol is not looked at
			[]uint32{ctInvalid},
			[]uint32{ctNewTCP, ctEstOrigTCP, ctUntracked}},
		{"-m conntrack --ctstate INVALID,UNTRACKED --ctdir REPLY --ctstatus NONE",
			[]uint32{ctInvalid, ctUntracked},
			[]uint32{ctEstReplTCP, ctNewTCP}},
		{"-m conntrack --ctdir REPLY",
			[]uint32{ctEstReplTCP, ctEstReplUDP, ctRelReplTCP},
			[]uint32{ctNewTCP, ctEstOrigTCP, ctRelOrigICM, ctInvalid, ctUntracked}},
		{"-m conntrack --ctdir ORIGINAL",
			[]uint32{ctNewTCP, ctEstOrigTCP, ctRelOrigICM, ctNoStatus},
			[]uint32{ctEstReplTCP, ctRelReplTCP, ctInvalid, ctUntracked}},
		{"-m conntrack --ctstate ESTABLISHED --ctdir REPLY ! --ctproto udp --ctstatus SEEN_REPLY",
			[]uint32{ctEstReplTCP},
			[]uint32{ctEstReplUDP, ctEstOrigTCP, ctRelReplTCP, ctNoStatus, ctInvalid}},
		{"-m conntrack --ctstate NEW,ESTABLISHED -m state ! --state NEW", // two matches: both hold
			[]uint32{ctEstOrigTCP, ctEstReplUDP},
			[]uint32{ctNewTCP, ctRelOrigICM, ctInvalid, ctUntracked}},
	}
	for _, tt := range tests {
		rule := "-A INPUT " + tt.match + " -j ACCEPT"
		rs := parseRuleset(t, ir.IPv4, rule)
		r := rs.Chain(ir.ChainInput).Rules[0]
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		check := func(v uint32, want bool) {
			t.Helper()
			got := true
			for _, m := range r.Matches {
				got = got && ctMatches(m.(*ir.ConntrackMatch), v)
			}
			if got != want {
				t.Errorf("%s: ctMatches(%#x) = %v, want %v", tt.match, v, got, want)
			}
			res := g.Classify(&Packet{Ct: v}, ChainInput)
			if (res.Entry >= 0) != want {
				t.Errorf("%s: Classify(%#x) entry %d, want a match %v", tt.match, v, res.Entry, want)
			}
		}
		for _, v := range tt.yes {
			check(v, true)
		}
		for _, v := range tt.no {
			check(v, false)
		}
	}
}

// TestCtEncoding checks CtValue against bpf/common.h's layout and that the
// condition order (ctKey) is a permutation of the values.
func TestCtEncoding(t *testing.T) {
	tests := []struct {
		state  uint8
		reply  bool
		status uint8
		proto  uint8
		want   uint32
	}{
		{CtsInvalid, false, 0, 0, 0},
		{CtsUntracked, true, 0xf, 6, 4}, // no connection: state bits only
		{CtsNew, false, 0, 6, 0x0601},
		{CtsEstablished, true, uint8(ir.CtStatusSeenReply | ir.CtStatusConfirmed), 17, 0x11aa},
		{CtsRelated, true, uint8(ir.CtStatusExpected), 1, 0x011b},
	}
	for _, tt := range tests {
		if got := CtValue(tt.state, tt.reply, tt.status, tt.proto); got != tt.want {
			t.Errorf("CtValue(%d, %v, %#x, %d) = %#x, want %#x", tt.state, tt.reply, tt.status, tt.proto, got, tt.want)
		}
	}
	seen := make([]bool, ctDomain)
	for k := uint32(0); k < ctDomain; k++ {
		v := ctValueOfKey(k)
		if v >= ctDomain || seen[v] || ctKey(v) != k {
			t.Fatalf("key %#x: value %#x (seen %v), back %#x", k, v, v < ctDomain && seen[v], ctKey(v))
		}
		seen[v] = true
	}
}

// TestCtConditionIntervals checks that common matches are few intervals in
// condition order (each interval's ends are sorted for every rule that
// uses the match), and that one match's set is built once.
func TestCtConditionIntervals(t *testing.T) {
	tests := []struct {
		m    ir.ConntrackMatch
		want int
	}{
		{ir.ConntrackMatch{States: ir.CtBitsMatch{Set: true, Bits: ir.CtStateNew}}, 1},
		{ir.ConntrackMatch{States: ir.CtBitsMatch{Set: true, Bits: ir.CtStateEstablished | ir.CtStateRelated}}, 1},
		{ir.ConntrackMatch{States: ir.CtBitsMatch{Set: true, Invert: true, Bits: ir.CtStateInvalid}}, 1},
		{ir.ConntrackMatch{Dir: ir.CtDirReply}, 3},
		{ir.ConntrackMatch{Proto: ir.CtProtoMatch{Set: true, Num: 6}}, 3 * 2 * 16},
	}
	for _, tt := range tests {
		s, err := ctCondition(&tt.m)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Ivs) != tt.want {
			t.Errorf("%+v: %d intervals, want %d", tt.m, len(s.Ivs), tt.want)
		}
		if again, _ := ctCondition(&tt.m); again != s {
			t.Errorf("%+v: built twice", tt.m)
		}
	}
}
