package dataplane

import "testing"

// TestParseXDPMode checks the XDP mode names --xdp-mode and XFW_XDP_MODE
// take, and that anything else is refused.
func TestParseXDPMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want XDPMode
		ok   bool
	}{
		{"auto", XDPAuto, true},
		{"native", XDPNative, true},
		{"generic", XDPGeneric, true},
		{"veth-generic", XDPVethGeneric, true},
		{"", "", false},
		{"skb", "", false},
		{"Generic", "", false},
	} {
		got, err := ParseXDPMode(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseXDPMode(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
