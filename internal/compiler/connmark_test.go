package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestConnmarkWalks checks the connection's mark in the walk: CONNMARK
// rules change it (or, restoring, the packet's mark) in rule order, and
// -m connmark and -m mark read what the rules before them left; a packet
// without a connection matches no connmark rule, inverted or not, and
// CONNMARK leaves its marks alone.
func TestConnmarkWalks(t *testing.T) {
	tracked := CtValue(CtsEstablished, false, 0, 6)
	tests := []struct {
		name         string
		rules        []string
		ct           uint32
		mark, ctmark uint32
		chain        int
		want         []string
		wantMark     uint32
		wantCtmark   uint32
	}{
		{name: "set, then match", rules: []string{
			"-A OUTPUT -m connmark --mark 0", "-A OUTPUT -j CONNMARK --set-mark 0x11",
			"-A OUTPUT -m connmark --mark 0x11", "-A OUTPUT -m connmark ! --mark 0x11",
		}, ct: tracked, chain: ChainOutput, want: []string{"filter/OUTPUT/1", "filter/OUTPUT/2", "filter/OUTPUT/3",
			"filter/OUTPUT/policy"}, wantCtmark: 0x11},
		{name: "restore across tables, seen by -m mark", rules: []string{
			"-t mangle -A PREROUTING -j CONNMARK --restore-mark --mask 0xff",
			"-A INPUT -m mark --mark 0x34", "-A INPUT -m mark --mark 0x1234",
		}, ct: tracked, mark: 0x1200, ctmark: 0x5634, chain: ChainInput, want: []string{"mangle/PREROUTING/1",
			"mangle/PREROUTING/policy", "mangle/INPUT/policy", "filter/INPUT/2", "filter/INPUT/policy"},
			wantMark: 0x1234, wantCtmark: 0x5634},
		{name: "save with masks and a shift", rules: []string{
			"-t mangle -A POSTROUTING -j CONNMARK --save-mark --nfmask 0xf --ctmask 0xf0 --left-shift-mark 4",
			"-t mangle -A POSTROUTING -m connmark --mark 0x1b5",
		}, ct: tracked, mark: 0xab, ctmark: 0x105, chain: ChainOutput, want: []string{"mangle/OUTPUT/policy",
			"filter/OUTPUT/policy", "mangle/POSTROUTING/1", "mangle/POSTROUTING/2", "mangle/POSTROUTING/policy"},
			wantMark: 0xab, wantCtmark: 0x1b5},
		{name: "and, or, xor, right shift", rules: []string{
			"-A FORWARD -j CONNMARK --or-mark 0xf0", "-A FORWARD -j CONNMARK --and-mark 0xff",
			"-A FORWARD -j CONNMARK --xor-mark 0x11", "-A FORWARD -j CONNMARK --set-xmark 0x0/0x0 --right-shift-mark 4",
			"-A FORWARD -m connmark --mark 0xe",
		}, ct: tracked, ctmark: 0x1203, chain: ChainForward, want: []string{"filter/FORWARD/1", "filter/FORWARD/2",
			"filter/FORWARD/3", "filter/FORWARD/4", "filter/FORWARD/5", "filter/FORWARD/policy"}, wantCtmark: 0xe},
		{name: "no connection", rules: []string{
			"-A INPUT -j CONNMARK --set-mark 1", "-A INPUT -j CONNMARK --restore-mark",
			"-A INPUT -m connmark --mark 0", "-A INPUT -m connmark ! --mark 0",
		}, ct: CtValue(CtsInvalid, false, 0, 0), mark: 7, chain: ChainInput, want: []string{"filter/INPUT/1",
			"filter/INPUT/2", "filter/INPUT/policy"}, wantMark: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := parseRuleset(t, ir.IPv4, tt.rules...)
			g, err := Compile(rs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if g.Active&(1<<FieldCt) == 0 {
				t.Fatal("the generation does not track connections")
			}
			p := tcpPacket(tt.ct, 64)
			p.Mark, p.CtMark = tt.mark, tt.ctmark
			got := walk(g, p, tt.chain)
			if got.verdict != ActAccept || !slices.Equal(got.counted, tt.want) {
				t.Errorf("got %v %v\nwant %v", got.verdict, got.counted, tt.want)
			}
			if p.Mark != tt.wantMark || p.CtMark != tt.wantCtmark {
				t.Errorf("marks %#x/%#x, want %#x/%#x", p.Mark, p.CtMark, tt.wantMark, tt.wantCtmark)
			}
		})
	}
}

// TestConnmarkApply checks the target's arithmetic against
// connmark_tg_shift's, case by case.
func TestConnmarkApply(t *testing.T) {
	tests := []struct {
		t                  ir.ConnmarkTarget
		mark, ctmark       uint32
		wantMark, wantCtmk uint32
	}{
		{ir.ConnmarkTarget{Mode: ir.ConnmarkSet, CtMark: 0x5, CtMask: 0xf}, 1, 0xab, 1, 0xa5},
		{ir.ConnmarkTarget{Mode: ir.ConnmarkSet, CtMark: 0x1, CtMask: 0xffffffff, ShiftBits: 31}, 0, 7, 0, 0x80000000},
		{ir.ConnmarkTarget{Mode: ir.ConnmarkSave, CtMask: 0xffff0000, NfMask: 0xffff, ShiftBits: 16}, 0x12345678, 0xabcdef01, 0x12345678, 0x5678ef01},
		{ir.ConnmarkTarget{Mode: ir.ConnmarkRestore, CtMask: 0xffff0000, NfMask: 0xffff, ShiftRight: true, ShiftBits: 16}, 0x12345678, 0xabcdef01, 0x1234abcd, 0xabcdef01},
		{ir.ConnmarkTarget{Mode: ir.ConnmarkRestore, CtMask: 0xffffffff, NfMask: 0xffffffff}, 3, 9, 9, 9},
	}
	for i, tt := range tests {
		pr, err := ConnmarkSetProbe(&tt.t)
		if err != nil {
			t.Fatal(err)
		}
		m, c := ConnmarkApply(pr, tt.mark, tt.ctmark)
		if m != tt.wantMark || c != tt.wantCtmk {
			t.Errorf("%d: %+v on %#x/%#x: %#x/%#x, want %#x/%#x", i, tt.t, tt.mark, tt.ctmark, m, c, tt.wantMark, tt.wantCtmk)
		}
	}
}
