package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRegionWalks checks user chains compiled as regions in walks through
// several tables: a chain shared by the INPUT and FORWARD walks'
// PREROUTING (one region), one with a TTL match per walk (FORWARD's sees
// the TTL before the decrement), an ACCEPT two calls deep that leaves the
// table's chain for the next table (unwinding), a goto whose chain falls
// off back to the base chain's policy, and a RETURN.
func TestRegionWalks(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-t mangle -N A", "-t mangle -N B", "-t mangle -N T", "-t mangle -N G",
		"-t mangle -A PREROUTING -j A",
		"-t mangle -A PREROUTING -j T",
		"-t mangle -A PREROUTING -p tcp",
		"-t mangle -A A -p tcp --dport 81 -j RETURN",
		"-t mangle -A A -j B",
		"-t mangle -A A -p tcp",
		"-t mangle -A B -p tcp --dport 80 -j ACCEPT",
		"-t mangle -A B -p tcp",
		"-t mangle -A T -m ttl --ttl-eq 64",
		"-t mangle -A INPUT -g G",
		"-t mangle -A INPUT -p tcp",
		"-t mangle -A G -p tcp",
		"-A INPUT -p tcp",
	)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	est := CtValue(CtsEstablished, false, 1<<3, 6)
	tcp := func(dport, ttl uint32) *Packet {
		p := tcpPacket(est, ttl)
		p.Dport = dport
		return p
	}
	for _, tc := range []struct {
		name  string
		chain int
		p     *Packet
		want  []string
	}{
		{"input, ACCEPT two calls deep", ChainInput, tcp(80, 64), []string{
			"mangle/PREROUTING/1", "mangle/A/2", "mangle/B/1",
			"mangle/INPUT/1", "mangle/G/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/policy"}},
		{"input, through B and back", ChainInput, tcp(82, 64), []string{
			"mangle/PREROUTING/1", "mangle/A/2", "mangle/B/2", "mangle/A/3", "mangle/PREROUTING/2", "mangle/T/1",
			"mangle/PREROUTING/3", "mangle/PREROUTING/policy",
			"mangle/INPUT/1", "mangle/G/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/policy"}},
		{"input, RETURN", ChainInput, tcp(81, 63), []string{
			"mangle/PREROUTING/1", "mangle/A/1", "mangle/PREROUTING/2", "mangle/PREROUTING/3", "mangle/PREROUTING/policy",
			"mangle/INPUT/1", "mangle/G/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/policy"}},
		{"forward, TTL before the decrement", ChainForward, tcp(81, 63), []string{
			"mangle/PREROUTING/1", "mangle/A/1", "mangle/PREROUTING/2", "mangle/T/1", "mangle/PREROUTING/3",
			"mangle/PREROUTING/policy", "mangle/FORWARD/policy", "filter/FORWARD/policy",
			"mangle/POSTROUTING/policy"}},
		{"forward, ACCEPT two calls deep", ChainForward, tcp(80, 64), []string{
			"mangle/PREROUTING/1", "mangle/A/2", "mangle/B/1",
			"mangle/FORWARD/policy", "filter/FORWARD/policy", "mangle/POSTROUTING/policy"}},
	} {
		got := walk(g, tc.p, tc.chain)
		if !slices.Equal(got.counted, tc.want) || got.verdict != ActAccept {
			t.Errorf("%s: got %v %v\nwant %v", tc.name, got.verdict, got.counted, tc.want)
		}
	}
	// A and B: one region each for both walks; T one per walk (its TTL
	// match); G one (INPUT's view only).
	returns := 0
	for _, e := range g.Entries {
		if e.Action == ActReturn {
			returns++
		}
	}
	if returns != 5 {
		t.Errorf("%d regions, want 5 (A, B, G, and T for INPUT and for FORWARD)", returns)
	}
}

// TestNatRegionsSharedByViews checks that a nat user chain reached from
// nat PREROUTING and nat OUTPUT is one region when it flattens the same
// in both views (kube-proxy's service, endpoint and mark chains), reached
// from the INPUT, FORWARD and OUTPUT walks with the same rules counted,
// and one region per view when it does not: a LOG rule (the log view
// bits), an input device, a REDIRECT (its address differs in OUTPUT), or
// a chain reaching such a chain. The rules added never match the packet,
// so every variant's walks count the same rules.
func TestNatRegionsSharedByViews(t *testing.T) {
	kp := []string{
		"-t nat -N SVC", "-t nat -N SEP", "-t nat -N MASQ",
		"-t nat -A PREROUTING -j SVC", "-t nat -A OUTPUT -j SVC",
		"-t nat -A SVC -p tcp -d 10.96.0.1 --dport 80 -m statistic --mode random --probability 0.5 -j SEP",
		"-t nat -A SEP -s 10.0.0.9 -j MASQ",
		"-t nat -A SEP -p tcp -j DNAT --to-destination 10.0.0.9:8080",
		"-t nat -A MASQ -j MARK --or-mark 0x4000",
	}
	for _, tc := range []struct {
		name    string
		extra   []string
		regions int // RETURN entries
		dnat    int
	}{
		{"view-free chains", nil, 3, 1},
		// SEP per view, and SVC, which reaches it; MASQ shared.
		{"a LOG rule", []string{"-t nat -A SEP -p udp -j LOG"}, 5, 2},
		{"a REDIRECT", []string{"-t nat -A SEP -p udp -j REDIRECT"}, 5, 4},
		// MASQ per view, and the chains reaching it.
		{"an input device", []string{"-t nat -A MASQ -i eth9 -j RETURN"}, 6, 2},
		{"an output device", []string{"-t nat -A MASQ -o eth9 -j RETURN"}, 6, 2},
	} {
		rules := append(slices.Clone(kp), tc.extra...)
		g, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		returns := 0
		for _, e := range g.Entries {
			if e.Action == ActReturn {
				returns++
			}
		}
		if returns != tc.regions {
			t.Errorf("%s: %d regions, want %d", tc.name, returns, tc.regions)
		}
		if n := len(natTargets(g, ActDNAT)); n != tc.dnat {
			t.Errorf("%s: %d DNAT entries, want %d", tc.name, n, tc.dnat)
		}
		first := CtValue(CtsNew, false, 0, 6)
		for _, chain := range []int{ChainInput, ChainForward, ChainOutput} {
			p := tcpPacket(first, 64)
			p.Dst, p.Src = U64(10<<24|96<<16|1), U64(10<<24|9)
			if chain == ChainOutput {
				p.IIF = 0
			}
			got := walk(g, p, chain)
			seg := "nat/PREROUTING/1"
			if chain == ChainOutput {
				seg = "nat/OUTPUT/1"
			}
			want := []string{seg, "nat/SVC/1", "nat/SEP/1", "nat/MASQ/1", "nat/SEP/2"}
			if got.verdict != ActDNAT || !slices.Equal(got.counted, want) {
				t.Errorf("%s, walk %d: got %v %v, want DNAT %v", tc.name, chain, got.verdict, got.counted, want)
			}
		}
	}
}
