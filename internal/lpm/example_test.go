package lpm_test

import (
	"fmt"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/lpm"
)

// The life of a set: build the flat arrays, copy them into the BPF maps
// (here two slices stand in for the mmapped maps), then apply each update's
// patch in its order: ranges first, direct entries last.
func Example() {
	tab, err := lpm.Build(lpm.IPv4, []lpm.Entry{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Value: 1},
		{Prefix: netip.MustParsePrefix("10.1.2.0/24"), Value: 2},
	}, lpm.Options{})
	if err != nil {
		panic(err)
	}
	direct := append([]uint64(nil), tab.Direct()...) // one copy per map
	ranges := append([]uint64(nil), tab.Ranges()...)

	patch, err := tab.Insert(netip.MustParsePrefix("10.1.2.3/32"), 3)
	if err != nil {
		panic(err)
	}
	if patch.Full {
		// Compacted: fill new maps and swap them in (ARRAY_OF_MAPS).
		direct = append([]uint64(nil), tab.Direct()...)
		ranges = append([]uint64(nil), tab.Ranges()...)
	}
	for _, r := range patch.Ranges { // new chunks, not yet referenced
		copy(ranges[r.Start:r.Start+r.Len], tab.Ranges()[r.Start:])
	}
	for _, i := range patch.Direct { // one aligned 8-byte store each
		direct[i] = tab.Direct()[i]
	}
	tab.Reclaim() // later, once no program can still read the old chunk

	for _, a := range []string{"10.9.9.9", "10.1.2.1", "10.1.2.3", "11.0.0.1"} {
		fmt.Println(a, lpm.Lookup4Flat(direct, ranges, addr4(a)))
	}
	// Output:
	// 10.9.9.9 1
	// 10.1.2.1 2
	// 10.1.2.3 3
	// 11.0.0.1 0
}

func addr4(s string) uint32 {
	b := netip.MustParseAddr(s).As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
