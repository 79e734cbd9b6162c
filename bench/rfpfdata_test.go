package main

import (
	"math"
	"net/netip"
	"os"
	"testing"
)

// TestCoverRange checks that coverRange covers a range exactly with the
// fewest prefixes.
func TestCoverRange(t *testing.T) {
	for _, tc := range []struct {
		first, last string
		want        []string
	}{
		{"10.0.0.0", "10.0.0.255", []string{"10.0.0.0/24"}},
		{"10.0.0.1", "10.0.0.2", []string{"10.0.0.1/32", "10.0.0.2/32"}},
		{"10.0.0.0", "10.0.2.127", []string{"10.0.0.0/23", "10.0.2.0/25"}},
		{"0.0.0.0", "255.255.255.255", []string{"0.0.0.0/0"}},
		{"255.255.255.255", "255.255.255.255", []string{"255.255.255.255/32"}},
	} {
		a, b := netip.MustParseAddr(tc.first).As4(), netip.MustParseAddr(tc.last).As4()
		u := func(x [4]byte) uint32 { return uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3]) }
		got := coverRange(u(a), u(b))
		if len(got) != len(tc.want) {
			t.Fatalf("coverRange(%s, %s) = %v, want %v", tc.first, tc.last, got, tc.want)
		}
		for i := range got {
			if got[i].String() != tc.want[i] {
				t.Errorf("coverRange(%s, %s) = %v, want %v", tc.first, tc.last, got, tc.want)
			}
		}
	}
}

// TestRFPFData checks the lists and the botnet mix (needs Debian's
// tor-geoipdb).
func TestRFPFData(t *testing.T) {
	if _, err := os.Stat(torGeoIP); err != nil {
		t.Skipf("no Tor geoip data: %v", err)
	}
	d, err := buildRFPFData(rfpfBotnetMix, rfpfFlows)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Geo) < 100_000 || len(d.Allow) < 10_000 || len(d.Block) != rfpfBlockHosts || len(d.Flows) != rfpfFlows {
		t.Fatalf("sizes: allow %d, geo %d, block %d, flows %d", len(d.Allow), len(d.Geo), len(d.Block), len(d.Flows))
	}
	e := d.Expected
	if s := e.Allow + e.Block + e.Geo + e.Policy; math.Abs(s-1) > 1e-9 {
		t.Errorf("split sums to %v", s)
	}
	// Allow and block sources decide 20% and 70%; random ones add at
	// most their 10%.
	if e.Block < 0.70 || e.Block > 0.71 || e.Allow < 0.20 || e.Allow > 0.21 || e.Geo > 0.1 || e.Policy > 0.1 {
		t.Errorf("expected split %+v, want about 20/70 and the rest under 10%%", e)
	}
	allow := newPrefixSet(d.Allow)
	for _, a := range d.Block[:1000] {
		if allow.contains(a) {
			t.Fatalf("block host %s lies in the allow list", a)
		}
	}
}

// TestCheckSplit checks that a configuration whose counters disagree with
// the traffic is rejected.
func TestCheckSplit(t *testing.T) {
	want := verdictSplit{Allow: 0.2, Block: 0.7, Geo: 0.01, Policy: 0.09}
	if bad := checkSplit(verdictSplit{Allow: 0.205, Block: 0.695, Geo: 0.01, Policy: 0.09}, want, 0.29); bad != nil {
		t.Errorf("a matching split rejected: %v", bad)
	}
	// The block rule matching nothing (a missing set, say): the
	// packets fall to the policy and are forwarded.
	bad := checkSplit(verdictSplit{Allow: 0.2, Geo: 0.01, Policy: 0.79}, want, 0.99)
	if len(bad) != 2 {
		t.Errorf("a broken block rule gave %v, want block and forwarded flagged", bad)
	}
	// Counters right, but packets lost on the way to sink.
	if bad := checkSplit(want, want, 0.2); len(bad) != 1 {
		t.Errorf("lost forwarded packets gave %v, want forwarded flagged", bad)
	}
}

// TestParseMix checks -rfpf-mix.
func TestParseMix(t *testing.T) {
	if m, err := parseMix("10, 20,70"); err != nil || m != rfpfBotnetMix {
		t.Errorf("parseMix(10,20,70) = %+v, %v", m, err)
	}
	for _, s := range []string{"10,20", "10,20,60", "a,b,c", "-10,40,70"} {
		if _, err := parseMix(s); err == nil {
			t.Errorf("parseMix(%q) accepted", s)
		}
	}
}

// TestCounterPatterns checks the counter patterns on the tools' output.
func TestCounterPatterns(t *testing.T) {
	line := "-A FORWARD -m set --match-set allow src -c 1234 74040 -j ACCEPT"
	if m := countersRE.FindStringSubmatch(line); m == nil || m[1] != "1234" {
		t.Errorf("iptables -S -v counters of %q: %v", line, m)
	}
	nft := "\t\tip saddr @block counter packets 987 bytes 59220 drop\n"
	if m := nftCounterRE.FindAllStringSubmatch(nft, -1); len(m) != 1 || m[0][1] != "987" {
		t.Errorf("nft counters of %q: %v", nft, m)
	}
}
