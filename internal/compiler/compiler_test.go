package compiler

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

func iv(lo, hi uint64) Interval { return Interval{U64(lo), U64(hi)} }

func TestSetOperations(t *testing.T) {
	tests := []struct {
		name string
		got  *Set
		want []Interval
	}{
		{"merge overlapping", NewSet(iv(1, 5), iv(3, 9)), []Interval{iv(1, 9)}},
		{"merge adjacent", NewSet(iv(1, 5), iv(6, 9)), []Interval{iv(1, 9)}},
		{"keep apart", NewSet(iv(7, 9), iv(1, 5)), []Interval{iv(1, 5), iv(7, 9)}},
		{"intersect", Intersect(NewSet(iv(1, 10), iv(20, 30)), NewSet(iv(5, 25))), []Interval{iv(5, 10), iv(20, 25)}},
		{"intersect nil is identity", Intersect(nil, NewSet(iv(2, 3))), []Interval{iv(2, 3)}},
		{"complement middle", Complement(NewSet(iv(3, 5)), U64(0), U64(10)), []Interval{iv(0, 2), iv(6, 10)}},
		{"complement edges", Complement(NewSet(iv(0, 2), iv(8, 10)), U64(0), U64(10)), []Interval{iv(3, 7)}},
		{"complement of all", Complement(NewSet(iv(0, 10)), U64(0), U64(10)), nil},
		{"complement at the top of 128 bits", Complement(NewSet(Interval{U64(0), U128{^uint64(0), ^uint64(0) - 1}}), U64(0), maxU128), []Interval{{maxU128, maxU128}}},
		{"union with nil is everything", Union(nil, NewSet(iv(1, 2))), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Interval
			if tt.got != nil {
				got = tt.got.Ivs
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestMaskSet(t *testing.T) {
	tests := []struct {
		addr, mask string
		in, out    []string
		intervals  int
	}{
		{"10.0.0.0", "255.0.0.0", []string{"10.0.0.0", "10.255.255.255"}, []string{"9.255.255.255", "11.0.0.0"}, 1},
		{"10.0.0.1", "255.255.255.255", []string{"10.0.0.1"}, []string{"10.0.0.0", "10.0.0.2"}, 1},
		{"10.0.3.0", "255.0.255.0", []string{"10.0.3.0", "10.77.3.255"}, []string{"10.0.4.0", "11.0.3.0"}, 256},
		{"fd00::", "ffff::", []string{"fd00::1", "fd00:ffff::"}, []string{"fd01::"}, 1},
	}
	for _, tt := range tests {
		a, m := netip.MustParseAddr(tt.addr), netip.MustParseAddr(tt.mask)
		fam := ir.IPv4
		if a.Is6() {
			fam = ir.IPv6
		}
		s, err := maskSet(fam, a, m)
		if err != nil {
			t.Fatalf("%s/%s: %v", tt.addr, tt.mask, err)
		}
		if len(s.Ivs) != tt.intervals {
			t.Errorf("%s/%s: %d intervals, want %d", tt.addr, tt.mask, len(s.Ivs), tt.intervals)
		}
		for _, x := range tt.in {
			if !s.Contains(AddrU128(netip.MustParseAddr(x))) {
				t.Errorf("%s/%s should contain %s", tt.addr, tt.mask, x)
			}
		}
		for _, x := range tt.out {
			if s.Contains(AddrU128(netip.MustParseAddr(x))) {
				t.Errorf("%s/%s should not contain %s", tt.addr, tt.mask, x)
			}
		}
	}
	// A mask with more than 16 free bits above its lowest set bit is
	// refused with a message.
	if _, err := maskSet(ir.IPv4, netip.MustParseAddr("0.0.0.1"), netip.MustParseAddr("0.0.0.1")); err == nil || !strings.Contains(err.Error(), "non-contiguous") {
		t.Errorf("mask 0.0.0.1: %v", err)
	}
}

// TestFlattenActions checks the entry list of user chains: a jump is a
// counted CALL of the chain's region, a region ends with a RETURN entry
// every packet matches, a RETURN rule continues at it, a goto is a CALL
// followed by an entry of its condition returning from the caller, and a
// chain reached from one view has one region.
func TestFlattenActions(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	sub := &ir.Chain{Name: "sub"}
	deep := &ir.Chain{Name: "deep"}
	rs.Chains = append(rs.Chains, sub, deep)
	tcp := ir.ProtoMatch{Set: true, Num: 6}
	in := rs.Chain("INPUT")
	in.Rules = []*ir.Rule{
		{Proto: tcp, Target: ir.Target{Kind: ir.TargetJump, Chain: "sub"}},
		{Target: ir.Target{Kind: ir.TargetJump, Chain: "sub"}},
		{Target: ir.Target{Kind: ir.TargetAccept}},
	}
	sub.Rules = []*ir.Rule{
		{Proto: tcp, Target: ir.Target{Kind: ir.TargetGoto, Chain: "deep"}},
		{Target: ir.Target{Kind: ir.TargetDrop}},
	}
	deep.Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetReturn}}}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		act  Action
		next int // -1: not checked
		rule bool
	}
	check := func(what string, base uint32, ws []want) {
		t.Helper()
		for i, w := range ws {
			e := g.Entries[base+uint32(i)]
			if e.Action != w.act || (w.next >= 0 && e.Next != uint32(w.next)) || (e.Rule != NoRule) != w.rule {
				t.Errorf("%s entry %d: action %d next %d rule %d, want %+v", what, i, e.Action, e.Next, e.Rule, w)
			}
		}
	}
	// Regions after OUTPUT's slack, each with slack (a ruleset of the
	// filter table alone): sub's, then deep's.
	if len(g.Layout.Regions) != 2 || g.Layout.Regions[0].Chain != "sub" || g.Layout.Regions[1].Chain != "deep" {
		t.Fatalf("regions with slack %+v, want sub's and deep's", g.Layout.Regions)
	}
	subR, deepR := g.Layout.Regions[0], g.Layout.Regions[1]
	if subR.SlackStart != g.Layout.SlackEnd[ChainOutput] || subR.Start != subR.SlackStart+RegionSlack ||
		subR.Return != subR.End+RegionSlack || deepR.SlackStart != subR.Return+1 {
		t.Errorf("regions %+v after OUTPUT's slack end %d", g.Layout.Regions, g.Layout.SlackEnd[ChainOutput])
	}
	// INPUT: two CALLs of sub's one region (searching from its slack),
	// ACCEPT.
	if got := g.ChainEnd[ChainInput] - g.ChainStart[ChainInput]; got != 3 {
		t.Fatalf("%d INPUT entries, want 3", got)
	}
	check("INPUT", g.ChainStart[ChainInput], []want{{ActCall, int(subR.SlackStart), true}, {ActCall, int(subR.SlackStart), true}, {ActAccept, -1, true}})
	// sub = goto deep, its return → sub's RETURN, DROP; deep = RETURN
	// rule → its RETURN.
	if subR.End-subR.Start != 3 || deepR.End-deepR.Start != 1 {
		t.Errorf("regions %+v: want 3 and 1 rule entries", g.Layout.Regions)
	}
	check("sub", subR.Start, []want{{ActCall, int(deepR.SlackStart), true}, {ActContinue, int(subR.Return), false}, {ActDrop, -1, true}})
	check("sub's RETURN", subR.Return, []want{{ActReturn, -1, false}})
	check("deep", deepR.Start, []want{{ActContinue, int(deepR.Return), true}})
	check("deep's RETURN", deepR.Return, []want{{ActReturn, -1, false}})
	if n := len(g.Entries) - int(g.Layout.SlackEnd[ChainOutput]); n != 6+4*RegionSlack {
		t.Errorf("%d region entries, want %d", n, 6+4*RegionSlack)
	}
	if e := g.Entries[subR.Start+1]; !e.Cond.Get(FieldProto).Contains(U64(6)) || e.Cond.Get(FieldProto).Contains(U64(17)) {
		t.Errorf("the goto's return entry does not have the goto rule's condition")
	}
}

