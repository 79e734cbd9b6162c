package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
)

// The RFPF scenario's data ("Surgical DDoS filtering with fast LPM"): an
// allow list and a geo list of real country networks (Tor's geoip data,
// Debian tor-geoipdb), a block list of random /32 hosts, and the botnet
// traffic mix drawn from them.

// torGeoIP is Tor's IPv4 country database (Debian package tor-geoipdb,
// installed by bench/run.sh): "first,last,CC" lines, addresses as integers.
const torGeoIP = "/usr/share/tor/geoip"

// Countries of the lists. The geo list (DROP) holds France and Germany:
// 101,444 prefixes in tor-geoipdb 0.4.8 (the brief asks for at least 100K);
// the allow list (ACCEPT) the Netherlands and Sweden: 52,573 prefixes.
var (
	rfpfGeoCountries   = []string{"FR", "DE"}
	rfpfAllowCountries = []string{"NL", "SE"}
)

// rfpfBlockHosts is the size of the block list: a million random /32 hosts.
const rfpfBlockHosts = 1_000_000

// rfpfFlows is the default number of flows the generator cycles through
// (-rfpf-flows); the
// botnet mix splits it 10% / 20% / 70% (rfpfBotnetMix).
const rfpfFlows = 100_000

// trafficMix is the share of flows, in percent, from random sources, from
// allow-list networks and from block-list hosts.
type trafficMix struct{ Random, Allow, Block int }

// rfpfBotnetMix is RFPF's "botnet" traffic mix, the default of -rfpf-mix.
var rfpfBotnetMix = trafficMix{Random: 10, Allow: 20, Block: 70}

// parseMix parses -rfpf-mix: "RANDOM,ALLOW,BLOCK" percentages summing to 100.
func parseMix(s string) (trafficMix, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return trafficMix{}, fmt.Errorf("traffic mix %q: want RANDOM,ALLOW,BLOCK percentages", s)
	}
	var v [3]int
	for i, x := range f {
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || n < 0 {
			return trafficMix{}, fmt.Errorf("traffic mix %q: %q is not a percentage", s, x)
		}
		v[i] = n
	}
	if v[0]+v[1]+v[2] != 100 {
		return trafficMix{}, fmt.Errorf("traffic mix %q: the percentages sum to %d, not 100", s, v[0]+v[1]+v[2])
	}
	return trafficMix{Random: v[0], Allow: v[1], Block: v[2]}, nil
}

// seedRFPF seeds the block list and the traffic (fixed: every run and every
// firewall measures the same addresses).
const seedRFPF = 5

// rfpfExcluded are the ranges random sources and block hosts are not drawn
// from: this network, the bench's own 10/8 (fw's addresses among them, a
// source the kernel would drop as martian), loopback, multicast and class E.
var rfpfExcluded = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/3"),
}

// rfpfData is the three lists and the traffic.
type rfpfData struct {
	Allow, Geo []netip.Prefix
	Block      []netip.Addr
	Flows      []flow
	// Expected is the share of flows each rule (or the policy) decides,
	// by first match in rule order: what the counters must show.
	Expected verdictSplit
}

// verdictSplit is the share of packets decided by each rule of the RFPF
// chain and by the policy (fractions of 1).
type verdictSplit struct {
	Allow  float64 `json:"allow"`
	Block  float64 `json:"block"`
	Geo    float64 `json:"geo"`
	Policy float64 `json:"policy"`
}

// prefixSet answers "is the address in one of these prefixes" with one map
// probe per prefix length present.
type prefixSet struct {
	lens []int
	m    map[netip.Prefix]bool
}

// newPrefixSet indexes ps.
func newPrefixSet(ps []netip.Prefix) *prefixSet {
	s := &prefixSet{m: make(map[netip.Prefix]bool, len(ps))}
	seen := map[int]bool{}
	for _, p := range ps {
		s.m[p.Masked()] = true
		if !seen[p.Bits()] {
			seen[p.Bits()] = true
			s.lens = append(s.lens, p.Bits())
		}
	}
	sort.Ints(s.lens)
	return s
}

// contains reports whether a lies in one of the set's prefixes.
func (s *prefixSet) contains(a netip.Addr) bool {
	for _, l := range s.lens {
		if s.m[netip.PrefixFrom(a, l).Masked()] {
			return true
		}
	}
	return false
}

