package settable

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestKeyPrefix checks that a written table's key reads back as the
// prefix addrWords made it from.
func TestKeyPrefix(t *testing.T) {
	for _, s := range []string{"10.1.2.3/32", "10.1.2.0/24", "0.0.0.0/0", "2001:db8::1/128", "2001:db8:1::/48", "2001:db8::/124"} {
		p := netip.MustParsePrefix(s)
		fam := ir.IPv4
		if p.Addr().Is6() {
			fam = ir.IPv6
		}
		var k dataplane.SetHashKey
		k.Hi, k.Lo = addrWords(p.Addr())
		k.Plen = uint8(p.Bits())
		if got := keyPrefix(k, fam); got != p {
			t.Errorf("%s: read back as %s", p, got)
		}
	}
}

// TestWriteMetaEntry checks the write parameters: hash:ip's element length
// (its netmask), the net types' flag, the port types' flag, the default
// timeout.
func TestWriteMetaEntry(t *testing.T) {
	tests := []struct {
		set        ipset.Set
		maxPlen    uint8
		aux        uint32
		answer     uint32
		defTimeout uint64
	}{
		{ipset.Set{Type: ipset.HashIP}, 32, 32, 0, 0},
		{ipset.Set{Type: ipset.HashIP, Options: ipset.Options{Netmask: 24, HasTimeout: true, Timeout: 600}}, 32, 24, 1, 600},
		{ipset.Set{Type: ipset.HashNet, Options: ipset.Options{HasTimeout: true}}, 128, 128, 3, 0},
		{ipset.Set{Type: ipset.HashIPPort}, 32, 32, 4, 0},
		{ipset.Set{Type: ipset.HashNetPort, Options: ipset.Options{HasTimeout: true, Timeout: 30}}, 128, 128, 7, 30},
	}
	for i, tt := range tests {
		e := writeMetaEntry(&tt.set, tt.maxPlen)
		if e.Aux != tt.aux || e.Answer != tt.answer || e.Expires != tt.defTimeout || e.Key.Plen != dataplane.SetMetaPlen {
			t.Errorf("%d: %+v, want aux %d answer %d timeout %d", i, e, tt.aux, tt.answer, tt.defTimeout)
		}
	}
}

// TestSameSecond checks the expiry comparison of TakeWrites.
func TestSameSecond(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		a, b time.Time
		want bool
	}{
		{time.Time{}, time.Time{}, true},
		{now, time.Time{}, false},
		{now, now.Add(300 * time.Millisecond), true},
		{now, now.Add(-2 * time.Second), false},
	} {
		if got := sameSecond(c.a, c.b); got != c.want {
			t.Errorf("sameSecond(%v, %v) = %v", c.a, c.b, got)
		}
	}
}

// TestWrittenSetTables checks the lookups of a generation writing sets:
// the written set's match a hash lookup with the write parameters, its
// write lookup sharing that table and coming after the conditions', a
// set written but not matched given a table of its own, and a written set
// matched through a list:set refused.
func TestWrittenSetTables(t *testing.T) {
	get := storeSets(t, []string{
		"create w hash:ip", "add w 10.0.0.1", "create n hash:net", "create plain hash:ip",
		"create ls list:set", "add ls plain",
	})
	clk := setClock{wall: time.Now(), mono: 1_000_000_000_000}
	src := ir.SetDirs{Dim: 1, Src: 1}
	gen := &compiler.Generation{Family: ir.IPv4, SetWrites: []string{"w", "n"},
		SetConds: []compiler.SetCond{{Family: ir.IPv4, Name: "w", Dirs: src}, {Family: ir.IPv4, Name: "plain", Dirs: src}}}
	ctrs := &setCounterAlloc{written: map[string]bool{"w": true, "n": true}}
	tables, err := buildSetTables(gen.SetConds, get, nil, clk, ctrs)
	if err == nil {
		tables, err = addWriteTables(tables, gen, get, nil, clk, ctrs)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 4 {
		t.Fatalf("%d lookups, want 4", len(tables))
	}
	w, plain, ww, wn := tables[0], tables[1], tables[2], tables[3]
	if w.Kind == dataplane.SetKindDXR || !w.Writable || w.Write || w.Capacity != 65536+dataplane.SetMetaWords+dataplane.SetWriteMetaKeys {
		t.Errorf("w's match: %+v, want a writable hash lookup", w)
	}
	if plain.Kind != dataplane.SetKindDXR || plain.Writable {
		t.Errorf("plain: kind %d writable %v, want DXR", plain.Kind, plain.Writable)
	}
	if !ww.Write || ww.SameAs != 1 {
		t.Errorf("w's write lookup: %+v, want sharing lookup 0's table", ww)
	}
	// n is a hash:net: its table counts its elements per prefix length.
	if nk := dataplane.SetMetaWords + dataplane.SetWriteMetaKeys + dataplane.SetWriteCountKeys(32); !wn.Write || wn.SameAs != 0 || !wn.Writable || len(wn.Hash) != nk || wn.Capacity != 65536+nk {
		t.Errorf("n's write lookup: %+v, want a table of its own with the meta keys", wn)
	}
	ctrs = &setCounterAlloc{written: map[string]bool{"plain": true}}
	_, err = buildSetTables([]compiler.SetCond{{Family: ir.IPv4, Name: "ls", Dirs: src}}, get, nil, clk, ctrs)
	if err == nil || !strings.Contains(err.Error(), "not supported by xfw") {
		t.Errorf("a written set through a list:set: %v, want refused", err)
	}
}

// storeSets runs the ipset commands lines on a store of its own and returns
// a lookup of the sets they made.
func storeSets(t *testing.T, lines []string) func(string) (*ipset.Set, error) {
	t.Helper()
	store := ipset.NewMemStore()
	for _, line := range lines {
		if st := ipset.Run(strings.Fields(line), nil, io.Discard, io.Discard, store); st != 0 {
			t.Fatalf("ipset %s: status %d", line, st)
		}
	}
	sets, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) (*ipset.Set, error) {
		if s := sets.Get(name); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("set %s does not exist", name)
	}
}

