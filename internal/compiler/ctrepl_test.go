package compiler

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCtReplProbeMasksAddress: --ctreplsrc and --ctrepldst keep the
// address as given (iptables-save prints "--ctreplsrc 10.43.2.158/18"),
// and the kernel masks both sides: a reply tuple in the network matches
// whatever host bits the option names.
func TestCtReplProbeMasksAddress(t *testing.T) {
	prefix := func(a string, bits int) ir.AddrMatch {
		v := ^uint32(0) << (32 - bits)
		mask := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		return ir.AddrMatch{Set: true, Addr: netip.MustParseAddr(a), Mask: mask}
	}
	ct := uint32(CtsNew)
	host := func(a string) uint32 { return addr4(netip.MustParseAddr(a)) }
	tests := []struct {
		name     string
		m        ctReplMatch
		src, dst string
		want     bool
	}{
		{"source in the network", ctReplMatch{Src: prefix("10.43.2.158", 18)}, "10.43.2.2", "10.43.2.1", true},
		{"source outside", ctReplMatch{Src: prefix("10.43.2.158", 18)}, "10.43.64.2", "10.43.2.1", false},
		{"destination in the network", ctReplMatch{Dst: prefix("192.0.2.77", 24)}, "10.43.2.2", "192.0.2.1", true},
		{"destination outside", ctReplMatch{Dst: prefix("192.0.2.77", 24)}, "10.43.2.2", "192.0.3.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CtReplAnswer(ctReplProbe(&tt.m), ct, host(tt.src), host(tt.dst)); got != tt.want {
				t.Errorf("CtReplAnswer(%s > %s) = %v, want %v", tt.src, tt.dst, got, tt.want)
			}
		})
	}
}
