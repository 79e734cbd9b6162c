package difftest

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestTranslatedLogLine checks which LOG lines a probe's translation may
// have printed: the same protocol and, for a copy, the same IP length.
func TestTranslatedLogLine(t *testing.T) {
	src, dst := netip.MustParseAddr("10.42.2.1"), netip.MustParseAddr("10.42.2.3")
	udp := nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(nettest.UDP{SrcPort: 20060, DstPort: 443, Payload: make([]byte, 26)})
	sent, err := nettest.ParseIP(udp)
	if err != nil {
		t.Fatal(err)
	}
	copyLine := "nat-seen:IN= OUT=out0 SRC=10.42.2.1 DST=10.42.2.2 LEN=54 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=UDP SPT=20060 DPT=443 LEN=34 "
	for _, tc := range []struct {
		name   string
		line   string
		rel    relation
		frames int
		want   bool
	}{
		{"copy, translated destination", copyLine, relCopy, 1, true},
		{"copy of another length", "IN= OUT=out0 SRC=10.42.2.1 DST=10.42.2.2 LEN=55 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=UDP SPT=20060 DPT=443 LEN=35 ", relCopy, 1, false},
		{"copy of another protocol", "IN= OUT=out0 SRC=10.42.2.1 DST=10.42.2.2 LEN=54 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=TCP SPT=20060 DPT=443 ", relCopy, 1, false},
		{"copy of a probe of two frames", copyLine, relCopy, 2, false},
		{"protocol by number", "IN= OUT=out0 SRC=10.42.2.1 DST=10.42.2.2 LEN=54 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=17 ", relCopy, 1, true},
		{"no IN=", "SRC=10.42.2.1 DST=10.42.2.2 LEN=54 PROTO=UDP ", relCopy, 1, false},
		{"error quoting it", "IN=in0 OUT= SRC=10.42.2.2 DST=10.42.2.1 LEN=82 TOS=0x00 PREC=0xC0 TTL=64 ID=9 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.2.1 DST=10.42.2.2 LEN=54 TOS=0x00 PREC=0x00 TTL=63 ID=7 PROTO=UDP SPT=20060 DPT=443 LEN=34 ] ", relQuote, 1, true},
		{"error quoting another protocol", "IN=in0 OUT= SRC=10.42.2.2 DST=10.42.2.1 LEN=82 TOS=0x00 PREC=0xC0 TTL=64 ID=9 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.2.1 DST=10.42.2.2 LEN=54 TOS=0x00 PREC=0x00 TTL=63 ID=7 PROTO=TCP SPT=20060 DPT=443 ] ", relQuote, 1, false},
		{"answer", "IN=out0 OUT= SRC=10.42.2.2 DST=10.42.2.1 LEN=40 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=UDP SPT=443 DPT=20060 LEN=20 ", relAnswer, 1, true},
	} {
		if got := translatedLogLine(tc.line, tc.rel, sent, tc.frames); got != tc.want {
			t.Errorf("%s: translatedLogLine = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMaskRandomLogPorts checks that a LOG line's ports a random
// translation picked are masked, and no others.
func TestMaskRandomLogPorts(t *testing.T) {
	src, dst := netip.MustParseAddr("10.42.1.2"), netip.MustParseAddr("10.42.2.3")
	tcp := nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(nettest.TCP{SrcPort: 20093, DstPort: 28, Flags: nettest.TCPSyn})
	sent, err := nettest.ParseIP(tcp)
	if err != nil {
		t.Fatal(err)
	}
	rp := &randomPorts{ranges: [][2]uint16{{22, 27}}}
	const head = "nat-seen:IN=in0 OUT=out0 SRC=10.42.1.2 DST=10.42.2.2 LEN=40 TOS=0x00 PREC=0x00 TTL=63 ID=37064 DF PROTO=TCP "
	for _, tc := range []struct {
		name, line string
		rel        relation
		want       string
	}{
		{"picked destination port", head + "SPT=20093 DPT=23 WINDOW=512 RES=0x00 SYN URGP=0 ", relCopy,
			head + "SPT=20093 DPT=? WINDOW=512 RES=0x00 SYN URGP=0 "},
		{"port outside the ranges", head + "SPT=20093 DPT=80 WINDOW=512 RES=0x00 SYN URGP=0 ", relCopy,
			head + "SPT=20093 DPT=80 WINDOW=512 RES=0x00 SYN URGP=0 "},
		{"the probe's own ports", head + "SPT=20093 DPT=28 WINDOW=512 ", relCopy, head + "SPT=20093 DPT=28 WINDOW=512 "},
		{"an answer keeps the probe's ports", head + "SPT=25 DPT=20093 WINDOW=512 ", relAnswer, head + "SPT=? DPT=20093 WINDOW=512 "},
		{"a quoted packet's ports stay", "IN=in0 OUT= SRC=1.2.3.4 DST=10.42.1.2 LEN=68 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.2 DST=10.42.2.2 LEN=40 PROTO=TCP SPT=20093 DPT=23 ] ", relCopy,
			"IN=in0 OUT= SRC=1.2.3.4 DST=10.42.1.2 LEN=68 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.2 DST=10.42.2.2 LEN=40 PROTO=TCP SPT=20093 DPT=23 ] "},
	} {
		if got := maskRandomLogPorts(tc.line, tc.rel, sent, rp); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestNATOutputMayReachFw checks which nat tables may send fw's own
// packets to fw itself from nat OUTPUT.
func TestNATOutputMayReachFw(t *testing.T) {
	const head = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	const tail = "COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j DNAT --to-destination 10.42.1.1\nCOMMIT\n"
	p4, p6 := NewPlan(ir.IPv4, 42), NewPlan(ir.IPv6, 42)
	for _, tc := range []struct {
		name, rules string
		plan        Plan
		want        bool
	}{
		{"REDIRECT", "-A OUTPUT -p tcp -j REDIRECT --to-ports 80\n", p4, true},
		{"DNAT to fw", "-A OUTPUT -p tcp -j DNAT --to-destination 10.42.1.1:80\n", p4, true},
		{"DNAT to a range holding fw", "-A OUTPUT -p tcp -j DNAT --to-destination 10.42.2.0-10.42.2.2\n", p4, true},
		{"DNAT to sink", "-A OUTPUT -p tcp -j DNAT --to-destination 10.42.2.2-10.42.2.4:80-90\n", p4, false},
		{"ports only", "-A OUTPUT -p tcp -j DNAT --to-destination :8080\n", p4, false},
		{"PREROUTING's", "-A PREROUTING -p tcp -j REDIRECT\n-A PREROUTING -p tcp -j DNAT --to-destination 10.42.1.1\n", p4, false},
		{"IPv6 DNAT to fw with ports", "-A OUTPUT -p tcp -j DNAT --to-destination [fd00:42:1::1]:80\n", p6, true},
		{"IPv6 DNAT to sink", "-A OUTPUT -p tcp -j DNAT --to-destination fd00:42:2::2\n", p6, false},
		{"the filter table's text only", "", p4, false},
	} {
		if got := natOutputMayReachFw(head+tc.rules+tail, tc.plan); got != tc.want {
			t.Errorf("%s: natOutputMayReachFw = %v, want %v", tc.name, got, tc.want)
		}
	}
}
