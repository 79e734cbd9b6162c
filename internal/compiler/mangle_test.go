package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestMangleWalks checks the packet-rewriting and notrack targets in the
// walk: each rule is counted and the walk goes on; later rules (in the
// same chain, later chains and tables) see the rewritten TOS byte, TTL,
// MSS option and connection state; the walk's packet ends with the
// values the hook writes into the frame.
func TestMangleWalks(t *testing.T) {
	first := CtValue(CtsNew, false, 0, 6)
	tests := []struct {
		name  string
		fam   ir.Family
		rules []string
		chain int
		ttl   uint32
		tos   uint32
		mss   uint32
		want  []string
		// The walk's packet afterwards.
		wantTOS, wantTTL, wantMSS uint32
		wantCt                    uint32
	}{
		{name: "DSCP seen by a later table's -m dscp, ECN bits kept", rules: []string{
			"-t mangle -A PREROUTING -j DSCP --set-dscp-class EF",
			"-A INPUT -m dscp --dscp 0x2e", "-A INPUT -m dscp --dscp 0",
		}, chain: ChainInput, ttl: 64, tos: 0x03, want: []string{"mangle/PREROUTING/1", "mangle/PREROUTING/policy",
			"mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/policy"}, wantTOS: 0xbb, wantTTL: 64},
		{name: "TOS and, or, set with a mask in a row", rules: []string{
			"-t mangle -A OUTPUT -j TOS --and-tos 0x0f", "-t mangle -A OUTPUT -m tos --tos 0x0c/0xff",
			"-t mangle -A OUTPUT -j TOS --or-tos 0x10", "-t mangle -A OUTPUT -m tos --tos 0x1c/0xff",
			"-t mangle -A OUTPUT -j TOS --set-tos Minimize-Cost", "-t mangle -A OUTPUT -m tos --tos 0x02/0xff",
		}, chain: ChainOutput, ttl: 64, tos: 0xfc, want: []string{"mangle/OUTPUT/1", "mangle/OUTPUT/2",
			"mangle/OUTPUT/3", "mangle/OUTPUT/4", "mangle/OUTPUT/5", "mangle/OUTPUT/6", "mangle/OUTPUT/policy",
			"filter/OUTPUT/policy", "mangle/POSTROUTING/policy"}, wantTOS: 0x02, wantTTL: 64},
		{name: "TTL set in a forwarded packet's PREROUTING, before the decrement", rules: []string{
			"-t mangle -A PREROUTING -j TTL --ttl-set 10", "-t mangle -A PREROUTING -m ttl --ttl-eq 10",
			"-A FORWARD -m ttl --ttl-eq 9", "-A FORWARD -m ttl --ttl-eq 10",
		}, chain: ChainForward, ttl: 63, want: []string{"mangle/PREROUTING/1", "mangle/PREROUTING/2",
			"mangle/PREROUTING/policy", "mangle/FORWARD/policy", "filter/FORWARD/1", "filter/FORWARD/policy",
			"mangle/POSTROUTING/policy"}, wantTTL: 9},
		{name: "TTL inc stops at 255, dec at 0, after the decrement", rules: []string{
			"-t mangle -A FORWARD -j TTL --ttl-inc 250", "-t mangle -A FORWARD -m ttl --ttl-eq 255",
			"-t mangle -A POSTROUTING -j TTL --ttl-dec 254", "-t mangle -A POSTROUTING -m ttl --ttl-eq 1",
			"-t mangle -A POSTROUTING -j TTL --ttl-dec 9", "-t mangle -A POSTROUTING -m ttl --ttl-eq 0",
		}, chain: ChainForward, ttl: 63, want: []string{"mangle/PREROUTING/policy", "mangle/FORWARD/1",
			"mangle/FORWARD/2", "mangle/FORWARD/policy", "filter/FORWARD/policy", "mangle/POSTROUTING/1",
			"mangle/POSTROUTING/2", "mangle/POSTROUTING/3", "mangle/POSTROUTING/4", "mangle/POSTROUTING/policy"}},
		{name: "HL in IPv6 INPUT", fam: ir.IPv6, rules: []string{
			"-t mangle -A PREROUTING -j HL --hl-inc 2", "-A INPUT -m hl --hl-eq 66",
		}, chain: ChainInput, ttl: 64, want: []string{"mangle/PREROUTING/1", "mangle/PREROUTING/policy",
			"mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/policy"}, wantTTL: 66},
		{name: "TCPMSS lowers, never raises, -m tcpmss sees it", rules: []string{
			"-t mangle -A FORWARD -p tcp --syn -j TCPMSS --set-mss 1200",
			"-t mangle -A FORWARD -p tcp --syn -j TCPMSS --set-mss 1400",
			"-A FORWARD -p tcp -m tcpmss --mss 1200", "-A FORWARD -p tcp -m tcpmss --mss 1460",
			"-t mangle -A POSTROUTING -p tcp --syn -j TCPMSS --clamp-mss-to-pmtu",
		}, chain: ChainForward, ttl: 63, mss: 1460, want: []string{"mangle/PREROUTING/policy", "mangle/FORWARD/1",
			"mangle/FORWARD/2", "mangle/FORWARD/policy", "filter/FORWARD/1", "filter/FORWARD/policy",
			"mangle/POSTROUTING/1", "mangle/POSTROUTING/policy"}, wantTTL: 63, wantMSS: 1200},
		{name: "TCPMSS in filter alone", rules: []string{
			"-A FORWARD -p tcp --syn -j TCPMSS --set-mss 1000", "-A FORWARD -p tcp -m tcpmss --mss 1000",
		}, chain: ChainForward, ttl: 63, mss: 1400, want: []string{"filter/FORWARD/1", "filter/FORWARD/2",
			"filter/FORWARD/policy"}, wantTTL: 63, wantMSS: 1000},
		{name: "NOTRACK: UNTRACKED for later tables, nat passed by", rules: []string{
			"-t raw -A PREROUTING -m conntrack --ctstate INVALID", "-t raw -A PREROUTING -p tcp -j NOTRACK",
			"-t raw -A PREROUTING -m conntrack --ctstate INVALID", "-t raw -A PREROUTING -m state --state UNTRACKED",
			"-t nat -A PREROUTING -p tcp", "-A INPUT -m conntrack --ctstate NEW",
			"-A INPUT -m conntrack --ctstate UNTRACKED", "-A INPUT -m state --state UNTRACKED",
		}, chain: ChainInput, ttl: 64, want: []string{"raw/PREROUTING/1", "raw/PREROUTING/2", "raw/PREROUTING/4",
			"raw/PREROUTING/policy", "filter/INPUT/2", "filter/INPUT/3", "filter/INPUT/policy"}, wantTTL: 64,
			wantCt: CtNotrackValue},
		{name: "CT --notrack in raw OUTPUT", rules: []string{
			"-t raw -A OUTPUT -j CT --notrack", "-A OUTPUT -m conntrack --ctstate UNTRACKED",
		}, chain: ChainOutput, ttl: 64, want: []string{"raw/OUTPUT/1", "raw/OUTPUT/policy", "filter/OUTPUT/1",
			"filter/OUTPUT/policy"}, wantTTL: 64, wantCt: CtNotrackValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fam := tt.fam
			if fam != ir.IPv6 {
				fam = ir.IPv4
			}
			rs := parseRuleset(t, fam, tt.rules...)
			g, err := Compile(rs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := tcpPacket(first, tt.ttl)
			p.TOS = tt.tos
			p.TCPMSS = ValNone
			if tt.mss != 0 {
				p.TCPMSS = tt.mss
			}
			if tt.fam == ir.IPv6 {
				p.Src, p.Dst = U128{Hi: 0x20010db8 << 32, Lo: 2}, U128{Hi: 0x20010db8 << 32, Lo: 1}
			}
			got := walk(g, p, tt.chain)
			if got.verdict != ActAccept || !slices.Equal(got.counted, tt.want) {
				t.Errorf("got %v %v\nwant %v", got.verdict, got.counted, tt.want)
			}
			wantCt := first
			if tt.wantCt != 0 {
				wantCt = tt.wantCt
			}
			wantMSS := uint32(ValNone)
			if tt.wantMSS != 0 {
				wantMSS = tt.wantMSS
			}
			if p.TOS != tt.wantTOS || p.TTL != tt.wantTTL || p.TCPMSS != wantMSS || p.Ct != wantCt {
				t.Errorf("packet after the walk: tos %#x ttl %d mss %d ct %#x, want %#x %d %d %#x",
					p.TOS, p.TTL, p.TCPMSS, p.Ct, tt.wantTOS, tt.wantTTL, wantMSS, wantCt)
			}
		})
	}
}

