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
