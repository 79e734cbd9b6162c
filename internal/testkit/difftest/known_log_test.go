package difftest

import (
	"encoding/hex"
	"strings"
	"testing"
)

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

// TestKnownOptionReplyLogs checks that xfw's LOG line about its reply to a
// packet fw sent with IPv4 options is taken for the kernel's when they
// differ in the options only (the lines of conntrack seed 4, about a
// packet from gen before xfw echoed options: the kernel echoes a timestamp
// option and quotes it with its overflow counted), and
// only for such a packet: xfw's replies to packets from gen and sink echo
// options as the kernel's; a line that differs otherwise stays
// unexplained.
func TestKnownOptionReplyLogs(t *testing.T) {
	const kernel = "LOG: [UFW BLOCK] IN= OUT=in0 SRC=10.71.2.1 DST=198.51.100.188 LEN=104 TOS=0x00 PREC=0xC0 TTL=64 ID=? OPT (440C0D100000000100000002) PROTO=ICMP TYPE=3 CODE=3 [SRC=198.51.100.188 DST=10.71.2.1 LEN=64 TOS=0x00 PREC=0x00 TTL=64 ID=11744 DF OPT (440C0D100000000100000002) PROTO=TCP SPT=39778 DPT=28699 WINDOW=512 RES=0x00 CWR ECE URG ACK PSH URGP=0 ] "
	const xfw = "LOG: [UFW BLOCK] IN= OUT=in0 SRC=10.71.2.1 DST=198.51.100.188 LEN=92 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=3 [SRC=198.51.100.188 DST=10.71.2.1 LEN=64 TOS=0x00 PREC=0x00 TTL=64 ID=11744 DF OPT (440C0D000000000100000002) PROTO=TCP SPT=39778 DPT=28699 WINDOW=512 RES=0x00 CWR ECE URG ACK PSH URGP=0 ] "
	const optioned = "027874470101027874470102080048000040000040004006af71c63364bc0a470201440c0d0000000001000000029b62701b000000000000000050f8020003bf00006162636465666768696a6b6c"
	const ethHex = 2 * 14 // fw's own packets are IP packets
	withOptions := Probe{From: FromFw, Frames: [][]byte{hexFrame(t, optioned[ethHex:])}}
	fromGen := Probe{From: FromGen, Frames: [][]byte{hexFrame(t, optioned)}}
	without := Probe{From: FromGen, Frames: [][]byte{hexFrame(t,
		"02787447010102787447010208004500003200000000400664360a4701020a470101138901bb00000000000000005048020086be00006162636465666768696a")}}
	tests := []struct {
		name    string
		p       Probe
		x       string
		wantOut int
	}{
		{"options", withOptions, xfw, 1},
		{"options, from gen (echoed)", fromGen, xfw, 0},
		{"no options in the probe", without, xfw, 0},
		{"another code", withOptions, strings.Replace(xfw, "CODE=3 ", "CODE=10 ", 1), 0},
	}
	for _, tt := range tests {
		rest, pairs := pairOptionLogs(tt.p, []string{kernel}, []string{tt.x})
		if pairs != tt.wantOut || len(rest) != 1-tt.wantOut {
			t.Errorf("%s: pairs %d, rest %q; want %d pair(s)", tt.name, pairs, rest, tt.wantOut)
		}
	}
}

// hexFrame decodes a frame written in hex.
func hexFrame(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