// TestMangleProbes checks the probes of the packet-rewriting targets:
// the rewrite and values the data plane reads, and the TTL rewrite of a
// forwarded packet's PREROUTING marked to compute before the decrement
// (its region then differs from the INPUT walk's).
func TestMangleProbes(t *testing.T) {
	tests := []struct {
		rule string
		want []Probe
	}{
		{"-t mangle -A INPUT -j DSCP --set-dscp 0x2e", []Probe{{Kind: ProbeMangle, Arg: MangleTOS, Val: 0xb8, Mask: 0xfc}}},
		{"-t mangle -A INPUT -j TOS --xor-tos 0x12", []Probe{{Kind: ProbeMangle, Arg: MangleTOS, Val: 0x12}}},
		{"-t mangle -A INPUT -j TTL --ttl-dec 3", []Probe{{Kind: ProbeMangle, Arg: MangleTTLDec, Val: 3}}},
		{"-t mangle -A PREROUTING -j TTL --ttl-set 7", []Probe{{Kind: ProbeMangle, Arg: MangleTTLSet, Val: 7},
			{Kind: ProbeMangle, Arg: MangleTTLSet | ManglePreDec, Val: 7}}},
		{"-t mangle -A OUTPUT -p tcp --syn -j TCPMSS --set-mss 1300", []Probe{{Kind: ProbeMangle, Arg: MangleMSS, Val: 1300}}},
		{"-t mangle -A OUTPUT -p tcp --syn -j TCPMSS --clamp-mss-to-pmtu", []Probe{{Kind: ProbeMangle, Arg: MangleClamp}}},
		{"-t raw -A PREROUTING -j CT --notrack", []Probe{{Kind: ProbeMangle, Arg: MangleNotrack}}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			g, err := Compile(parseRuleset(t, ir.IPv4, tt.rule), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []Probe
			for _, pr := range g.Probes {
				if pr.Kind == ProbeMangle && !slices.Contains(got, pr) {
					got = append(got, pr)
				}
			}
			slices.SortFunc(got, func(a, b Probe) int { return int(a.Arg) - int(b.Arg) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("probes %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMangledTTL checks the TTL rewrite of the walk's value, before and
// after ip_forward's decrement.
func TestMangledTTL(t *testing.T) {
	tests := []struct {
		arg, val, in, want uint32
	}{
		{MangleTTLSet, 0, 64, 0}, {MangleTTLInc, 10, 250, 255}, {MangleTTLDec, 10, 5, 0},
		{MangleTTLSet | ManglePreDec, 10, 63, 9}, {MangleTTLInc | ManglePreDec, 1, 254, 254},
		{MangleTTLDec | ManglePreDec, 100, 63, 0}, {MangleTTLSet | ManglePreDec, 0, 63, 0},
	}
	for _, tt := range tests {
		if got := MangledTTL(Probe{Arg: tt.arg, Val: tt.val}, tt.in); got != tt.want {
			t.Errorf("arg %#x val %d on %d: got %d, want %d", tt.arg, tt.val, tt.in, got, tt.want)
		}
	}
}
