package dataplane

import (
	"encoding/binary"
	"net/netip"
	"os"
	"sort"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/conntrack"
)

// ctKeyOf builds the key and ORIG_B bit of a connection from its original
// tuple, ordering the endpoints as the data plane does.
func ctKeyOf(src, dst netip.Addr, sport, dport uint16, proto uint8) (bpfCTKey, uint32) {
	half := func(a netip.Addr) (uint64, uint64) {
		if a.Is4() {
			b := a.As4()
			return 0, uint64(binary.BigEndian.Uint32(b[:]))
		}
		b := a.As16()
		return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	k := bpfCTKey{Proto: proto}
	if src.Is6() {
		k.Fam = 1
	}
	k.AHi, k.ALo = half(src)
	k.BHi, k.BLo = half(dst)
	k.APort, k.BPort = sport, dport
	less := k.BHi < k.AHi || k.BHi == k.AHi && (k.BLo < k.ALo || k.BLo == k.ALo && k.BPort < k.APort)
	if less {
		k.AHi, k.ALo, k.BHi, k.BLo = k.BHi, k.BLo, k.AHi, k.ALo
		k.APort, k.BPort = k.BPort, k.APort
		return k, conntrack.StatusOrigB
	}
	return k, 0
}

// TestCTConn checks the decoding of keys and values.
func TestCTConn(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	k, ob := ctKeyOf(a, b, 40000, 22, 6)
	if ob == 0 || k.ALo != 0x0a000001 {
		t.Fatalf("key %+v orig_b %x", k, ob)
	}
	c := ctConn(k, bpfCTVal{Expires: 1000 + 250*30 + 249, Status: ob | conntrack.StatusSeenReply, TCPState: 3}, 1000, 250)
	if c.Src != a || c.Dst != b || c.SPort != 40000 || c.DPort != 22 || c.Timeout != 30 || c.IPv6 {
		t.Errorf("decoded %+v", c)
	}
	s6, d6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	k, ob = ctKeyOf(s6, d6, 7, 7, 58)
	c = ctConn(k, bpfCTVal{Expires: 5, Status: ob}, 5, 100)
	if ob != 0 || c.Src != s6 || c.Dst != d6 || !c.IPv6 || c.Timeout != 0 {
		t.Errorf("decoded %+v", c)
	}
}

func TestNearestHZ(t *testing.T) {
	for rate, want := range map[float64]uint64{99: 100, 110: 100, 240: 250, 262: 250, 290: 300, 310: 300, 950: 1000, 1040: 1000} {
		if got := nearestHZ(rate); got != want {
			t.Errorf("nearestHZ(%v) = %d, want %d", rate, got, want)
		}
	}
}

// TestCTTablesRoot reads, deletes and flushes connections in maps of the
// tables' shapes and runs the clock program. It needs root (BPF); run it in
// a network namespace of its own (it attaches nothing).
func TestCTTablesRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_BPF): run it as root, as make test does")
	}
	now, err := Jiffies()
	if err != nil {
		t.Fatal(err)
	}
	hz, err := HZ()
	if err != nil {
		t.Fatal(err)
	}
	if now2, err := Jiffies(); err != nil || now2 < now {
		t.Fatalf("jiffies went from %d to %d (%v)", now, now2, err)
	}
	t.Logf("jiffies %d, HZ %d", now, hz)

	newMap := func(typ ebpf.MapType) *ebpf.Map {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: 40, ValueSize: uint32(binary.Size(bpfCTEntry{})), MaxEntries: 64})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tables := NewCTTables(newMap(ebpf.Hash), newMap(ebpf.LRUHash))
	defer tables.Close()
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	put := func(table int, src, dst netip.Addr, sport, dport uint16, proto uint8, v bpfCTVal) {
		k, ob := ctKeyOf(src, dst, sport, dport, proto)
		v.Status |= ob
		if err := tables.maps[table].Put(k, bpfCTEntry{V: v}); err != nil {
			t.Fatal(err)
		}
	}
	sec := func(s uint64) uint64 { return now + s*hz + hz/2 }
	const seen, assured = conntrack.StatusSeenReply | conntrack.StatusConfirmed, conntrack.StatusSeenReply | conntrack.StatusAssured | conntrack.StatusConfirmed
	put(0, lo4, lo4, 49314, 5555, 6, bpfCTVal{Expires: sec(431999), Status: assured, TCPState: 3})
	put(0, lo6, lo6, 57776, 7777, 6, bpfCTVal{Expires: sec(111), Status: assured, TCPState: 7})
	put(1, lo4, lo4, 38117, 5353, 17, bpfCTVal{Expires: sec(29), Status: conntrack.StatusConfirmed})
	put(1, lo4, lo4, 27456, 27456, 1, bpfCTVal{Expires: sec(29), Status: seen, ICMPType: 8})
	put(1, lo6, lo6, 27457, 27457, 58, bpfCTVal{Expires: sec(29), Status: seen, ICMPType: 128})
	put(1, lo4, lo4, 0, 0, 253, bpfCTVal{Expires: sec(599), Status: conntrack.StatusConfirmed})
	put(1, lo4, lo4, 1, 2, 17, bpfCTVal{Expires: now - 1}) // expired
	put(1, lo4, lo4, 3, 4, 17, bpfCTVal{Expires: now})     // expires now

	// The lines conntrack 1.4.7 printed for the same connections of the
	// kernel's table.
	want := []string{
		"icmp     1 29 src=127.0.0.1 dst=127.0.0.1 type=8 code=0 id=27456 src=127.0.0.1 dst=127.0.0.1 type=0 code=0 id=27456 mark=0 use=1\n",
		"icmpv6   58 29 src=::1 dst=::1 type=128 code=0 id=27457 src=::1 dst=::1 type=129 code=0 id=27457 mark=0 use=1\n",
		"tcp      6 111 TIME_WAIT src=::1 dst=::1 sport=57776 dport=7777 src=::1 dst=::1 sport=7777 dport=57776 [ASSURED] mark=0 use=1\n",
		"tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.0.1 sport=49314 dport=5555 src=127.0.0.1 dst=127.0.0.1 sport=5555 dport=49314 [ASSURED] mark=0 use=1\n",
		"udp      17 29 src=127.0.0.1 dst=127.0.0.1 sport=38117 dport=5353 [UNREPLIED] src=127.0.0.1 dst=127.0.0.1 sport=5353 dport=38117 mark=0 use=1\n",
		"unknown  253 599 src=127.0.0.1 dst=127.0.0.1 [UNREPLIED] src=127.0.0.1 dst=127.0.0.1 mark=0 use=1\n",
	}
	entries, err := tables.Entries(now, hz)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, conntrack.Format(e.Conn, conntrack.FormatOptions{}))
	}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d:\n%q", len(got), len(want), got)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}

	// Delete the UDP connection: once, then it is gone.
	for _, e := range entries {
		if e.Conn.Proto != 17 {
			continue
		}
		if ok, err := tables.Delete(e); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if ok, err := tables.Delete(e); ok || err != nil {
			t.Fatalf("second delete: %v %v", ok, err)
		}
	}
	if entries, _ = tables.Entries(now, hz); len(entries) != len(want)-1 {
		t.Errorf("%d entries after a delete, want %d", len(entries), len(want)-1)
	}
	if err := tables.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, m := range tables.maps {
		var k bpfCTKey
		var v bpfCTEntry
		if it := m.Iterate(); it.Next(&k, &v) {
			t.Errorf("table %d not empty after Flush", i)
		}
	}
}

