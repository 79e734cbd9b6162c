package nettest

import (
	"encoding/binary"
	"net/netip"
)

// This file computes Internet checksums (RFC 1071), with the IPv4 and IPv6
// pseudo-headers of transport checksums.

// Checksum returns the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	return ^fold(sum16(0, b))
}

// sum16 adds b as big-endian 16-bit words to acc.
func sum16(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// fold folds a 32-bit one's complement sum into 16 bits.
func fold(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// transportChecksum returns the checksum of a transport segment b over the
// IPv4 or IPv6 pseudo-header of src and dst.
func transportChecksum(src, dst netip.Addr, proto uint8, b []byte) uint16 {
	var acc uint32
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		acc = sum16(acc, s[:])
		acc = sum16(acc, d[:])
		acc += uint32(proto) + uint32(len(b))
	} else {
		s, d := src.As16(), dst.As16()
		acc = sum16(acc, s[:])
		acc = sum16(acc, d[:])
		acc += uint32(len(b)>>16) + uint32(len(b)&0xffff) + uint32(proto)
	}
	return ^fold(sum16(acc, b))
}
