package iptables

import (
	"net/netip"
	"testing"
)

// maskBitsOfSlice is maskBits over AsSlice, as it was written first.
func maskBitsOfSlice(m netip.Addr) int {
	b := m.AsSlice()
	n := 0
	for n < len(b)*8 && b[n/8]&(0x80>>(n%8)) != 0 {
		n++
	}
	for i := n; i < len(b)*8; i++ {
		if b[i/8]&(0x80>>(i%8)) != 0 {
			return -1
		}
	}
	return n
}

// TestMaskBits: prefix lengths of contiguous masks of both families (and
// IPv4-mapped ones), -1 for the others, 0 for the zero Addr.
func TestMaskBits(t *testing.T) {
	masks := []netip.Addr{{}}
	for bits := 0; bits <= 128; bits++ {
		if bits <= 32 {
			masks = append(masks, netip.AddrFrom4(prefixMask4(bits)))
		}
		p := netip.PrefixFrom(netip.IPv6Unspecified(), bits)
		var m [16]byte
		for i := 0; i < p.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		masks = append(masks, netip.AddrFrom16(m))
	}
	for _, s := range []string{"255.0.255.0", "0.0.0.1", "::ffff:255.255.255.0", "ffff::1", "::ffff:0.0.0.0"} {
		masks = append(masks, netip.MustParseAddr(s))
	}
	for _, m := range masks {
		if got, want := maskBits(m), maskBitsOfSlice(m); got != want {
			t.Errorf("%v: %d, want %d", m, got, want)
		}
	}
}
