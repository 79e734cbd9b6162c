package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/lpm"
)

// Constants of lpm_bench.c.
const (
	benchBatch = 256     // XFW_BENCH_BATCH: lookups per program run
	benchKeys  = 1 << 20 // XFW_BENCH_KEYS: entries of the key arrays
)

// lpm4Key and lpm6Key are the kernel LPM trie keys (prefix length, then the
// address in network order).
type lpm4Key struct {
	Prefixlen uint32
	Addr      [4]byte
}
type lpm6Key struct {
	Prefixlen uint32
	Addr      [16]byte
}

// structure is one lookup structure measured by BPF_PROG_TEST_RUN.
type structure struct {
	name string // table column
	prog string // program of lpm_bench.c
}

// stats summarizes repeated measurements.
type stats struct {
	median, min, max, p99 float64
}

func summarize(xs []float64) stats {
	s := slices.Clone(xs)
	slices.Sort(s)
	return stats{median: s[len(s)/2], min: s[0], max: s[len(s)-1], p99: s[len(s)*99/100]}
}

// bpfSession is one loaded benchmark object holding one family's tables.
type bpfSession struct {
	coll   *ebpf.Collection
	family lpm.Family
	tab    *lpm.Table
	direct *ebpf.Memory
	ranges *ebpf.Memory
}

// loadSession loads lpm_bench.o with the maps sized for the table and the
// prefixes, fills the DXR maps (one copy each) and, unless skipped, the
// kernel trie and hash; it returns the fill times.
func loadSession(obj string, tab *lpm.Table, prefixes []netip.Prefix, values []uint32, withHash bool) (*bpfSession, map[string]time.Duration, error) {
	spec, err := ebpf.LoadCollectionSpec(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", obj, err)
	}
	fam := "4"
	if tab.Family() == lpm.IPv6 {
		fam = "6"
	}
	spec.Maps["ranges"+fam].MaxEntries = uint32(max(len(tab.Ranges()), 1))
	// Room for the update measurements.
	spec.Maps["trie"+fam].MaxEntries = uint32(len(prefixes) + 1<<16)
	if withHash {
		spec.Maps["hash4"].MaxEntries = uint32(max(len(prefixes), 1))
	}
	if tab.Family() == lpm.IPv4 {
		// ARRAY_OF_MAPS variants: templates of the inner maps' exact sizes,
		// and copies of the tables flagged BPF_F_INNER_MAP.
		setInnerSize(spec.Maps["outer_direct4"], len(tab.Direct()))
		setInnerSize(spec.Maps["outer_ranges4"], len(tab.Ranges()))
		spec.Maps["direct4dyn"].MaxEntries = uint32(len(tab.Direct()))
		spec.Maps["ranges4dyn"].MaxEntries = uint32(max(len(tab.Ranges()), 1))
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, nil, fmt.Errorf("load programs: %+v", ve)
		}
		return nil, nil, fmt.Errorf("load programs: %w", err)
	}
	s := &bpfSession{coll: coll, family: tab.Family(), tab: tab}
	times := map[string]time.Duration{}
	if s.direct, err = coll.Maps["direct"+fam].Memory(); err != nil {
		s.close()
		return nil, nil, fmt.Errorf("map direct%s: %w", fam, err)
	}
	if s.ranges, err = coll.Maps["ranges"+fam].Memory(); err != nil {
		s.close()
		return nil, nil, fmt.Errorf("map ranges%s: %w", fam, err)
	}
	start := time.Now()
	if _, err := s.ranges.WriteAt(lpm.Words(tab.Ranges()), 0); err != nil {
		s.close()
		return nil, nil, fmt.Errorf("fill ranges: %w", err)
	}
	if _, err := s.direct.WriteAt(lpm.Words(tab.Direct()), 0); err != nil {
		s.close()
		return nil, nil, fmt.Errorf("fill direct: %w", err)
	}
	times["dxr"] = time.Since(start)
	if tab.Family() == lpm.IPv4 {
		if err := s.fillInner(); err != nil {
			s.close()
			return nil, nil, err
		}
	}

	start = time.Now()
	if err := fillTrie(coll.Maps["trie"+fam], prefixes, values); err != nil {
		s.close()
		return nil, nil, err
	}
	times["trie"] = time.Since(start)
	if withHash {
		start = time.Now()
		keys := make([]uint32, len(prefixes))
		for i, p := range prefixes {
			keys[i] = addr4(p.Addr())
		}
		if err := batchUpdate(coll.Maps["hash4"], keys, values); err != nil {
			s.close()
			return nil, nil, err
		}
		times["hash"] = time.Since(start)
	}
	return s, times, nil
}

func (s *bpfSession) close() { s.coll.Close() }

// setInnerSize gives an ARRAY_OF_MAPS's inner-map template n entries.
func setInnerSize(outer *ebpf.MapSpec, n int) {
	inner := *outer.InnerMap
	inner.MaxEntries = uint32(max(n, 1))
	outer.InnerMap = &inner
}

// fillInner puts the IPv4 tables into the outer maps: direct4 and ranges4
// themselves, and copies of them in the BPF_F_INNER_MAP maps.
func (s *bpfSession) fillInner() error {
	for name, words := range map[string][]uint64{"direct4dyn": s.tab.Direct(), "ranges4dyn": s.tab.Ranges()} {
		mem, err := s.coll.Maps[name].Memory()
		if err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
		if _, err := mem.WriteAt(lpm.Words(words), 0); err != nil {
			return fmt.Errorf("fill %s: %w", name, err)
		}
	}
	for outer, inner := range map[string]string{
		"outer_direct4": "direct4", "outer_ranges4": "ranges4",
		"outer_direct4dyn": "direct4dyn", "outer_ranges4dyn": "ranges4dyn",
	} {
		if err := s.coll.Maps[outer].Put(uint32(0), s.coll.Maps[inner]); err != nil {
			return fmt.Errorf("map %s: put %s: %w", outer, inner, err)
		}
	}
	return nil
}