// TestCTTablesMovingRoot checks what user space sees of a connection a
// promotion is moving (bpf/ct_track.h xfw_ct_promote): in both tables,
// the xfw_ct_new entry marked moved or not yet; listed once, with
// xfw_ct's value, and deleted from both tables by one Delete.
func TestCTTablesMovingRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_BPF): run it as root, as make test does")
	}
	const now, hz = 1_000_000, 250
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, tc := range []struct {
		name string
		head uint64 // the xfw_ct_new entry's lock word
	}{
		{"copied, not yet marked", 1},
		{"marked moved", ctLockMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newMap := func(typ ebpf.MapType) *ebpf.Map {
				m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: 40, ValueSize: uint32(binary.Size(bpfCTEntry{})), MaxEntries: 8})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			tables := NewCTTables(newMap(ebpf.Hash), newMap(ebpf.LRUHash))
			defer tables.Close()
			k, ob := ctKeyOf(a, b, 40000, 80, 6)
			status := ob | conntrack.StatusSeenReply | conntrack.StatusAssured | conntrack.StatusConfirmed
			// The old entry: 300 s left; the copy (updated since): 432000.
			old := bpfCTEntry{Head: tc.head, V: bpfCTVal{Expires: now + 300*hz, Status: status, TCPState: 3}}
			cp := bpfCTEntry{V: bpfCTVal{Expires: now + 432000*hz, Status: status, TCPState: 3}}
			if err := tables.maps[ctNew].Put(k, old); err != nil {
				t.Fatal(err)
			}
			if err := tables.maps[ctMain].Put(k, cp); err != nil {
				t.Fatal(err)
			}
			entries, err := tables.Entries(now, hz)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Fatalf("listed %d entries, want 1: %+v", len(entries), entries)
			}
			if got := entries[0].Conn.Timeout; got != 432000 {
				t.Errorf("listed timeout %d, want xfw_ct's 432000", got)
			}
			if ok, err := tables.Delete(entries[0]); !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			for ti, m := range tables.maps {
				var v bpfCTEntry
				if err := m.Lookup(k, &v); err == nil {
					t.Errorf("table %d still holds the connection after Delete", ti)
				}
			}
			if ok, err := tables.Delete(entries[0]); ok || err != nil {
				t.Fatalf("second delete: %v %v", ok, err)
			}
		})
	}
}
