package lpm

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// flatLookup looks a up in flat arrays as the data plane does.
func flatLookup(f Family, direct, ranges []uint64, a netip.Addr) uint32 {
	if f == IPv4 {
		return Lookup4Flat(direct, ranges, addr4(a))
	}
	hi, lo := halves(a)
	return Lookup6Flat(direct, ranges, hi, lo)
}

// TestBuildBlockPatches builds a table, then applies random inserts and
// deletes to a copy of its flat arrays only, direct entry by direct entry
// with BuildBlock (appending each block after the used ranges), and checks
// every lookup against the naive reference.
func TestBuildBlockPatches(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(f)))
			clusters := randomClusters(rng, f, 6)
			ref := newReference(f)
			for i := 0; i < 2000; i++ {
				ref.insert(randomPrefix(rng, f, clusters), uint32(1+rng.IntN(2)))
			}
			tab, err := Build(f, ref.entries(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			direct := slices.Clone(tab.Direct())
			ranges := slices.Clone(tab.Ranges()[:tab.Used()])
			var changed []netip.Prefix
			for step := 0; step < 300; step++ {
				p := randomPrefix(rng, f, clusters)
				del := rng.IntN(3) == 0
				if del {
					for q := range ref.m {
						p = q
						break
					}
				}
				first, n, err := DirectSpan(f, p)
				if err != nil {
					t.Fatal(err)
				}
				if n > 64 {
					continue // a caller rebuilds the whole table instead
				}
				if del {
					ref.delete(p)
				} else {
					ref.insert(p, uint32(1+rng.IntN(2)))
				}
				changed = append(changed, p)
				for s := first; s < first+n; s++ {
					word, content, err := BuildBlock(f, s, ref.entries(), uint32(len(ranges)/f.rangeWords()))
					if err != nil {
						t.Fatal(err)
					}
					ranges = append(ranges, content...)
					direct[s] = word
				}
				probes := probeAddrs(rng, f, changed[max(0, len(changed)-20):], 50)
				for _, a := range probes {
					if got, want := flatLookup(f, direct, ranges, a), ref.lookup(a); got != want {
						t.Fatalf("step %d (%v, entries %d+%d): lookup %v = %d, want %d", step, p, first, n, a, got, want)
					}
				}
			}
		})
	}
}

// TestDirectRangeAndSpan checks the direct entries of a few prefixes.
func TestDirectRangeAndSpan(t *testing.T) {
	tests := []struct {
		family     Family
		prefix     string
		first, n   int
		rangeFirst string
		rangeLast  string
	}{
		{IPv4, "10.1.2.3/32", 10<<10 | 1<<2, 1, "10.1.0.0", "10.1.63.255"},
		{IPv4, "10.1.192.0/18", 10<<10 | 1<<2 | 3, 1, "10.1.192.0", "10.1.255.255"},
		{IPv4, "10.0.0.0/16", 10 << 10, 4, "10.0.0.0", "10.0.63.255"},
		{IPv4, "0.0.0.0/0", 0, 1 << 18, "0.0.0.0", "0.0.63.255"},
		{IPv6, "2001:db8::1/128", 0x2001, 1, "2001::", "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{IPv6, "2000::/15", 0x2000, 2, "2000::", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
	}
	for _, tt := range tests {
		first, n, err := DirectSpan(tt.family, netip.MustParsePrefix(tt.prefix))
		if err != nil || first != tt.first || n != tt.n {
			t.Errorf("DirectSpan(%s) = %d, %d, %v; want %d, %d", tt.prefix, first, n, err, tt.first, tt.n)
		}
		a, b := DirectRange(tt.family, tt.first)
		if a.String() != tt.rangeFirst || b.String() != tt.rangeLast {
			t.Errorf("DirectRange(%d) = %v-%v, want %s-%s", tt.first, a, b, tt.rangeFirst, tt.rangeLast)
		}
	}
}
