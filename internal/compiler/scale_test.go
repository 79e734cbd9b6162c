package compiler

import (
	"math/rand"
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// fiveTuple builds n distinct 5-tuple ACCEPT rules in FORWARD, the shape of
// the benchmark rulesets (bpf-iptables §6).
func fiveTuple(n int, seed int64) *ir.Ruleset {
	rng := rand.New(rand.NewSource(seed))
	rs := ir.NewRuleset(ir.IPv4)
	fw := rs.Chain(ir.ChainForward)
	full := netip.MustParseAddr("255.255.255.255")
	for i := 0; i < n; i++ {
		src := netip.AddrFrom4([4]byte{10, byte(rng.Intn(256)), byte(rng.Intn(256)), byte(rng.Intn(256))})
		dst := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
		fw.Rules = append(fw.Rules, &ir.Rule{
			Src:   ir.AddrMatch{Set: true, Addr: src, Mask: full},
			Dst:   ir.AddrMatch{Set: true, Addr: dst, Mask: full},
			Proto: ir.ProtoMatch{Set: true, Num: 17},
			Matches: []ir.Match{&ir.UDPMatch{
				SrcPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: uint16(1024 + rng.Intn(60000)), Last: 0}},
				DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: uint16(1 + rng.Intn(60000)), Last: 0}},
			}},
			Target: ir.Target{Kind: ir.TargetAccept},
		})
		m := fw.Rules[i].Matches[0].(*ir.UDPMatch)
		m.SrcPort.Range.Last = m.SrcPort.Range.First
		m.DstPort.Range.Last = m.DstPort.Range.First
	}
	fw.Policy = ir.VerdictDrop
	return rs
}

func TestCompile100k(t *testing.T) {
	rs := fiveTuple(100_000, 7)
	start := time.Now()
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %v", g, time.Since(start))
	// Every rule must be found by a packet built from it.
	fw := rs.Chain(ir.ChainForward)
	for _, i := range []int{0, 1, 4095, 4096, 50_000, 99_999} {
		r := fw.Rules[i]
		u := r.Matches[0].(*ir.UDPMatch)
		p := &Packet{Src: AddrU128(r.Src.Addr), Dst: AddrU128(r.Dst.Addr), Proto: 17,
			Sport: uint32(u.SrcPort.Range.First), Dport: uint32(u.DstPort.Range.First),
			TCPFlags: FlagsNone, ICMP: ValNone, Len: 64, TTL: 64, IIF: 2, OIF: 3}
		res := g.Classify(p, ChainForward)
		if res.Entry < 0 || g.Entries[res.Entry].Rule != uint32(NumChains+i) {
			// An earlier rule may match the same packet by chance.
			if res.Entry < 0 || g.Entries[res.Entry].Rule > uint32(NumChains+i) {
				t.Fatalf("rule %d: got entry %d", i, res.Entry)
			}
		}
	}
	miss := &Packet{Src: U64(1), Dst: U64(2), Proto: 17, Sport: 1, Dport: 1, TCPFlags: FlagsNone, ICMP: ValNone}
	if res := g.Classify(miss, ChainForward); res.Entry != -1 {
		t.Fatalf("a packet matching no rule got entry %d", res.Entry)
	}
}

// TestCompile100kConntrack compiles the 100,000 rules of TestCompile100k
// with "-m conntrack --ctstate NEW" on each (the usual shape: stateful
// rules admit new connections, one rule at the head the rest of them).
// Every rule shares one FieldCt set of one interval (condition order,
// ctKey), so FieldCt adds little to the time of TestCompile100k.
func TestCompile100kConntrack(t *testing.T) {
	rs := fiveTuple(100_000, 7)
	fw := rs.Chain(ir.ChainForward)
	newOnly := ir.ConntrackMatch{States: ir.CtBitsMatch{Set: true, Bits: ir.CtStateNew}}
	for _, r := range fw.Rules {
		m := newOnly
		r.Matches = append(r.Matches, &m)
	}
	head := &ir.Rule{
		Matches: []ir.Match{&ir.ConntrackMatch{States: ir.CtBitsMatch{Set: true, Bits: ir.CtStateEstablished | ir.CtStateRelated}}},
		Target:  ir.Target{Kind: ir.TargetAccept},
	}
	fw.Rules = append([]*ir.Rule{head}, fw.Rules...)
	start := time.Now()
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %v", g, time.Since(start))
	r := fw.Rules[50_000]
	u := r.Matches[0].(*ir.UDPMatch)
	p := &Packet{Src: AddrU128(r.Src.Addr), Dst: AddrU128(r.Dst.Addr), Proto: 17,
		Sport: uint32(u.SrcPort.Range.First), Dport: uint32(u.DstPort.Range.First),
		TCPFlags: FlagsNone, ICMP: ValNone, Len: 64, TTL: 64, IIF: 2, OIF: 3}
	tests := []struct {
		ct   uint32
		want uint32 // counter index of the deciding rule; 0: the policy
	}{
		{CtValue(CtsEstablished, true, 0, 17), NumChains},
		{CtValue(CtsRelated, false, 0, 1), NumChains},
		{CtValue(CtsInvalid, false, 0, 0), 0},
		{CtValue(CtsNew, false, 0, 17), NumChains + 50_000},
	}
	for _, tt := range tests {
		p.Ct = tt.ct
		res := g.Classify(p, ChainForward)
		got := uint32(0)
		if res.Entry >= 0 {
			got = g.Entries[res.Entry].Rule
		}
		// An earlier rule may match the NEW packet by chance.
		if got != tt.want && (tt.want <= NumChains || got == 0 || got > tt.want) {
			t.Errorf("ct %#x: decided by counter %d, want %d", tt.ct, got, tt.want)
		}
	}
}
