package logd

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// tcp4 is 10.0.0.2:40000 → 10.0.0.1:22, a SYN with sequence 1 (no data).
const tcp4 = "45000028000040004006" + "0000" + "0a000002" + "0a000001" +
	"9c400016" + "00000001" + "00000000" + "5002ffff" + "00000000"

// TestNFLogLine checks the text line of an NFLOG event: ctime's time,
// the host, the prefix and a space, then the LOG line's fields with the
// TCP sequence numbers (ulogd always prints them), whatever LOG flags.
func TestNFLogLine(t *testing.T) {
	names := func(i uint32) string { return map[uint32]string{2: "eth0"}[i] }
	at := time.Date(2026, time.November, 7, 8, 9, 10, 0, time.UTC)
	ev := Event{InIfindex: 2, Family: ir.IPv4, Chain: ir.ChainInput, HasMAC: true, L3Off: 14,
		Flags: ir.LogFlagNFLog, Prefix: "ssh", NFLogGroup: 5, NFLogLen: compiler.NFLogWhole,
		Frame: mustHex(t, ethV4+tcp4)}
	want := "Nov  7 08:09:10 fw1 ssh IN=eth0 OUT= MAC=02:00:00:00:00:01:02:00:00:00:00:02:08:00 " +
		"SRC=10.0.0.2 DST=10.0.0.1 LEN=40 TOS=0x00 PREC=0x00 TTL=64 ID=0 DF PROTO=TCP SPT=40000 DPT=22 " +
		"SEQ=1 ACK=0 WINDOW=65535 RES=0x00 SYN URGP=0 "
	if got := nflogLine(ev, at, "fw1", names, offlineHost{}); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestNFLogPayload checks the bytes NFLOG passes on: the IP packet from
// its header, without link-layer padding, cut to --nflog-size.
func TestNFLogPayload(t *testing.T) {
	// udp4 is 37 bytes; the frame carries 9 bytes of Ethernet padding.
	frame := mustHex(t, ethV4+udp4+strings.Repeat("00", 9))
	tests := []struct {
		copyLen  uint32
		wantData int
	}{
		{compiler.NFLogWhole, 37},
		{37, 37},
		{20, 20},
		{0, 0},
	}
	for _, tt := range tests {
		ev := Event{Family: ir.IPv4, L3Off: 14, FrameLen: len(frame), Frame: frame, NFLogLen: tt.copyLen}
		data, length := nflogPayload(ev)
		if len(data) != tt.wantData || length != 37 || (len(data) > 0 && data[0] != 0x45) {
			t.Errorf("copy length %d: %d bytes (first %x) of %d, want %d of 37", tt.copyLen, len(data), data[:min(1, len(data))], length, tt.wantData)
		}
	}
}

// TestNFLogGroupFilter checks that a reader writes its group's NFLOG
// events only (not other groups', not LOG events).
func TestNFLogGroupFilter(t *testing.T) {
	var out bytes.Buffer
	w := &nflogWriter{group: 5, out: &out, host: "h", names: &ifNames{list: nil, byIndex: map[uint32]string{}, loaded: time.Now()},
		now: func() time.Time { return time.Unix(0, 0) }}
	base := Event{Family: ir.IPv4, Chain: ir.ChainOutput, L3Off: 0, Frame: mustHex(t, udp4), NFLogLen: compiler.NFLogWhole}
	for _, ev := range []struct {
		flags  uint8
		group  uint16
		prefix string
	}{
		{ir.LogFlagNFLog, 5, "mine"}, {ir.LogFlagNFLog, 6, "other group"}, {0, 5, "a LOG event"}, {ir.LogFlagNFLog, 5, "mine too"},
	} {
		e := base
		e.Flags, e.NFLogGroup, e.Prefix = ev.flags, ev.group, ev.prefix
		if err := w.event(e); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], " h mine IN=") || !strings.Contains(lines[1], " h mine too IN=") {
		t.Errorf("got %q, want the two events of group 5", lines)
	}
}

// TestPcapWriter checks the pcap stream: the global header (LINKTYPE_RAW)
// and a record with the captured and the original length.
func TestPcapWriter(t *testing.T) {
	var b bytes.Buffer
	p, err := newPcapWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 123456000)
	if err := p.packet(at, []byte{0x45, 1, 2}, 40); err != nil {
		t.Fatal(err)
	}
	got := b.Bytes()
	le := binary.LittleEndian
	if len(got) != 24+16+3 || le.Uint32(got) != pcapMagic || le.Uint16(got[4:]) != 2 || le.Uint16(got[6:]) != 4 ||
		le.Uint32(got[16:]) != pcapSnapLen || le.Uint32(got[20:]) != pcapLinkRaw {
		t.Fatalf("header %x", got[:min(24, len(got))])
	}
	rec := got[24:]
	if le.Uint32(rec) != 1700000000 || le.Uint32(rec[4:]) != 123456 || le.Uint32(rec[8:]) != 3 || le.Uint32(rec[12:]) != 40 ||
		!bytes.Equal(rec[16:], []byte{0x45, 1, 2}) {
		t.Errorf("record %x", rec)
	}
}
