package difftest

import (
	"net/netip"
	"testing"

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
