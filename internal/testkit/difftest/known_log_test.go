package difftest

import "testing"

// TestIsLogOfReply checks that LOG lines of a reply (an attributed outer
// header) are told from LOG lines of a probe, whatever the log prefix
// holds: realistic prefixes such as "[UFW BLOCK] " have brackets.
func TestIsLogOfReply(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"LOG: [UFW BLOCK] IN= OUT=lo SRC=fd00:0042:0001:0000:0000:0000:0000:0001 DST=fd00:0042:0001:0000:0000:0000:0000:0001 LEN=128 TC=0 HOPLIMIT=64 FLOWLBL=? PROTO=ICMPv6 TYPE=1 CODE=6 [SRC=fd00:0042:0001:0000:0000:0000:0000:0001 DST=fd00:0042:0002:0000:0000:0000:0000:0002 LEN=80 TC=0 HOPLIMIT=127 FLOWLBL=14002 PROTO=TCP SPT=64190 DPT=27294 WINDOW=512 RES=0x00 URGP=0 ] ", true},
		{"LOG: [UFW BLOCK] IN=lo OUT= MAC=00:00:00:00:00:00:00:00:00:00:00:00:08:00 SRC=10.42.1.1 DST=10.42.1.1 LEN=56 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=13 [SRC=10.42.1.1 DST=198.51.100.23 LEN=28 TOS=0x00 PREC=0x00 TTL=127 ID=12134 PROTO=UDP SPT=52 DPT=60229 LEN=8 ] ", true},
		{"LOG: drop: IN=in0 OUT= SRC=10.42.1.2 DST=10.42.1.1 LEN=56 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.1 DST=10.42.1.2 LEN=28 TOS=0x00 PREC=0x00 TTL=64 ID=7 PROTO=UDP SPT=1 DPT=2 LEN=8 ] ", true},
		// The probe itself: attributed ID, and a quoted packet whose
		// "ID=?" must not count.
		{"LOG: [UFW BLOCK] IN= OUT=in0 SRC=10.42.1.1 DST=198.51.100.23 LEN=28 TOS=0x00 PREC=0x00 TTL=127 ID=12134 PROTO=UDP SPT=52 DPT=60229 LEN=8 ", false},
		{"LOG: [x] IN=in0 OUT= SRC=10.42.1.2 DST=10.42.1.1 LEN=56 TOS=0x00 PREC=0x00 TTL=64 ID=5 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.1 DST=10.42.1.2 LEN=28 TOS=0x00 PREC=0x00 TTL=64 ID=? PROTO=UDP SPT=1 DPT=2 LEN=8 ] ", false},
	}
	for _, tt := range tests {
		if got := isLogOfReply(tt.line); got != tt.want {
			t.Errorf("isLogOfReply(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