// TestWriteUsable checks which sets the SET target writes: hash:ip,
// hash:net, hash:ip,port and hash:net,port without counters.
func TestWriteUsable(t *testing.T) {
	for _, tt := range []struct {
		set ipset.Set
		ok  bool
	}{
		{ipset.Set{Type: ipset.HashIP}, true},
		{ipset.Set{Type: ipset.HashNet}, true},
		{ipset.Set{Type: ipset.HashIPPort}, true},
		{ipset.Set{Type: ipset.HashNetPort}, true},
		{ipset.Set{Type: ipset.HashNetIface}, false},
		{ipset.Set{Type: ipset.BitmapPort}, false},
		{ipset.Set{Type: ipset.ListSet}, false},
		{ipset.Set{Type: ipset.HashIPPort, Options: ipset.Options{Counters: true}}, false},
	} {
		if err := WriteUsable(&tt.set); (err == nil) != tt.ok {
			t.Errorf("%s (counters %v): %v, want usable %v", tt.set.Type, tt.set.Options.Counters, err, tt.ok)
		}
	}
}

// TestWrittenNetCounts checks the counts of elements per prefix length of
// a written net type's table: the control plane's count of each length
// its members have, 0 for the others and for the data plane's.
func TestWrittenNetCounts(t *testing.T) {
	for _, tt := range []struct {
		lines []string
		want  map[int]uint64 // prefix length → count; others 0
	}{
		{[]string{"create n hash:net"}, nil},
		{[]string{"create n hash:net", "add n 10.0.0.0/24", "add n 10.0.1.0/24", "add n 10.1.0.0/16", "add n 10.2.0.1 nomatch"},
			map[int]uint64{24: 2, 16: 1, 32: 1}},
		{[]string{"create n hash:net,port", "add n 10.0.0.0/24,80", "add n 10.0.0.0/24,udp:53"}, map[int]uint64{24: 2}},
	} {
		get := storeSets(t, tt.lines)
		gen := &compiler.Generation{Family: ir.IPv4, SetWrites: []string{"n"}}
		ctrs := &setCounterAlloc{written: map[string]bool{"n": true}}
		tables, err := addWriteTables(nil, gen, get, nil, setClock{wall: time.Now(), mono: 1_000_000_000_000}, ctrs)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, e := range tables[0].Hash {
			if e.Key.Plen != dataplane.SetMetaPlen || e.Key.Port < 0x100 || e.Key.Port >= 0x300 {
				continue // not a count key
			}
			seen++
			l, want := int(e.Key.Port&0xff), uint64(0)
			if e.Key.Port >= 0x200 {
				want = tt.want[l]
			}
			if e.Expires != want {
				t.Errorf("%q: count key %#x: %d, want %d", tt.lines, e.Key.Port, e.Expires, want)
			}
		}
		if seen != dataplane.SetWriteCountKeys(32) {
			t.Errorf("%q: %d count keys, want %d", tt.lines, seen, dataplane.SetWriteCountKeys(32))
		}
	}
}
