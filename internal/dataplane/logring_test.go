package dataplane

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// logEventSize is sizeof(struct xfw_log_event).
const logEventSize = 376

func TestDecodeLogEvent(t *testing.T) {
	if n := binary.Size(bpfLogEvent{}); n != logEventSize {
		t.Fatalf("bpfLogEvent is %d bytes, struct xfw_log_event %d", n, logEventSize)
	}
	raw := func(ev bpfLogEvent) []byte {
		var b bytes.Buffer
		if err := binary.Write(&b, binary.NativeEndian, ev); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	good := bpfLogEvent{InIfindex: 3, OutIfindex: 4, Rule: 7, SnapLen: 5, L3Off: 14, PktLen: 1500,
		Family: 6, Chain: 1, Level: 6, Flags: 0x21, HasMAC: 1, Mark: 0x2a, PhysIn: 8, PhysOut: 9}
	copy(good.Prefix[:], "abc ")
	copy(good.Pkt[:], []byte{1, 2, 3, 4, 5, 6, 7})
	full := good
	full.SnapLen = 1000 // more than the snapshot holds
	copy(full.Prefix[:], bytes.Repeat([]byte{'p'}, len(full.Prefix)))

	tests := []struct {
		name    string
		raw     []byte
		want    LogEvent
		wantErr bool
	}{
		{name: "event", raw: raw(good), want: LogEvent{
			InIfindex: 3, OutIfindex: 4, Rule: 7, Family: ir.IPv6, Chain: ir.ChainForward,
			Level: 6, Flags: 0x21, Prefix: "abc ", HasMAC: true, L3Off: 14, FrameLen: 1500,
			Frame: []byte{1, 2, 3, 4, 5}, Mark: 0x2a, PhysIn: 8, PhysOut: 9,
		}},
		{name: "unnamed port, no output port", raw: func() []byte {
			e := good
			e.PhysIn, e.PhysOut = compiler.PhysAnyPort, compiler.PhysNull
			return raw(e)
		}(), want: LogEvent{
			InIfindex: 3, OutIfindex: 4, Rule: 7, Family: ir.IPv6, Chain: ir.ChainForward,
			Level: 6, Flags: 0x21, Prefix: "abc ", HasMAC: true, L3Off: 14, FrameLen: 1500,
			Frame: []byte{1, 2, 3, 4, 5}, Mark: 0x2a,
		}},
		{name: "snapshot and prefix bounded", raw: raw(full), want: LogEvent{
			InIfindex: 3, OutIfindex: 4, Rule: 7, Family: ir.IPv6, Chain: ir.ChainForward,
			Level: 6, Flags: 0x21, Prefix: string(bytes.Repeat([]byte{'p'}, len(full.Prefix))),
			HasMAC: true, L3Off: 14, FrameLen: 1500, Frame: full.Pkt[:], Mark: 0x2a, PhysIn: 8, PhysOut: 9,
		}},
		{name: "NFLOG record longer than the snapshot", raw: func() []byte {
			e := good
			e.SnapLen = 300 // of a 2,048-byte room: the frame goes on past Pkt
			b := append(raw(e), make([]byte, 2048-logSnap)...)
			b[logEventSize-logSnap+299] = 0x99
			return b
		}(), want: LogEvent{
			InIfindex: 3, OutIfindex: 4, Rule: 7, Family: ir.IPv6, Chain: ir.ChainForward,
			Level: 6, Flags: 0x21, Prefix: "abc ", HasMAC: true, L3Off: 14, FrameLen: 1500,
			Frame: append(append([]byte{1, 2, 3, 4, 5, 6, 7}, make([]byte, 292)...), 0x99), Mark: 0x2a, PhysIn: 8, PhysOut: 9,
		}},
		{name: "short record", raw: raw(good)[:100], wantErr: true},
		{name: "bad family", raw: func() []byte { e := good; e.Family = 5; return raw(e) }(), wantErr: true},
		{name: "bad chain", raw: func() []byte { e := good; e.Chain = 3; return raw(e) }(), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeLogEvent(tc.raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !bytes.Equal(got.Frame, tc.want.Frame) {
				t.Errorf("Frame = %x, want %x", got.Frame, tc.want.Frame)
			}
			if !equalEvents(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// equalEvents compares events without their frames.
func equalEvents(a, b LogEvent) bool {
	return a.InIfindex == b.InIfindex && a.OutIfindex == b.OutIfindex && a.Rule == b.Rule &&
		a.Family == b.Family && a.Chain == b.Chain && a.Level == b.Level && a.Flags == b.Flags &&
		a.Prefix == b.Prefix && a.HasMAC == b.HasMAC && a.L3Off == b.L3Off && a.FrameLen == b.FrameLen &&
		a.PhysIn == b.PhysIn && a.PhysOut == b.PhysOut
}

// TestApplyLogView checks that a LOG event's frame gets the TOS, TTL and
// length the rewrites before its rule left (FORWARD's walk holding the
// TTL one below the wire's), with a valid IPv4 header checksum, and is
// left alone without a view.
func TestApplyLogView(t *testing.T) {
	frame := func() []byte {
		b := make([]byte, 14+20)
		copy(b[14:], []byte{0x45, 0, 0, 40, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(b[14+10:], ipv4HeaderChecksum(b[14:]))
		return b
	}
	b := frame()
	applyLogView(b, 14, ir.IPv4, 0)
	if !bytes.Equal(b, frame()) {
		t.Errorf("no view changed the frame: % x", b)
	}
	applyLogView(b, 14, ir.IPv4, logViewSet|logViewTTL|logViewTOS|logViewGrown|logViewFwd|0x10<<8|8)
	if b[15] != 0x10 || b[22] != 9 || binary.BigEndian.Uint16(b[16:]) != 44 {
		t.Errorf("TOS %#x TTL %d length %d, want 0x10, 9, 44", b[15], b[22], binary.BigEndian.Uint16(b[16:]))
	}
	if ipv4HeaderChecksum(b[14:34]) != 0 {
		t.Errorf("header checksum not valid: % x", b[14:34])
	}
	b6 := make([]byte, 40)
	b6[0], b6[1], b6[5], b6[7] = 0x60, 0x05, 8, 64
	applyLogView(b6, 0, ir.IPv6, logViewSet|logViewTOS|logViewTTL|0xab<<8|20)
	if b6[0] != 0x6a || b6[1] != 0xb5 || b6[7] != 20 || b6[5] != 8 {
		t.Errorf("IPv6 header % x", b6[:8])
	}
}
