package dataplane

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The files as Linux 6.18 writes them (two sockets joined 239.1.1.2 on
// b0, one with source 10.0.1.2 only, the other blocking 10.0.1.3, and
// ff05::98).
const (
	igmpSample = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n" +
		"1\tlo        :     1      V3\n" +
		"\t\t\t\t010000E0     1 0:00000000\t\t0\n" +
		"2\tb0        :     2      V3\n" +
		"\t\t\t\t020101EF     2 0:00000000\t\t0\n" +
		"\t\t\t\t010000E0     1 0:00000000\t\t0\n" +
		"3\tc0        :     0      V3\n"
	igmp6Sample = "1    lo              ff020000000000000000000000000001     1 0000000C 0\n" +
		"2    b0              ff0200000000000000000001ffdbdf50     1 00000004 0\n" +
		"2    b0              ff050000000000000000000000000098     1 00000004 0\n"
)

func TestParseIGMP(t *testing.T) {
	got, users, err := parseIGMP(igmpSample)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]uint32{1: {0xe0000001}, 2: {0xef010102, 0xe0000001}, 3: {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	wantUsers := map[mcDevGroup]uint64{{1, 0xe0000001}: 1, {2, 0xef010102}: 2, {2, 0xe0000001}: 1}
	if !reflect.DeepEqual(users, wantUsers) {
		t.Errorf("users %v, want %v", users, wantUsers)
	}
	for _, bad := range []string{"head\nx\tlo : 1 V3\n", "head\n\t\t\t\t010000E0 1 0:0 0\n", "head\n1\tlo : 1 V3\n\t\t\t\tzz 1\n", "head\n1\tlo : 1 V3\n\t\t\t\t010000E0 x 0:0 0\n"} {
		if _, _, err := parseIGMP(bad); err == nil {
			t.Errorf("parseIGMP(%q): no error", bad)
		}
	}
}

func TestParseIGMP6(t *testing.T) {
	got, err := parseIGMP6(igmp6Sample)
	if err != nil {
		t.Fatal(err)
	}
	a := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	want := map[int][][16]byte{1: {a("ff02::1")}, 2: {a("ff02::1:ffdb:df50"), a("ff05::98")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	for _, bad := range []string{"1 lo\n", "x lo ff020000000000000000000000000001 1 0 0\n", "1 lo ff02 1 0 0\n"} {
		if _, err := parseIGMP6(bad); err == nil {
			t.Errorf("parseIGMP6(%q): no error", bad)
		}
	}
}

func TestMcMirrorable(t *testing.T) {
	attrs := func(idx, master, parent int) netlink.LinkAttrs {
		return netlink.LinkAttrs{Index: idx, MasterIndex: master, ParentIndex: parent}
	}
	links := []netlink.Link{
		&netlink.Device{LinkAttrs: attrs(1, 0, 0)}, // lo
		&netlink.Veth{LinkAttrs: attrs(2, 0, 3)},   // a veth, its peer's index as parent
		&netlink.Veth{LinkAttrs: attrs(3, 0, 2)},
		&netlink.Bridge{LinkAttrs: attrs(4, 0, 0)},           // a bridge
		&netlink.Veth{LinkAttrs: attrs(5, 4, 0)},             // its port
		&netlink.Device{LinkAttrs: attrs(6, 0, 0)},           // under a macvlan
		&netlink.Macvlan{LinkAttrs: attrs(7, 0, 6)},          // the macvlan
		&netlink.Vlan{LinkAttrs: attrs(8, 0, 2), VlanId: 10}, // a VLAN of 2
	}
	got := mcMirrorable(links)
	want := map[int]bool{2: true, 3: true, 7: true, 8: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestGroupNumbersKeptAndPruned: an IPv6 group keeps the number its
// local6 entry holds, new groups take the smallest unused ones, and the
// prune forgets the group entries and keys no longer wanted, never the
// local table's routes or the interface facts.
func TestGroupNumbersKeptAndPruned(t *testing.T) {
	local6, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LPMTrie, KeySize: 20, ValueSize: 12, MaxEntries: 64, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		t.Skipf("create an LPM trie (root needed): %v", err)
	}
	defer local6.Close()
	ifinfo, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer ifinfo.Close()
	a := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	route := lpmKey6{Prefixlen: 8, Addr: a("ff00::")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(local6.Put(route, localVal{Type: unix.RTN_MULTICAST, Ifindex: 2}))
	must(local6.Put(lpmKey6{Prefixlen: 128, Addr: a("ff05::1")}, localVal{Type: unix.RTN_MULTICAST, Group: 2}))
	must(local6.Put(lpmKey6{Prefixlen: 128, Addr: a("ff05::9")}, localVal{Type: unix.RTN_MULTICAST, Group: 7}))
	nums, err := group6Numbers(local6, map[[16]byte]bool{a("ff05::1"): true, a("ff05::2"): true, a("ff05::3"): true})
	must(err)
	want := map[[16]byte]uint32{a("ff05::1"): 2, a("ff05::2"): 1, a("ff05::3"): 3}
	if !reflect.DeepEqual(nums, want) {
		t.Errorf("numbers %v, want %v", nums, want)
	}
	iface := uint64(2)
	must(ifinfo.Put(iface, bpfIfInfo{Ifindex: 2}))
	must(ifinfo.Put(mcEntry(mcKeyMirrored6, 2), bpfIfInfo{}))
	must(ifinfo.Put(mcEntry(mcKeyGroup6+7, 2), bpfIfInfo{}))
	keep := map[uint64]bool{mcEntry(mcKeyMirrored6, 2): true}
	keep6 := map[lpmKey6]bool{{Prefixlen: 128, Addr: a("ff05::1")}: true}
	must(pruneGroups(ifinfo, local6, keep, keep6))
	var v localVal
	if local6.Lookup(route, &v) != nil {
		t.Error("the prune removed the local table's route")
	}
	// An LPM lookup: the group's own entry, or the route covering it.
	if local6.Lookup(lpmKey6{Prefixlen: 128, Addr: a("ff05::9")}, &v) == nil && v.Group != 0 {
		t.Error("a group no longer joined kept its entry")
	}
	if local6.Lookup(lpmKey6{Prefixlen: 128, Addr: a("ff05::1")}, &v) != nil || v.Group != 2 {
		t.Errorf("a group still joined lost its entry (%+v)", v)
	}
	var f bpfIfInfo
	if ifinfo.Lookup(iface, &f) != nil || ifinfo.Lookup(mcEntry(mcKeyMirrored6, 2), &f) != nil {
		t.Error("the prune removed an interface's facts or a kept group key")
	}
	if ifinfo.Lookup(mcEntry(mcKeyGroup6+7, 2), &f) == nil {
		t.Error("a group key no longer wanted was kept")
	}
	// The refills of the interfaces (a prune sparing the group keys, here
	// with no interface left) and of the local table keep the group keys
	// and entries.
	if _, err := pruneMapFunc(ifinfo, isGroupKey); err != nil {
		t.Fatal(err)
	}
	if ifinfo.Lookup(iface, &f) == nil {
		t.Error("the interfaces' prune kept a removed interface's facts")
	}
	if ifinfo.Lookup(mcEntry(mcKeyMirrored6, 2), &f) != nil {
		t.Error("the interfaces' prune removed a group key")
	}
	k6 := map[lpmKey6]bool{}
	must(keepGroupEntries(local6, k6))
	if !reflect.DeepEqual(k6, keep6) {
		t.Errorf("kept %v, want %v", k6, keep6)
	}
}
