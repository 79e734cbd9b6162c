package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestDevGroupWalks checks -m devgroup as interface conditions: the
// groups of testIfaces (eth1 5, wlan0 0x12, the others and unknown
// devices 0), masks and inversion on both directions.
func TestDevGroupWalks(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-A FORWARD -m devgroup --src-group 5",
		"-A FORWARD -m devgroup --src-group 0x2/0xf",
		"-A FORWARD -m devgroup ! --src-group 0",
		"-A FORWARD -m devgroup --dst-group 0",
		"-A FORWARD -m devgroup --src-group 0x10/0x10 ! --dst-group 5",
	)
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		iif, oif uint32
		want     []int
	}{
		{3, 2, []int{1, 3, 4}},      // eth1 (5) to eth0 (0)
		{4, 3, []int{2, 3}},         // wlan0 (0x12) to eth1 (5)
		{2, 4, nil},                 // eth0 (0) to wlan0 (0x12)
		{ifaceUnknown, 2, []int{4}}, // a new device (0) to eth0
		{4, ifaceUnknown, []int{2, 3, 4, 5}},
	}
	for _, tt := range tests {
		p := tcpPacket(0, 64)
		p.IIF, p.OIF = tt.iif, tt.oif
		var want []string
		for _, r := range tt.want {
			want = append(want, "filter/FORWARD/"+string(rune('0'+r)))
		}
		want = append(want, "filter/FORWARD/policy")
		if got := walk(g, p, ChainForward); !slices.Equal(got.counted, want) {
			t.Errorf("in %d out %d: counted %v, want %v", tt.iif, tt.oif, got.counted, want)
		}
	}
}
