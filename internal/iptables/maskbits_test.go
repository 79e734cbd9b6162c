package iptables

import (
	"net/netip"
	"testing"
)

// maskBitsOfSlice is maskBits over AsSlice, as it was written first (the
// heap's copy of the address's bytes).
func maskBitsOfSlice(m netip.Addr) int {
	return maskBytesBits(m.AsSlice())
}

// TestMaskBits: prefix lengths of contiguous masks of both families (and
// IPv4-mapped ones), -1 for the others, 0 for the zero Addr; and the same
// answer as over AsSlice's bytes; zeroMask agrees with it on 0.
func TestMaskBits(t *testing.T) {
	type tc struct {
		m    netip.Addr
		want int
	}
	cases := []tc{{netip.Addr{}, 0}}
	for bits := 0; bits <= 128; bits++ {
		if bits <= 32 {
			cases = append(cases, tc{netip.AddrFrom4(prefixMask4(bits)), bits})
		}
		var m [16]byte
		for i := 0; i < bits; i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		cases = append(cases, tc{netip.AddrFrom16(m), bits})
	}
	for _, s := range []string{"255.0.255.0", "0.0.0.1", "::ffff:255.255.255.0", "ffff::1", "::ffff:0.0.0.0", "::1", "128.0.0.1"} {
		cases = append(cases, tc{netip.MustParseAddr(s), -1})
	}
	for _, c := range cases {
		if got := maskBits(c.m); got != c.want {
			t.Errorf("%v: %d, want %d", c.m, got, c.want)
		}
		if got, slice := maskBits(c.m), maskBitsOfSlice(c.m); got != slice {
			t.Errorf("%v: %d, over AsSlice %d", c.m, got, slice)
		}
		if zero := zeroMask(c.m); zero != (c.want == 0) {
			t.Errorf("%v: zeroMask %v, maskBits %d", c.m, zero, c.want)
		}
	}
}