// TestFlattenLimits checks that rulesets the data plane cannot hold are
// refused with a message naming the limit.
func TestFlattenLimits(t *testing.T) {
	// A chain of 1,100 rules reached from 1,000 jumps is 1,000 CALLs and
	// one region of 1,101 entries; from 8,000 jumps a packet's walk could
	// take more search steps than bpf_loop allows (1 << 23).
	rs := ir.NewRuleset(ir.IPv4)
	big := &ir.Chain{Name: "big"}
	rs.Chains = append(rs.Chains, big)
	for i := 0; i < 1100; i++ {
		big.Rules = append(big.Rules, &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: uint8(i % 250)}, Target: ir.Target{Kind: ir.TargetAccept}})
	}
	in := rs.Chain("INPUT")
	for i := 0; i < 1000; i++ {
		in.Rules = append(in.Rules, &ir.Rule{Target: ir.Target{Kind: ir.TargetJump, Chain: "big"}})
	}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.Entries); n > 1000+1101+6*AppendSlack+2*RegionSlack {
		t.Errorf("%d entries for 1,000 jumps into a chain of 1,100 rules, want them linear in the rules", n)
	}
	for i := 0; i < 7000; i++ {
		in.Rules = append(in.Rules, &ir.Rule{Target: ir.Target{Kind: ir.TargetJump, Chain: "big"}})
	}
	_, err = Compile(rs, Options{})
	if err == nil || !strings.Contains(err.Error(), "ruleset too large") || !strings.Contains(err.Error(), "8388608") {
		t.Errorf("got %v, want a 'ruleset too large' error naming the 8388608-step limit", err)
	}
	// A jump loop is refused.
	loop := ir.NewRuleset(ir.IPv4)
	a, b := &ir.Chain{Name: "a"}, &ir.Chain{Name: "b"}
	loop.Chains = append(loop.Chains, a, b)
	a.Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetJump, Chain: "b"}}}
	b.Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetJump, Chain: "a"}}}
	loop.Chain("FORWARD").Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetJump, Chain: "a"}}}
	if _, err := Compile(loop, Options{}); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("jump loop: %v", err)
	}
}

