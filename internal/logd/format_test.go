package logd

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Frames of the edge cases (what the kernel comparison cannot produce).
const (
	// ethV4 is an Ethernet header 02:00:00:00:00:01 ← 02:00:00:00:00:02.
	ethV4 = "020000000001" + "020000000002" + "0800"
	// udp4 is 10.0.0.2:40000 → 10.0.0.1:5001, 1 byte of data.
	udp4 = "45000025000040004011" + "0000" + "0a000002" + "0a000001" +
		"9c401389000900000061"
	// udp4Line is the part of its line from SRC on.
	udp4Line = "SRC=10.0.0.2 DST=10.0.0.1 LEN=37 TOS=0x00 PREC=0x00 TTL=64 ID=0 DF PROTO=UDP SPT=40000 DPT=5001 LEN=9 "
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFormatEdges covers what the kernel comparison cannot: devices and
// snapshots the test machine cannot produce.
func TestFormatEdges(t *testing.T) {
	names := func(i uint32) string {
		return map[uint32]string{2: "eth0", 3: "eth0.7", 4: "wg0", 5: "br0", 6: "in0", 7: "out0"}[i]
	}
	// A hop-by-hop header of 256 bytes pushes the UDP header past the
	// snapshot: 40 + 256 + 8 bytes of IPv6, of which 256 - 14 are known.
	bigHBH := "6000000001080040" + strings.Repeat("fd000000000000000000000000000002", 1) +
		strings.Repeat("fd000000000000000000000000000001", 1) +
		"111f" + "01fc" + strings.Repeat("00", 252) + "9c40138900080000"
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{
			name: "VLAN tag removed from the MAC header",
			ev: Event{InIfindex: 3, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 18,
				Frame: mustHex(t, "020000000001"+"020000000002"+"81000007"+"0800"+udp4)},
			want: "IN=eth0.7 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "VLAN MAC decoded",
			ev: Event{InIfindex: 3, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 18,
				Flags: ir.LogFlagMACDecode,
				Frame: mustHex(t, "020000000001"+"020000000002"+"81000007"+"0800"+udp4)},
			want: "IN=eth0.7 OUT= MACSRC=02:00:00:00:00:02 MACDST=02:00:00:00:00:01 MACPROTO=0800 " + udp4Line,
		},
		{
			name: "PPPoE header kept in the MAC header",
			ev: Event{InIfindex: 5, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 22,
				Frame: mustHex(t, "020000000001"+"020000000002"+"8864"+"11001234002b"+"0021"+udp4)},
			want: "IN=br0 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:88:64 " + udp4Line,
		},
		{
			name: "PPPoE MAC decoded",
			ev: Event{InIfindex: 5, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 22,
				Flags: ir.LogFlagMACDecode,
				Frame: mustHex(t, "020000000001"+"020000000002"+"8864"+"11001234002b"+"0021"+udp4)},
			want: "IN=br0 OUT= MACSRC=02:00:00:00:00:02 MACDST=02:00:00:00:00:01 MACPROTO=8864 " + udp4Line,
		},
		{
			name: "device without link-layer header",
			ev:   Event{InIfindex: 4, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, Frame: mustHex(t, udp4)},
			want: "IN=wg0 OUT= MAC= " + udp4Line,
		},
		{
			name: "unknown interface",
			ev:   Event{InIfindex: 9, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "PREROUTING of a forwarded packet: no output device, TTL as received",
			ev: Event{InIfindex: 2, OutIfindex: 4, Family: ir.IPv4, Chain: ir.ChainForward, HasMAC: true, L3Off: 14,
				Flags: ir.LogViewPrerouting, Frame: mustHex(t, ethV4+udp4)},
			want: "IN=eth0 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "POSTROUTING of a forwarded packet: no input device, no MAC, TTL decremented",
			ev: Event{InIfindex: 2, OutIfindex: 4, Family: ir.IPv4, Chain: ir.ChainForward, HasMAC: true, L3Off: 14,
				Flags: ir.LogViewPostrouting, Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT=wg0 " + strings.Replace(udp4Line, "TTL=64", "TTL=63", 1),
		},
		{
			name: "prefix and level",
			ev: Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 14, Prefix: "my prefix: ",
				Level: 1, Frame: mustHex(t, ethV4+udp4)},
			want: "my prefix: IN= OUT=eth0 " + udp4Line,
		},
		{
			name: "frame not copied",
			ev:   Event{InIfindex: 2, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 14, FrameLen: 51},
			want: "IN=eth0 OUT= MAC= TRUNCATED",
		},
		{
			name: "GSO packet with a total length of 0",
			ev: Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 14, FrameLen: 14 + 70000,
				Frame: mustHex(t, ethV4+"45000000000040004011"+"0000"+"0a000002"+"0a000001"+"9c401389000900000061")},
			want: "IN= OUT=eth0 SRC=10.0.0.2 DST=10.0.0.1 LEN=70000 TOS=0x00 PREC=0x00 TTL=64 ID=0 DF PROTO=UDP SPT=40000 DPT=5001 LEN=9 ",
		},
		{
			name: "header past the snapshot",
			ev: Event{InIfindex: 2, Family: ir.IPv6, Chain: ir.ChainInput, HasMAC: true, L3Off: 14,
				FrameLen: 14 + len(bigHBH)/2, Frame: mustHex(t, ("020000000001" + "020000000002" + "86dd" + bigHBH)[:2*snapLen])},
			want: "IN=eth0 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:86:dd " +
				"SRC=fd00:0000:0000:0000:0000:0000:0000:0002 DST=fd00:0000:0000:0000:0000:0000:0000:0001 " +
				"LEN=304 TC=0 HOPLIMIT=64 FLOWLBL=0 PROTO=UDP INCOMPLETE [8 bytes] ",
		},
		{
			name: "mark at the rule ends the line",
			ev: Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 14, Mark: 0x2a,
				Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT=eth0 " + udp4Line + "MARK=0x2a ",
		},
		{
			name: "--log-uid of the host's packet, then its mark",
			ev: Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 14, Mark: 1,
				Flags: ir.LogFlagUID, HasUID: true, UID: 4321, GID: 4322, Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT=eth0 " + udp4Line + "UID=4321 GID=4322 MARK=0x1 ",
		},
		{
			name: "ids without --log-uid are not printed",
			ev: Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 14,
				HasUID: true, UID: 4321, GID: 4322, Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT=eth0 " + udp4Line,
		},
		{
			name: "no mark after a transport header cut short (the kernel returns)",
			ev: Event{InIfindex: 2, Family: ir.IPv6, Chain: ir.ChainInput, HasMAC: true, L3Off: 14, Mark: 7,
				FrameLen: 14 + len(bigHBH)/2, Frame: mustHex(t, ("020000000001" + "020000000002" + "86dd" + bigHBH)[:2*snapLen])},
			want: "IN=eth0 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:86:dd " +
				"SRC=fd00:0000:0000:0000:0000:0000:0000:0002 DST=fd00:0000:0000:0000:0000:0000:0000:0001 " +
				"LEN=304 TC=0 HOPLIMIT=64 FLOWLBL=0 PROTO=UDP INCOMPLETE [8 bytes] ",
		},
		{
			name: "FORWARD decrements the TTL",
			ev: Event{InIfindex: 2, OutIfindex: 4, Family: ir.IPv4, Chain: ir.ChainForward, HasMAC: true, L3Off: 14,
				Frame: mustHex(t, ethV4+udp4)},
			want: "IN=eth0 OUT=wg0 MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + strings.Replace(udp4Line, "TTL=64", "TTL=63", 1),
		},
		// The kernel's lines of bridged frames (br_netfilter): its ports
		// after OUT=, the TTL as received.
		{
			name: "bridged, FORWARD",
			ev: Event{InIfindex: 5, OutIfindex: 5, PhysIn: 6, PhysOut: 7, Family: ir.IPv4, Chain: ir.ChainForward,
				HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN=br0 OUT=br0 PHYSIN=in0 PHYSOUT=out0 MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "bridged, PREROUTING: no output port yet",
			ev: Event{InIfindex: 5, OutIfindex: 5, PhysIn: 6, PhysOut: 7, Family: ir.IPv4, Chain: ir.ChainForward,
				Flags: ir.LogViewPrerouting, HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN=br0 OUT= PHYSIN=in0 MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "bridged, POSTROUTING",
			ev: Event{InIfindex: 5, OutIfindex: 5, PhysIn: 6, PhysOut: 7, Family: ir.IPv4, Chain: ir.ChainForward,
				Flags: ir.LogViewPostrouting, HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN= OUT=br0 PHYSIN=in0 PHYSOUT=out0 " + udp4Line,
		},
		{
			name: "passed up by a bridge, INPUT",
			ev: Event{InIfindex: 5, PhysIn: 6, Family: ir.IPv4, Chain: ir.ChainInput,
				HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN=br0 OUT= PHYSIN=in0 MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line,
		},
		{
			name: "passed up by a bridge, routed",
			ev: Event{InIfindex: 5, OutIfindex: 4, PhysIn: 6, Family: ir.IPv4, Chain: ir.ChainForward,
				HasMAC: true, L3Off: 14, Frame: mustHex(t, ethV4+udp4)},
			want: "IN=br0 OUT=wg0 PHYSIN=in0 MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " +
				strings.Replace(udp4Line, "TTL=64", "TTL=63", 1),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ev.FrameLen == 0 {
				tc.ev.FrameLen = len(tc.ev.Frame)
			}
			if got := Format(tc.ev, names); got != tc.want {
				t.Errorf("Format\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

func TestFormatNilIfName(t *testing.T) {
	ev := Event{InIfindex: 2, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 14}
	ev.Frame = mustHex(t, ethV4+udp4)
	ev.FrameLen = len(ev.Frame)
	want := "IN= OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " + udp4Line
	if got := Format(ev, nil); got != want {
		t.Errorf("Format\n got: %q\nwant: %q", got, want)
	}
}

// TestLineLimit checks the kernel's line buffer: an addition that does not
// fit is cut at the limit and later ones are dropped.
func TestLineLimit(t *testing.T) {
	tests := []struct {
		name string
		adds []string
		want string
	}{
		{name: "fits", adds: []string{strings.Repeat("a", lineMax-1), "b"}, want: strings.Repeat("a", lineMax-1) + "b"},
		{name: "cut", adds: []string{strings.Repeat("a", lineMax-1), "bc", "d"}, want: strings.Repeat("a", lineMax-1) + "b"},
		{name: "full", adds: []string{strings.Repeat("a", lineMax), "b"}, want: strings.Repeat("a", lineMax)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l line
			for _, s := range tc.adds {
				l.str(s)
			}
			if got := string(l.b); got != tc.want {
				t.Errorf("got %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// testHost answers the kernel's lookups for TestReceivedOptions.
type testHost struct {
	spec  netip.Addr
	local netip.Addr
	at    time.Time
}

func (h testHost) specDst(netip.Addr) (netip.Addr, bool) { return h.spec, h.spec.IsValid() }
func (h testHost) isLocal(a netip.Addr) bool             { return a == h.local }
func (h testHost) now() time.Time                        { return h.at }

func TestReceivedOptions(t *testing.T) {
	// An IPv4 header 10.0.0.2 → 10.0.0.1 (only the addresses matter).
	ih := mustHex(t, "4600002c000000004011000"+"0"+"0a000002"+"0a000001")
	bcast := mustHex(t, "4600002c000000004011000"+"0"+"0a000002"+"ffffffff")
	fwdAddr := testHost{spec: netip.MustParseAddr("10.0.0.254"), at: atMs(0x01020304)}
	tests := []struct {
		name  string
		opts  string
		ih    []byte
		input bool
		host  host
		want  string
	}{
		{name: "RR on INPUT", opts: "07070400000000" + "01", ih: ih, input: true, host: offlineHost{}, want: "0707080a00000101"},
		{name: "RR on FORWARD", opts: "0707040000000001", ih: ih, host: fwdAddr, want: "0707080a0000fe01"},
		{name: "RR on FORWARD unknown", opts: "0707040000000001", ih: ih, host: offlineHost{}, want: "0707080000000001"},
		{name: "RR to broadcast asks the host", opts: "0707040000000001", ih: bcast, input: true, host: fwdAddr, want: "0707080a0000fe01"},
		{name: "RR full", opts: "0707080102030400", ih: ih, input: true, host: offlineHost{}, want: "0707080102030400"},
		{name: "RR malformed pointer", opts: "0707030000000000", ih: ih, input: true, host: offlineHost{}, want: "0707030000000000"},
		{name: "junk after end", opts: "0100aabb", ih: ih, input: true, host: offlineHost{}, want: "01000000"},
		{name: "TS only", opts: "440c0500" + "0000000000000000", ih: ih, host: fwdAddr, want: "440c0900" + "0102030400000000"},
		{name: "TS and address", opts: "440c0501" + "0000000000000000", ih: ih, host: fwdAddr, want: "440c0d01" + "0a0000fe01020304"},
		{name: "TS and address unknown", opts: "440c0501" + "0000000000000000", ih: ih, host: offlineHost{}, want: "440c0d01" + "0000000000000000"},
		{name: "TS prespecified here", opts: "440c0503" + "0a00000100000000", ih: ih, input: true, host: fwdAddr, want: "440c0d03" + "0a00000101020304"},
		{name: "TS prespecified elsewhere", opts: "440c0503" + "c000020100000000", ih: ih, input: true, host: fwdAddr, want: "440c0503" + "c000020100000000"},
		{name: "TS overflow", opts: "4408092000000001", ih: ih, host: fwdAddr, want: "4408093000000001"},
		{name: "TS overflow saturated", opts: "440809f000000001", ih: ih, host: fwdAddr, want: "440809f000000001"},
		{name: "NOP and router alert kept", opts: "0194040000", ih: ih, input: true, host: offlineHost{}, want: "0194040000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := mustHex(t, tc.opts)
			got := hex.EncodeToString(receivedOptions(in, tc.ih, tc.input, tc.host))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if hex.EncodeToString(in) != tc.opts {
				t.Errorf("the input was modified")
			}
		})
	}
}

func TestMsSinceMidnight(t *testing.T) {
	tests := []struct {
		t    time.Time
		want uint32
	}{
		{time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(2024, 5, 6, 1, 2, 3, 4_999_999, time.UTC), ((1*60+2)*60+3)*1000 + 4},
		{time.Date(2024, 5, 6, 2, 0, 0, 0, time.FixedZone("X", 3600)), 3600 * 1000},
	}
	for _, tc := range tests {
		if got := msSinceMidnight(tc.t); got != tc.want {
			t.Errorf("msSinceMidnight(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
}
