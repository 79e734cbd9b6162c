package dataplane

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
)

// The files as Linux 6.18 writes them (a socket joined 239.1.1.2 and
// ff05::98 on b0).
const (
	igmpSample = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n" +
		"1\tlo        :     1      V3\n" +
		"\t\t\t\t010000E0     1 0:00000000\t\t0\n" +
		"2\tb0        :     2      V3\n" +
		"\t\t\t\t020101EF     1 0:00000000\t\t0\n" +
		"\t\t\t\t010000E0     1 0:00000000\t\t0\n" +
		"3\tc0        :     0      V3\n"
	igmp6Sample = "1    lo              ff020000000000000000000000000001     1 0000000C 0\n" +
		"2    b0              ff0200000000000000000001ffdbdf50     1 00000004 0\n" +
		"2    b0              ff050000000000000000000000000098     1 00000004 0\n"
)

func TestParseIGMP(t *testing.T) {
	got, err := parseIGMP(igmpSample)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]uint32{1: {0xe0000001}, 2: {0xef010102, 0xe0000001}, 3: {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	for _, bad := range []string{"head\nx\tlo : 1 V3\n", "head\n\t\t\t\t010000E0 1 0:0 0\n", "head\n1\tlo : 1 V3\n\t\t\t\tzz 1\n"} {
		if _, err := parseIGMP(bad); err == nil {
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