// TestMapChoice checks the lookup structure chosen per field.
func TestMapChoice(t *testing.T) {
	for f, want := range map[Field]FieldKind{
		FieldSrc: KindAddr, FieldDst: KindAddr, FieldIIF: KindHash, FieldOIF: KindHash, FieldMAC: KindHash,
		FieldProto: KindSmall, FieldSport: KindSmall, FieldDport: KindSmall, FieldICMP: KindSmall,
		FieldTCPFlags: KindSmall, FieldFrag: KindSmall, FieldLen: KindSmall, FieldTTL: KindSmall,
	} {
		if got := f.Kind(); got != want {
			t.Errorf("%s: kind %d, want %d", f, got, want)
		}
	}
	// Unused fields are not active: a ruleset on ports only has no
	// address tables at all.
	rs := ir.NewRuleset(ir.IPv4)
	rs.Chain("INPUT").Rules = []*ir.Rule{{Proto: ir.ProtoMatch{Set: true, Num: 17},
		Matches: []ir.Match{&ir.UDPMatch{DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 53, Last: 53}}}},
		Target:  ir.Target{Kind: ir.TargetAccept}}}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Active&(1<<FieldSrc) != 0 || g.Active&(1<<FieldDst) != 0 || len(g.Bounds) != 0 {
		t.Errorf("address fields active for a port-only ruleset: %#x", g.Active)
	}
	if g.Active&(1<<FieldProto) == 0 || g.Active&(1<<FieldDport) == 0 {
		t.Errorf("proto/dport not active: %#x", g.Active)
	}
}

// TestOtherTablesRefused checks what the tables besides filter may hold:
// empty tables, with empty user chains, and ACCEPT rules compile; a NAT
// target and a DROP policy in nat are refused.
func TestOtherTablesRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		table   func(*ir.Ruleset)
		wantErr string
	}{
		{"empty tables", func(t *ir.Ruleset) {
			t.Chains = append(t.Chains, &ir.Chain{Name: "DOCKER"})
		}, ""},
		{"an ACCEPT rule", func(t *ir.Ruleset) {
			t.Chains[0].Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetAccept}}}
		}, ""},
		{"a NAT rule where it cannot be applied", func(t *ir.Ruleset) {
			t.Chains[0].Rules = []*ir.Rule{{Target: ir.Target{Kind: ir.TargetMasquerade}}}
		}, "table nat: chain PREROUTING rule 1: target MASQUERADE is not supported by xfw's data plane outside nat POSTROUTING"},
		{"a DROP policy", func(t *ir.Ruleset) {
			t.Chains[0].Policy = ir.VerdictDrop
		}, "table nat: policy DROP of chain PREROUTING is not supported by xfw"},
	} {
		rs := ir.NewRuleset(ir.IPv4)
		c.table(rs.EnsureTable(ir.TableNat))
		rs.EnsureTable(ir.TableRaw)
		_, err := Compile(rs, Options{})
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || err.Error() != c.wantErr):
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
	}
}
