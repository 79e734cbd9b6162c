package lpm

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// randomHostEntries returns n random IPv4 /32 entries (values 1..n).
func randomHostEntries(n int) []Entry {
	rng := rand.New(rand.NewPCG(1, 32))
	es := make([]Entry, n)
	for i := range es {
		v := rng.Uint32()
		es[i] = Entry{netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 32), uint32(i + 1)}
	}
	return es
}

// BenchmarkBuild4Hosts1M builds a table of a million random hosts (the
// flat arrays included); bench/lpm measures the real data sets.
func BenchmarkBuild4Hosts1M(b *testing.B) {
	es := randomHostEntries(1_000_000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Build(IPv4, es, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInsertDelete4Hosts1M inserts and deletes one random /24–/32 in a
// table of a million random hosts (one op: an insert and a delete).
func BenchmarkInsertDelete4Hosts1M(b *testing.B) {
	tab, err := Build(IPv4, randomHostEntries(1_000_000), Options{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 24))
	b.ResetTimer()
	for b.Loop() {
		v := rng.Uint32()
		p, _ := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).Prefix(24 + rng.IntN(9))
		if _, err := tab.Insert(p, 1); err != nil {
			b.Fatal(err)
		}
		if _, _, err := tab.Delete(p); err != nil {
			b.Fatal(err)
		}
		tab.Reclaim()
	}
}