// batchUpdate writes keys and values in batches.
func batchUpdate[K, V any](m *ebpf.Map, keys []K, values []V) error {
	const batch = 65536
	for i := 0; i < len(keys); i += batch {
		j := min(i+batch, len(keys))
		if _, err := m.BatchUpdate(keys[i:j], values[i:j], nil); err != nil {
			return fmt.Errorf("map %s: batch update [%d:%d]: %w", m, i, j, err)
		}
	}
	return nil
}

// trieKeys returns the LPM trie keys of the prefixes.
func fillTrie(m *ebpf.Map, prefixes []netip.Prefix, values []uint32) error {
	if len(prefixes) == 0 {
		return nil
	}
	if prefixes[0].Addr().Is4() {
		keys := make([]lpm4Key, len(prefixes))
		for i, p := range prefixes {
			keys[i] = lpm4Key{uint32(p.Bits()), p.Addr().As4()}
		}
		return batchUpdate(m, keys, values)
	}
	keys := make([]lpm6Key, len(prefixes))
	for i, p := range prefixes {
		keys[i] = lpm6Key{uint32(p.Bits()), p.Addr().As16()}
	}
	return batchUpdate(m, keys, values)
}

// setKeys writes the lookup keys into the key arrays.
func (s *bpfSession) setKeys(keys []netip.Addr) error {
	hi := make([]uint64, benchKeys)
	lo := make([]uint64, benchKeys)
	for i := range hi {
		a := keys[i%len(keys)]
		if a.Is4() {
			lo[i] = uint64(addr4(a))
		} else {
			hi[i], lo[i] = halves(a)
		}
	}
	for name, words := range map[string][]uint64{"key_hi": hi, "key_lo": lo} {
		mem, err := s.coll.Maps[name].Memory()
		if err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
		if _, err := mem.WriteAt(lpm.Words(words), 0); err != nil {
			return fmt.Errorf("fill %s: %w", name, err)
		}
	}
	return nil
}

// run runs prog over all keys once per measurement: it checks the sum of the
// results against want (unless want is negative) and returns ns per lookup
// of each of runs measurements.
func (s *bpfSession) run(prog string, runs int, want int64) ([]float64, error) {
	p := s.coll.Programs[prog]
	if p == nil {
		return nil, fmt.Errorf("no program %s", prog)
	}
	cursor, sum := s.coll.Variables["cursor"], s.coll.Variables["sum"]
	reset := func() {
		// An interrupted test run is started over: count from scratch.
		_ = cursor.Set(uint32(0))
		_ = sum.Set(uint64(0))
	}
	pkt := make([]byte, 64)
	var out []float64
	for r := 0; r < runs; r++ {
		reset()
		_, per, err := p.Benchmark(pkt, benchKeys/benchBatch, reset)
		if err != nil {
			return nil, fmt.Errorf("test run %s: %w", prog, err)
		}
		var got uint64
		if err := sum.Get(&got); err != nil {
			return nil, fmt.Errorf("read sum: %w", err)
		}
		if want >= 0 && got != uint64(want) {
			return nil, fmt.Errorf("%s: sum of results %d, user space lookup says %d", prog, got, want)
		}
		out = append(out, float64(per.Nanoseconds())/benchBatch)
	}
	return out, nil
}

// applyPatch writes a patch into the mapped maps: ranges first, then each
// direct entry with one aligned 8-byte copy.
func (s *bpfSession) applyPatch(p lpm.Patch) error {
	if p.Full {
		if len(s.tab.Ranges())*8 > int(s.ranges.Size()) {
			return fmt.Errorf("compacted range table outgrew its map (the caller swaps in a larger map)")
		}
		if _, err := s.ranges.WriteAt(lpm.Words(s.tab.Ranges()), 0); err != nil {
			return err
		}
		_, err := s.direct.WriteAt(lpm.Words(s.tab.Direct()), 0)
		return err
	}
	ranges, direct := s.tab.Ranges(), s.tab.Direct()
	for _, r := range p.Ranges {
		if _, err := s.ranges.WriteAt(lpm.Words(ranges[r.Start:r.Start+r.Len]), int64(8*r.Start)); err != nil {
			return fmt.Errorf("write ranges [%d, +%d): %w", r.Start, r.Len, err)
		}
	}
	for _, i := range p.Direct {
		if _, err := s.direct.WriteAt(lpm.Words(direct[i:i+1]), int64(8*i)); err != nil {
			return fmt.Errorf("write direct %d: %w", i, err)
		}
	}
	return nil
}

// randomNewPrefix returns a random prefix for update measurements: IPv4 /24
// to /32, IPv6 /48 to /128 inside 2000::/3.
func randomNewPrefix(rng *rand.Rand, fam lpm.Family) netip.Prefix {
	if fam == lpm.IPv4 {
		a := randomAddr4(rng)
		p, _ := a.Prefix(24 + rng.IntN(9))
		return p
	}
	a := randomGlobal6(rng)
	p, _ := a.Prefix(48 + rng.IntN(81))
	return p
}

func randomAddr4(rng *rand.Rand) netip.Addr {
	v := rng.Uint32()
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// randomGlobal6 is a random address of 2000::/3 (global unicast).
func randomGlobal6(rng *rand.Rand) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[0] = 0x20 | b[0]&0x1f
	return netip.AddrFrom16(b)
}

// randomIn returns a random address of prefix p.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func halves(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}
