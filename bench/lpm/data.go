package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// dataset is one set of prefixes of the benchmark, split by family.
type dataset struct {
	name   string
	source string
	v4, v6 []netip.Prefix
}

// loadDatasets reads the data sets fetched by fetch-data.sh into dir, and
// makes the synthetic blocklists. A missing file is reported, not fatal.
func loadDatasets(dir string, hostSizes []int, seed uint64) ([]dataset, []string) {
	var sets []dataset
	var missing []string
	add := func(d dataset, err error) {
		if err != nil {
			missing = append(missing, err.Error())
			return
		}
		sets = append(sets, d)
	}
	add(readPrefixFile("routing table (bart testdata)", "github.com/gaissmai/bart internal/tests/testdata/prefixes.txt.gz",
		filepath.Join(dir, "bart-prefixes.txt.gz")))
	add(readPrefixFile("GeoLite2 country (geoip2fast)", "PyPI geoip2fast, geoip2fast-ipv6.dat.gz",
		filepath.Join(dir, "geoip2fast-prefixes.txt")))
	add(readTor(filepath.Join(dir, "tor-geoip"), filepath.Join(dir, "tor-geoip6")))
	rng := rand.New(rand.NewPCG(seed, 32))
	for _, n := range hostSizes {
		sets = append(sets, randomHosts(rng, n))
	}
	return sets, missing
}

// openMaybeGzip opens a file, decompressing it when its name ends in .gz.
func openMaybeGzip(path string) (io.Reader, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, f.Close, nil
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return z, f.Close, nil
}

// readPrefixFile reads one CIDR prefix per line (blank lines and # comments
// skipped).
func readPrefixFile(name, source, path string) (dataset, error) {
	d := dataset{name: name, source: source}
	r, closeFn, err := openMaybeGzip(path)
	if err != nil {
		return d, fmt.Errorf("%s: %w", name, err)
	}
	defer closeFn()
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return d, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		p = p.Masked()
		if p.Addr().Is4() {
			d.v4 = append(d.v4, p)
		} else {
			d.v6 = append(d.v6, p)
		}
	}
	if err := sc.Err(); err != nil {
		return d, fmt.Errorf("read %s: %w", path, err)
	}
	return d, nil
}

// readTor reads Tor's geoip files (Debian tor-geoipdb): "first,last,CC"
// lines, IPv4 as integers, IPv6 as addresses; each range becomes the
// prefixes covering it exactly.
func readTor(path4, path6 string) (dataset, error) {
	d := dataset{name: "Tor geoip (tor-geoipdb)", source: "Debian tor-geoipdb, /usr/share/tor/geoip{,6}"}
	for _, path := range []string{path4, path6} {
		r, closeFn, err := openMaybeGzip(path)
		if err != nil {
			return d, fmt.Errorf("%s: %w", d.name, err)
		}
		sc := bufio.NewScanner(r)
		for line := 1; sc.Scan(); line++ {
			s := strings.TrimSpace(sc.Text())
			if s == "" || s[0] == '#' {
				continue
			}
			f := strings.Split(s, ",")
			if len(f) < 2 {
				closeFn()
				return d, fmt.Errorf("%s:%d: want first,last,country", path, line)
			}
			first, err1 := parseTorAddr(f[0])
			last, err2 := parseTorAddr(f[1])
			if err1 != nil || err2 != nil {
				closeFn()
				return d, fmt.Errorf("%s:%d: bad range %q", path, line, s)
			}
			for _, p := range rangePrefixes(first, last) {
				if p.Addr().Is4() {
					d.v4 = append(d.v4, p)
				} else {
					d.v6 = append(d.v6, p)
				}
			}
		}
		err = sc.Err()
		closeFn()
		if err != nil {
			return d, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return d, nil
}

// parseTorAddr parses an address of Tor's geoip files: an IPv4 address as a
// decimal integer, or an IPv6 address.
func parseTorAddr(s string) (netip.Addr, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), nil
	}
	return netip.ParseAddr(s)
}

// rangePrefixes returns the fewest prefixes covering [first, last] exactly.
func rangePrefixes(first, last netip.Addr) []netip.Prefix {
	bits := first.BitLen()
	lo := new(big.Int).SetBytes(first.AsSlice())
	hi := new(big.Int).SetBytes(last.AsSlice())
	one := big.NewInt(1)
	var out []netip.Prefix
	for lo.Cmp(hi) <= 0 {
		// The largest block aligned at lo that stays within hi.
		size := 0
		for size < bits && lo.Bit(size) == 0 {
			end := new(big.Int).Add(lo, new(big.Int).Lsh(one, uint(size+1)))
			end.Sub(end, one)
			if end.Cmp(hi) > 0 {
				break
			}
			size++
		}
		b := lo.FillBytes(make([]byte, bits/8))
		a, _ := netip.AddrFromSlice(b)
		out = append(out, netip.PrefixFrom(a, bits-size))
		lo.Add(lo, new(big.Int).Lsh(one, uint(size)))
	}
	return out
}

// randomHosts returns a synthetic blocklist of n distinct random /32 hosts.
func randomHosts(rng *rand.Rand, n int) dataset {
	d := dataset{name: fmt.Sprintf("random /32 hosts, %s", count(n)), source: "synthetic (seeded)"}
	seen := make(map[uint32]bool, n)
	for len(d.v4) < n {
		v := rng.Uint32()
		if seen[v] {
			continue
		}
		seen[v] = true
		d.v4 = append(d.v4, netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 32))
	}
	return d
}

// count writes n as 10K, 1M, ….
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}
