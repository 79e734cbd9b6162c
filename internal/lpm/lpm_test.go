package lpm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reference is the naive longest-prefix match the tests trust: a map per
// prefix, probed from the longest length down.
type reference struct {
	family Family
	m      map[netip.Prefix]uint32
}

func newReference(f Family) *reference { return &reference{family: f, m: map[netip.Prefix]uint32{}} }

func (r *reference) insert(p netip.Prefix, v uint32) { r.m[p.Masked()] = v }
func (r *reference) delete(p netip.Prefix)           { delete(r.m, p.Masked()) }

func (r *reference) lookup(a netip.Addr) uint32 {
	for bits := a.BitLen(); bits >= 0; bits-- {
		p, _ := a.Prefix(bits)
		if v, ok := r.m[p]; ok {
			return v
		}
	}
	return 0
}

func (r *reference) entries() []Entry {
	var es []Entry
	for p, v := range r.m {
		es = append(es, Entry{p, v})
	}
	return es
}

// scale multiplies the random test sizes: LPM_TEST_SCALE=10 for a long run.
func scale(t *testing.T) int {
	if s := os.Getenv("LPM_TEST_SCALE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LPM_TEST_SCALE=%q: want a positive integer", s)
		}
		return n
	}
	return 1
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestLookupTable(t *testing.T) {
	type probe struct {
		addr string
		want uint32
	}
	tests := []struct {
		name    string
		family  Family
		entries []Entry
		probes  []probe
	}{
		{"empty v4", IPv4, nil, []probe{{"0.0.0.0", 0}, {"255.255.255.255", 0}}},
		{"default route v4", IPv4, []Entry{{mustPrefix("0.0.0.0/0"), 7}},
			[]probe{{"0.0.0.0", 7}, {"10.1.2.3", 7}, {"255.255.255.255", 7}}},
		{"host routes at the edges v4", IPv4, []Entry{{mustPrefix("0.0.0.0/32"), 1}, {mustPrefix("255.255.255.255/32"), 2}},
			[]probe{{"0.0.0.0", 1}, {"0.0.0.1", 0}, {"255.255.255.254", 0}, {"255.255.255.255", 2}}},
		{"nested v4", IPv4, []Entry{
			{mustPrefix("10.0.0.0/8"), 1}, {mustPrefix("10.1.0.0/16"), 2}, {mustPrefix("10.1.2.0/24"), 3},
			{mustPrefix("10.1.2.128/25"), 4}, {mustPrefix("10.1.2.200/32"), 5}},
			[]probe{{"9.255.255.255", 0}, {"10.0.0.0", 1}, {"10.1.0.0", 2}, {"10.1.1.255", 2}, {"10.1.2.0", 3},
				{"10.1.2.127", 3}, {"10.1.2.128", 4}, {"10.1.2.199", 4}, {"10.1.2.200", 5}, {"10.1.2.201", 4},
				{"10.1.2.255", 4}, {"10.1.3.0", 2}, {"10.2.0.0", 1}, {"11.0.0.0", 0}}},
		{"adjacent same value v4", IPv4, []Entry{{mustPrefix("192.168.0.0/24"), 9}, {mustPrefix("192.168.1.0/24"), 9}},
			[]probe{{"192.168.0.255", 9}, {"192.168.1.0", 9}, {"192.168.2.0", 0}}},
		{"short prefixes across direct entries v4", IPv4, []Entry{{mustPrefix("128.0.0.0/1"), 1}, {mustPrefix("172.16.0.0/12"), 2}, {mustPrefix("172.16.5.0/24"), 3}},
			[]probe{{"127.255.255.255", 0}, {"128.0.0.0", 1}, {"172.15.255.255", 1}, {"172.16.0.0", 2}, {"172.16.5.9", 3}, {"172.31.255.255", 2}, {"172.32.0.0", 1}}},
		{"host bits cleared v4", IPv4, []Entry{{mustPrefix("10.1.2.3/8"), 4}}, []probe{{"10.200.0.1", 4}}},
		{"default route v6", IPv6, []Entry{{mustPrefix("::/0"), 3}}, []probe{{"::", 3}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 3}}},
		{"host routes v6", IPv6, []Entry{{mustPrefix("::/128"), 1}, {mustPrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), 2}, {mustPrefix("2001:db8::1/128"), 3}},
			[]probe{{"::", 1}, {"::1", 0}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 0}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2},
				{"2001:db8::", 0}, {"2001:db8::1", 3}, {"2001:db8::2", 0}}},
		{"nested across the halves v6", IPv6, []Entry{
			{mustPrefix("2001:db8::/32"), 1}, {mustPrefix("2001:db8:1::/48"), 2}, {mustPrefix("2001:db8:1:2::/64"), 3},
			{mustPrefix("2001:db8:1:2:8000::/65"), 4}, {mustPrefix("2001:db8:1:2:8000::5/128"), 5}, {mustPrefix("2001:db8:1:3::/96"), 6}},
			[]probe{{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", 0}, {"2001:db8::", 1}, {"2001:db8:1::", 2}, {"2001:db8:1:2::", 3},
				{"2001:db8:1:2:7fff:ffff:ffff:ffff", 3}, {"2001:db8:1:2:8000::", 4}, {"2001:db8:1:2:8000::5", 5}, {"2001:db8:1:2:8000::6", 4},
				{"2001:db8:1:2:ffff:ffff:ffff:ffff", 4}, {"2001:db8:1:3::", 6}, {"2001:db8:1:3::1:0:0", 2}, {"2001:db8:1:4::", 2}, {"2001:db9::", 0}}},
		{"long prefix repeating its cover v6", IPv6, []Entry{{mustPrefix("2001:db8::/64"), 1}, {mustPrefix("2001:db8::/100"), 1}},
			[]probe{{"2001:db8::1", 1}, {"2001:db8:0:0:ffff::", 1}, {"2001:db8:0:1::", 0}}},
		{"slot edge v6", IPv6, []Entry{{mustPrefix("2001:ffff:ffff:ffff::/64"), 1}, {mustPrefix("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), 2}},
			[]probe{{"2001:ffff:ffff:ffff::", 1}, {"2001:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 1}, {"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2}, {"2002::", 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Build(tc.family, tc.entries, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pr := range tc.probes {
				if got := tab.Lookup(netip.MustParseAddr(pr.addr)); got != pr.want {
					t.Errorf("Lookup(%s) = %d, want %d", pr.addr, got, pr.want)
				}
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		family  Family
		entries []Entry
	}{
		{"zero value", IPv4, []Entry{{mustPrefix("10.0.0.0/8"), 0}}},
		{"wrong family v4", IPv4, []Entry{{mustPrefix("2001:db8::/32"), 1}}},
		{"wrong family v6", IPv6, []Entry{{mustPrefix("10.0.0.0/8"), 1}}},
		{"invalid prefix", IPv4, []Entry{{netip.Prefix{}, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(tc.family, tc.entries, Options{}); err == nil {
				t.Fatal("Build succeeded, want an error")
			}
		})
	}
}

// randomPrefix returns a prefix whose length is drawn to exercise every part
// of the structure: mostly long prefixes, some short, clustered addresses so
// prefixes nest and touch.
func randomPrefix(rng *rand.Rand, f Family, clusters []netip.Addr) netip.Prefix {
	base := clusters[rng.IntN(len(clusters))]
	b := base.AsSlice()
	// Randomize the bytes after a random cluster depth.
	keep := rng.IntN(len(b) + 1)
	for i := keep; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	a, _ := netip.AddrFromSlice(b)
	var bits int
	switch maxBits := a.BitLen(); rng.IntN(10) {
	case 0:
		bits = rng.IntN(maxDirectBits + 3) // /0 to just past the direct index
	case 1:
		bits = maxBits
	default:
		bits = 8 + rng.IntN(maxBits-7)
	}
	p, _ := a.Prefix(bits)
	return p
}

// randomClusters returns a few base addresses that prefixes share.
func randomClusters(rng *rand.Rand, f Family, n int) []netip.Addr {
	var cs []netip.Addr
	for i := 0; i < n; i++ {
		var b []byte
		if f == IPv4 {
			b = make([]byte, 4)
		} else {
			b = make([]byte, 16)
		}
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i == 0 {
			clear(b) // the edges of the address space
		} else if i == 1 {
			for j := range b {
				b[j] = 0xff
			}
		}
		a, _ := netip.AddrFromSlice(b)
		cs = append(cs, a)
	}
	return cs
}

// probeAddrs returns addresses worth checking: the edges of the prefixes and
// their neighbours, and random addresses.
func probeAddrs(rng *rand.Rand, f Family, prefixes []netip.Prefix, random int) []netip.Addr {
	var as []netip.Addr
	for _, p := range prefixes {
		first := p.Masked().Addr()
		last := lastAddr(p)
		as = append(as, first, last, first.Prev(), last.Next())
	}
	for i := 0; i < random; i++ {
		as = append(as, randomAddr(rng, f))
	}
	return slices.DeleteFunc(as, func(a netip.Addr) bool { return !a.IsValid() })
}

func randomAddr(rng *rand.Rand, f Family) netip.Addr {
	if f == IPv4 {
		v := rng.Uint32()
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return netip.AddrFrom16(b)
}

// lastAddr is the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func familyName(f Family) string { return f.String() }

func TestRandomBuild(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		for _, n := range []int{1, 10, 1000, 50000 * scale(t)} {
			t.Run(familyName(f)+"/"+strconv.Itoa(n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), uint64(f)))
				clusters := randomClusters(rng, f, 1+n/20)
				ref := newReference(f)
				var ps []netip.Prefix
				for i := 0; i < n; i++ {
					p := randomPrefix(rng, f, clusters)
					ref.insert(p, uint32(rng.IntN(5)+1)) // few values: adjacent ranges merge
					ps = append(ps, p)
				}
				tab, err := Build(f, ref.entries(), Options{})
				if err != nil {
					t.Fatal(err)
				}
				if tab.Len() != len(ref.m) {
					t.Errorf("Len() = %d, want %d", tab.Len(), len(ref.m))
				}
				for _, a := range probeAddrs(rng, f, ps, 200000*scale(t)) {
					if got, want := tab.Lookup(a), ref.lookup(a); got != want {
						t.Fatalf("Lookup(%s) = %d, want %d", a, got, want)
					}
				}
			})
		}
	}
}

// shadow is a copy of the flat arrays written only through patches, as the
// BPF maps are.
type shadow struct {
	direct, ranges []uint64
}

func newShadow(tab *Table) *shadow {
	return &shadow{direct: slices.Clone(tab.Direct()), ranges: slices.Clone(tab.Ranges())}
}

func (s *shadow) apply(tab *Table, p Patch) {
	if p.Full {
		s.direct = slices.Clone(tab.Direct())
		s.ranges = slices.Clone(tab.Ranges())
		return
	}
	for _, r := range p.Ranges {
		copy(s.ranges[r.Start:r.Start+r.Len], tab.Ranges()[r.Start:])
	}
	for _, i := range p.Direct {
		s.direct[i] = tab.Direct()[i]
	}
}

// slotContent decodes what a direct entry answers, independent of where its
// block lies: the chunks' ranges with nested chunks inlined (each chunk as
// its word without the base, then its ranges).
func slotContent(tab *Table, direct, ranges []uint64, s int) []uint64 {
	d := direct[s]
	if !isChunk(d) {
		return []uint64{d}
	}
	out := []uint64{d &^ 0xffffffff} // flags and count (IPv4: size and shift)
	if tab.family == IPv4 {
		base := chunkBase(d)
		return append(out, ranges[base:base+uint32(d>>32)&size4Mask]...)
	}
	var decode func(r uint64) []uint64
	decode = func(r uint64) []uint64 {
		if !isChunk(r) {
			return []uint64{r}
		}
		out := []uint64{r &^ 0xffffffff}
		for i := chunkBase(r); i < chunkBase(r)+chunkCount(r); i++ {
			out = append(out, ranges[2*i])
			out = append(out, decode(ranges[2*i+1])...)
		}
		return out
	}
	return decode(d)
}

// checkSameAsFresh compares every direct entry's answers with those of a
// table built afresh from the reference.
func checkSameAsFresh(t *testing.T, tab *Table, sh *shadow, ref *reference) {
	t.Helper()
	fresh, err := Build(tab.family, ref.entries(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < tab.family.DirectEntries(); s++ {
		got := slotContent(tab, sh.direct, sh.ranges, s)
		want := slotContent(fresh, fresh.direct, fresh.ranges, s)
		if !slices.Equal(got, want) {
			t.Fatalf("direct entry %#04x: patched %x, fresh build %x", s, got, want)
		}
	}
}

func TestRandomUpdates(t *testing.T) {
	tests := []struct {
		name     string
		family   Family
		initial  int
		steps    int
		capacity int // 0: default; small values force compactions
	}{
		{"v4 from empty", IPv4, 0, 3000, 0},
		{"v4 on 20000", IPv4, 20000, 3000, 0},
		{"v4 tight capacity", IPv4, 2000, 2000, 1},
		{"v6 from empty", IPv6, 0, 3000, 0},
		{"v6 on 20000", IPv6, 20000, 3000, 0},
		{"v6 tight capacity", IPv6, 2000, 2000, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.initial), uint64(tc.steps)))
			clusters := randomClusters(rng, tc.family, 50)
			ref := newReference(tc.family)
			for i := 0; i < tc.initial; i++ {
				ref.insert(randomPrefix(rng, tc.family, clusters), uint32(rng.IntN(1000)+1))
			}
			tab, err := Build(tc.family, ref.entries(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.capacity != 0 {
				// Rebuild with no headroom at all.
				if tab, err = Build(tc.family, ref.entries(), Options{Capacity: max(int(tab.alloc.top), 1)}); err != nil {
					t.Fatal(err)
				}
			}
			sh := newShadow(tab)
			var live []netip.Prefix
			for p := range ref.m {
				live = append(live, p)
			}
			slices.SortFunc(live, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr())*256 + a.Bits() - b.Bits() })
			full := 0
			for step := 0; step < tc.steps*scale(t); step++ {
				var changed netip.Prefix
				var patch Patch
				if len(live) > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(len(live))
					changed = live[i]
					live = slices.Delete(live, i, i+1)
					ref.delete(changed)
					var found bool
					patch, found, err = tab.Delete(changed)
					if err != nil || !found {
						t.Fatalf("step %d: Delete(%v) = %v, %v", step, changed, found, err)
					}
				} else {
					changed = randomPrefix(rng, tc.family, clusters)
					v := uint32(rng.IntN(1000) + 1)
					if _, ok := ref.m[changed.Masked()]; !ok {
						live = append(live, changed.Masked())
					}
					ref.insert(changed, v)
					if patch, err = tab.Insert(changed, v); err != nil {
						t.Fatalf("step %d: Insert(%v, %d): %v", step, changed, v, err)
					}
				}
				if patch.Full {
					full++
				}
				sh.apply(tab, patch)
				if step%3 == 0 {
					tab.Reclaim()
				}
				if tab.Len() != len(ref.m) {
					t.Fatalf("step %d: Len() = %d, want %d", step, tab.Len(), len(ref.m))
				}
				for _, a := range probeAddrs(rng, tc.family, []netip.Prefix{changed}, 20) {
					if got, want := shadowLookup(tab.family, sh, a), ref.lookup(a); got != want {
						t.Fatalf("step %d (%v): Lookup(%s) = %d, want %d", step, changed, a, got, want)
					}
				}
				if step%500 == 0 {
					checkSameAsFresh(t, tab, sh, ref)
				}
			}
			checkSameAsFresh(t, tab, sh, ref)
			if !slices.Equal(sh.direct, tab.Direct()) || !slices.Equal(sh.ranges, tab.Ranges()) {
				t.Fatal("arrays written through patches differ from the table's")
			}
			if tc.capacity != 0 && full == 0 {
				t.Error("no update compacted the range table")
			}
		})
	}
}

// shadowLookup looks an address up in the patched copy of the arrays.
func shadowLookup(f Family, sh *shadow, a netip.Addr) uint32 {
	if f == IPv4 {
		return Lookup4Flat(sh.direct, sh.ranges, addr4(a))
	}
	hi, lo := halves(a)
	return Lookup6Flat(sh.direct, sh.ranges, hi, lo)
}

func TestDeleteAbsent(t *testing.T) {
	tab, err := Build(IPv4, []Entry{{mustPrefix("10.0.0.0/8"), 1}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"10.0.0.0/9", "11.0.0.0/8", "10.0.0.0/24"} {
		patch, found, err := tab.Delete(mustPrefix(p))
		if err != nil || found || !patch.Empty() {
			t.Errorf("Delete(%s) = %+v, %v, %v; want empty, false, nil", p, patch, found, err)
		}
	}
}

// TestHeaderConstants checks that bpf/lpm.h agrees with the package on the
// constants of the layout and of the searches.
func TestHeaderConstants(t *testing.T) {
	src, err := os.ReadFile("../../bpf/lpm.h")
	if err != nil {
		t.Fatal(err)
	}
	defines := map[string]string{}
	for _, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#define" {
			defines[f[1]] = f[2]
		}
	}
	tests := []struct {
		name string
		want string
	}{
		{"XFW_LPM4_DIRECT_BITS", strconv.Itoa(Direct4Bits)},
		{"XFW_LPM6_DIRECT_BITS", strconv.Itoa(Direct6Bits)},
		{"XFW_LPM4_STEPS", strconv.Itoa(Search4Steps)},
		{"XFW_LPM6_STEPS", strconv.Itoa(Search6Steps)},
		{"XFW_LPM_COUNT_MASK", fmt.Sprintf("%#x", countMask)},
		{"XFW_LPM_CHUNK", "(1ULL"},
		{"XFW_LPM4_SHIFT_POS", strconv.Itoa(shift4Pos)},
		{"XFW_LPM4_SHIFT_MASK", fmt.Sprintf("%#x", shift4Mask)},
		{"XFW_LPM4_PART_BITS", strconv.Itoa(part4Bits)},
		{"XFW_LPM6_INDEXED", "(1ULL"},
		{"XFW_LPM6_INDEX_BITS", strconv.Itoa(Index6Bits)},
		{"XFW_LPM6_INDEX_DEPTH", strconv.Itoa(IndexDepth6)},
	}
	for _, tc := range tests {
		if got := defines[tc.name]; got != tc.want {
			t.Errorf("lpm.h: %s = %q, want %q", tc.name, got, tc.want)
		}
	}
	if chunkFlag != 1<<63 || indexedFlag != 1<<62 {
		t.Errorf("flag bits moved: update XFW_LPM_CHUNK, XFW_LPM6_INDEXED")
	}
}

// TestIndexedChunk covers IPv6 direct entries whose level-1 chunk is an
// index: many prefixes under one /16, of every length, nested, at the edges
// of the index's parts; and updates that turn the index on and off.
func TestIndexedChunk(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 16))
	ref := newReference(IPv6)
	base := netip.MustParseAddr("2001::")
	clusters := []netip.Addr{base, netip.MustParseAddr("2001:ff00::"), netip.MustParseAddr("2001:00ff:ffff:ffff:ffff:ffff:ffff:ffff")}
	var ps []netip.Prefix
	for len(ps) < 3000 {
		p := randomPrefix(rng, IPv6, clusters)
		if p.Bits() < 16 || !p.Contains(base) && !netip.MustParsePrefix("2001::/16").Overlaps(p) {
			continue
		}
		ps = append(ps, p)
		ref.insert(p, uint32(rng.IntN(7)+1))
	}
	tab, err := Build(IPv6, ref.entries(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := tab.Direct()[0x2001]; d&indexedFlag == 0 || !isChunk(d) {
		t.Fatalf("direct entry 0x2001 = %#x, want an indexed chunk", d)
	}
	for _, a := range probeAddrs(rng, IPv6, ps, 0) {
		if got, want := tab.Lookup(a), ref.lookup(a); got != want {
			t.Fatalf("Lookup(%s) = %d, want %d", a, got, want)
		}
	}
	// Delete everything but a few: the index goes away.
	sh := newShadow(tab)
	for i, p := range ps {
		if i < len(ps)-10 {
			ref.delete(p)
			patch, _, err := tab.Delete(p)
			if err != nil {
				t.Fatal(err)
			}
			sh.apply(tab, patch)
			tab.Reclaim()
		}
	}
	checkSameAsFresh(t, tab, sh, ref)
	if d := tab.Direct()[0x2001]; d&indexedFlag != 0 {
		t.Errorf("direct entry 0x2001 = %#x, still indexed with %d prefixes", d, tab.Len())
	}
}

func TestGetAndEntries(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		t.Run(familyName(f), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(f)))
			clusters := randomClusters(rng, f, 20)
			ref := newReference(f)
			for i := 0; i < 2000; i++ {
				ref.insert(randomPrefix(rng, f, clusters), uint32(i+1))
			}
			tab, err := Build(f, ref.entries(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := tab.Entries()
			if len(got) != len(ref.m) {
				t.Fatalf("Entries() has %d entries, want %d", len(got), len(ref.m))
			}
			for i, e := range got {
				if want, ok := ref.m[e.Prefix]; !ok || want != e.Value {
					t.Fatalf("Entries()[%d] = %v %d, reference has %d, %v", i, e.Prefix, e.Value, want, ok)
				}
				if v, ok := tab.Get(e.Prefix); !ok || v != e.Value {
					t.Fatalf("Get(%v) = %d, %v; want %d", e.Prefix, v, ok, e.Value)
				}
				if i > 0 && got[i-1].Prefix.Addr().Compare(e.Prefix.Addr()) > 0 {
					t.Fatalf("Entries() not sorted at %d", i)
				}
			}
			for i := 0; i < 1000; i++ {
				p := randomPrefix(rng, f, clusters)
				want, wantOK := ref.m[p.Masked()]
				if v, ok := tab.Get(p); ok != wantOK || v != want {
					t.Fatalf("Get(%v) = %d, %v; want %d, %v", p, v, ok, want, wantOK)
				}
			}
		})
	}
}

