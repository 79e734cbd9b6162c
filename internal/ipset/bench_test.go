package ipset

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// bigSets returns a collection with one hash:net set of n IPv4 networks.
func bigSets(b testing.TB, n int) *Sets {
	b.Helper()
	ss := NewSets()
	s, err := parseCreate([]string{"big", "hash:net", "maxelem", fmt.Sprint(n)})
	if err != nil {
		b.Fatal(err)
	}
	ss.add(s)
	s.base = make(map[Elem]*Entry, n)
	for i := range n {
		a := netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 0})
		e := Elem{Prefix: netip.PrefixFrom(a, 24)}
		s.base[e] = &Entry{Elem: e}
	}
	s.count = n
	return ss
}

// BenchmarkMarshalBinary1M encodes a set of 10^6 networks.
func BenchmarkMarshalBinary1M(b *testing.B) {
	ss := bigSets(b, 1_000_000)
	b.ResetTimer()
	for b.Loop() {
		data, err := ss.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

// BenchmarkUnmarshalBinary1M decodes a set of 10^6 networks.
func BenchmarkUnmarshalBinary1M(b *testing.B) {
	data, err := bigSets(b, 1_000_000).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := NewSets().UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddOneTo1M is `ipset add` of one entry to a set of 10^6: load,
// clone, add, diff.
func BenchmarkAddOneTo1M(b *testing.B) {
	store := NewMemStore()
	store.sets = bigSets(b, 1_000_000)
	store.sets.Get("big").Options.MaxElem = 2_000_000
	i := 0
	for b.Loop() {
		i++
		arg := fmt.Sprintf("200.%d.%d.0/24", i>>8&255, i&255)
		if st := RunAt([]string{"add", "big", arg}, nil, io.Discard, io.Discard, store, time.Now()); st != 0 {
			b.Fatalf("status %d", st)
		}
	}
}

// BenchmarkRestore100k restores 10^5 add lines.
func BenchmarkRestore100k(b *testing.B) {
	var in strings.Builder
	in.WriteString("create big hash:net maxelem 1000000\n")
	for i := range 100_000 {
		fmt.Fprintf(&in, "add big %d.%d.%d.0/24\n", i>>16, i>>8&255, i&255)
	}
	text := in.String()
	for b.Loop() {
		if st := RunAt([]string{"restore"}, strings.NewReader(text), io.Discard, io.Discard, NewMemStore(), time.Now()); st != 0 {
			b.Fatalf("status %d", st)
		}
	}
}

// BenchmarkListEncoded1M iterates a million members left encoded (what
// `ipset list` and `save` of a loaded set do).
func BenchmarkListEncoded1M(b *testing.B) {
	data, err := bigSets(b, 1_000_000).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	ss := NewSets()
	if err := ss.UnmarshalBinary(data); err != nil {
		b.Fatal(err)
	}
	s := ss.Get("big")
	b.ResetTimer()
	for b.Loop() {
		n := 0
		s.All(func(*Entry) bool { n++; return true })
	}
}