// readTorCountries returns the IPv4 networks of the given countries in
// Tor's geoip file, each range as the fewest prefixes covering it.
func readTorCountries(path string, countries []string) ([]netip.Prefix, error) {
	want := map[string]bool{}
	for _, c := range countries {
		want[c] = true
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open Tor geoip data (Debian package tor-geoipdb): %w", err)
	}
	defer f.Close()
	var out []netip.Prefix
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		fields := strings.Split(s, ",")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want first,last,country", path, line)
		}
		if !want[fields[2]] {
			continue
		}
		first, err1 := strconv.ParseUint(fields[0], 10, 32)
		last, err2 := strconv.ParseUint(fields[1], 10, 32)
		if err1 != nil || err2 != nil || first > last {
			return nil, fmt.Errorf("%s:%d: bad range %q", path, line, s)
		}
		out = append(out, coverRange(uint32(first), uint32(last))...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// coverRange returns the fewest prefixes covering [first, last] exactly.
func coverRange(first, last uint32) []netip.Prefix {
	var out []netip.Prefix
	lo, hi := uint64(first), uint64(last)
	for lo <= hi {
		// The largest block aligned at lo that ends within hi.
		size := 0
		for size < 32 && lo&(1<<size) == 0 && lo+(1<<(size+1))-1 <= hi {
			size++
		}
		out = append(out, netip.PrefixFrom(addrFromUint32(uint32(lo)), 32-size))
		lo += 1 << size
	}
	return out
}

// addrFromUint32 returns the IPv4 address v.
func addrFromUint32(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// randomHost returns a random host address inside p (the whole prefix for
// /31 and /32, otherwise neither its first nor its last address).
func randomHost(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	size := uint64(1) << (32 - p.Bits())
	if size <= 2 {
		return addrFromUint32(base + uint32(rng.Int63n(int64(size))))
	}
	return addrFromUint32(base + 1 + uint32(rng.Int63n(int64(size-2))))
}

// buildRFPFData loads the country lists, draws the block list and the
// traffic of the given mix, and computes the expected verdict split.
func buildRFPFData(mix trafficMix, nFlows int) (*rfpfData, error) {
	if nFlows < 1 || nFlows > maxTuples {
		return nil, fmt.Errorf("%d flows: want 1 to %d", nFlows, maxTuples)
	}
	allow, err := readTorCountries(torGeoIP, rfpfAllowCountries)
	if err != nil {
		return nil, err
	}
	geo, err := readTorCountries(torGeoIP, rfpfGeoCountries)
	if err != nil {
		return nil, err
	}
	if len(allow) == 0 || len(geo) == 0 {
		return nil, fmt.Errorf("%s holds no networks of %v or %v", torGeoIP, rfpfAllowCountries, rfpfGeoCountries)
	}
	d := &rfpfData{Allow: allow, Geo: geo}
	allowSet, geoSet, excl := newPrefixSet(allow), newPrefixSet(geo), newPrefixSet(rfpfExcluded)
	rng := rand.New(rand.NewSource(seedRFPF))
	unicast := func() netip.Addr {
		for {
			a := addrFromUint32(rng.Uint32())
			if !excl.contains(a) {
				return a
			}
		}
	}
	// Block list: random unicast hosts outside the allow list (a blocked
	// host the allow rule accepted first would never reach the block
	// rule); some lie in the geo list, where the block rule decides first.
	blocked := make(map[netip.Addr]bool, rfpfBlockHosts)
	d.Block = make([]netip.Addr, 0, rfpfBlockHosts)
	for len(d.Block) < rfpfBlockHosts {
		a := unicast()
		if blocked[a] || allowSet.contains(a) {
			continue
		}
		blocked[a] = true
		d.Block = append(d.Block, a)
	}
	// Traffic: distinct block hosts (a sample of the list), hosts of
	// random allow prefixes (each prefix equally likely), random unicast
	// sources (which may fall into any list or none).
	nBlock := nFlows * mix.Block / 100
	nAllow := nFlows * mix.Allow / 100
	nRandom := nFlows - nBlock - nAllow
	if nBlock > len(d.Block) {
		return nil, fmt.Errorf("%d flows from distinct block-list hosts: the list has %d", nBlock, len(d.Block))
	}
	var srcs []netip.Addr
	for _, i := range rng.Perm(len(d.Block))[:nBlock] {
		srcs = append(srcs, d.Block[i])
	}
	for i := 0; i < nAllow; i++ {
		srcs = append(srcs, randomHost(rng, allow[rng.Intn(len(allow))]))
	}
	for i := 0; i < nRandom; i++ {
		srcs = append(srcs, unicast())
	}
	// Shuffled, so every stretch of the round-robin has the mix.
	rng.Shuffle(len(srcs), func(i, j int) { srcs[i], srcs[j] = srcs[j], srcs[i] })
	var n verdictSplit
	for _, s := range srcs {
		d.Flows = append(d.Flows, flow{Src: s, Dst: randomIn(rng, fwdNet),
			Sport: uint16(1024 + rng.Intn(65536-1024)), Dport: uint16(1 + rng.Intn(65535))})
		switch {
		case allowSet.contains(s):
			n.Allow++
		case blocked[s]:
			n.Block++
		case geoSet.contains(s):
			n.Geo++
		default:
			n.Policy++
		}
	}
	total := float64(len(srcs))
	d.Expected = verdictSplit{Allow: n.Allow / total, Block: n.Block / total, Geo: n.Geo / total, Policy: n.Policy / total}
	return d, nil
}