// TestIndexedChunk4 covers IPv4 chunks whose index has more than one word:
// a /18 holding prefixes of every length from /18 to /32, nested and at the
// edges of the index's parts; patches that move the chunk across the
// boundary between one index word and more, both ways (checked against a
// fresh build and BuildBlock); and a /18 where every address answers
// differently from its neighbours (2^14 runs, the largest chunk).
func TestIndexedChunk4(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 18))
	block := mustPrefix("10.20.64.0/18")
	base := addr4(block.Addr())
	s := int(base >> (32 - Direct4Bits))
	shift := func(tab *Table) int { return int(tab.Direct()[s] >> shift4Pos & shift4Mask) }
	checkAll := func(tab *Table, ref *reference) {
		t.Helper()
		// Every address of the /18 and its neighbours.
		for a := base - 1; a != base+1<<part4Bits+1; a++ {
			if got, want := tab.Lookup(addrFrom4(a)), ref.lookup(addrFrom4(a)); got != want {
				t.Fatalf("Lookup(%s) = %d, want %d (shift %d)", addrFrom4(a), got, want, shift(tab))
			}
		}
	}
	checkBlock := func(tab *Table, ref *reference) {
		t.Helper()
		word, content, err := BuildBlock(IPv4, s, ref.entries(), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := slotContent(tab, []uint64{word}, content, 0)
		if want := slotContent(tab, tab.Direct(), tab.Ranges(), s); !slices.Equal(got, want) {
			t.Fatalf("BuildBlock: %x, table's block %x", got, want)
		}
	}

	ref := newReference(IPv4)
	ref.insert(mustPrefix("10.0.0.0/8"), 99) // the chunk's default
	var ps []netip.Prefix
	for len(ps) < 3000 {
		off := rng.Uint32() & hostMask4(Direct4Bits)
		if rng.IntN(2) == 0 {
			// At or next to the edge of a part of 2^j addresses.
			j := rng.IntN(part4Bits)
			off = off>>j<<j - uint32(rng.IntN(2))
		}
		p, _ := addrFrom4(base | off&hostMask4(Direct4Bits)).Prefix(Direct4Bits + rng.IntN(32-Direct4Bits+1))
		ps = append(ps, p.Masked())
		ref.insert(p, uint32(rng.IntN(7)+1))
	}
	tab, err := Build(IPv4, ref.entries(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if shift(tab) >= part4Bits {
		t.Fatalf("direct entry %#x = %#x, want an index of more than one word", s, tab.Direct()[s])
	}
	checkAll(tab, ref)
	checkBlock(tab, ref)

	// Down to a few prefixes and up again, through patches.
	sh := newShadow(tab)
	apply := func(p Patch) {
		sh.apply(tab, p)
		tab.Reclaim()
	}
	sawOne, sawMore := false, false
	for i, p := range ps {
		if i < 10 {
			continue
		}
		ref.delete(p)
		patch, _, err := tab.Delete(p)
		if err != nil {
			t.Fatal(err)
		}
		apply(patch)
		sawOne = sawOne || shift(tab) == part4Bits
		sawMore = sawMore || shift(tab) < part4Bits
		if i%100 == 0 {
			for _, a := range probeAddrs(rng, IPv4, ps[:i+1], 0) {
				if got, want := shadowLookup(IPv4, sh, a), ref.lookup(a); got != want {
					t.Fatalf("after %d deletes: Lookup(%s) = %d, want %d", i, a, got, want)
				}
			}
		}
	}
	if !sawOne || !sawMore {
		t.Fatalf("deletes went through one index word: %v, more: %v", sawOne, sawMore)
	}
	checkSameAsFresh(t, tab, sh, ref)
	checkAll(tab, ref)
	checkBlock(tab, ref)
	for _, p := range ps[10:] {
		ref.insert(p, uint32(rng.IntN(7)+1))
		patch, err := tab.Insert(p, ref.m[p])
		if err != nil {
			t.Fatal(err)
		}
		apply(patch)
	}
	if shift(tab) >= part4Bits {
		t.Fatalf("direct entry %#x = %#x after the inserts, want an index of more than one word", s, tab.Direct()[s])
	}
	checkSameAsFresh(t, tab, sh, ref)
	checkAll(tab, ref)
	checkBlock(tab, ref)

	// Every address of the /18 its own run.
	ref = newReference(IPv4)
	for off := uint32(0); off < 1<<part4Bits; off++ {
		ref.insert(netip.PrefixFrom(addrFrom4(base|off), 32), 1+off%2)
	}
	if tab, err = Build(IPv4, ref.entries(), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := tab.Direct()[s] >> 32 & size4Mask; got <= 1<<part4Bits {
		t.Errorf("block of %d words for 2^%d runs", got, part4Bits)
	}
	checkAll(tab, ref)
	checkBlock(tab, ref)
}
