package nettest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// This file splits IPv4 and IPv6 packets into fragments.

// FragmentIPv4 splits an IPv4 packet into fragments whose payloads are at
// most size bytes (rounded down to a multiple of 8). Options are copied into
// every fragment if their copied flag is set, into the first one otherwise.
// The packet's ID, DF and TTL are kept; an already fragmented packet is
// refragmented relative to its own offset.
func FragmentIPv4(pkt []byte, size int) ([][]byte, error) {
	if len(pkt) < ipv4HeaderLen || pkt[0]>>4 != 4 {
		return nil, fmt.Errorf("fragment IPv4: not an IPv4 packet (%d bytes)", len(pkt))
	}
	hlen := int(pkt[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:]))
	if hlen < ipv4HeaderLen || total < hlen || total > len(pkt) {
		return nil, fmt.Errorf("fragment IPv4: bad header length %d or total length %d for %d bytes", hlen, total, len(pkt))
	}
	size -= size % fragUnit
	if size <= 0 {
		return nil, fmt.Errorf("fragment IPv4: fragment size must be at least %d", fragUnit)
	}
	opts := pkt[ipv4HeaderLen:hlen]
	copied, err := copiedIPv4Options(opts)
	if err != nil {
		return nil, err
	}
	flags := binary.BigEndian.Uint16(pkt[6:])
	baseOff := int(flags & ipv4OffsetMask)
	lastMF := flags&ipv4MoreFragments != 0
	payload := pkt[hlen:total]
	var out [][]byte
	for start := 0; start < len(payload) || start == 0; start += size {
		end := min(start+size, len(payload))
		o := opts
		if start > 0 {
			o = copied
		}
		h := IPv4{
			Src:          netip.AddrFrom4([4]byte(pkt[12:16])),
			Dst:          netip.AddrFrom4([4]byte(pkt[16:20])),
			TOS:          pkt[1],
			ID:           binary.BigEndian.Uint16(pkt[4:]),
			DontFragment: flags&ipv4DontFragment != 0,
			ReservedFlag: flags&ipv4ReservedFlag != 0,
			// start is a multiple of 8 bytes.
			FragOffset:    uint16(baseOff + start/fragUnit),
			MoreFragments: end < len(payload) || lastMF,
			TTL:           pkt[8],
			Options:       o,
		}
		out = append(out, h.header(pkt[9], payload[start:end]))
		if end == len(payload) {
			break
		}
	}
	return out, nil
}

// copiedIPv4Options returns the options with the copied flag set.
func copiedIPv4Options(opts []byte) ([]byte, error) {
	const (
		optEOL    = 0
		optNOP    = 1
		copiedBit = 0x80
	)
	var out []byte
	for i := 0; i < len(opts); {
		switch t := opts[i]; t {
		case optEOL:
			return out, nil
		case optNOP:
			i++
			continue
		default:
			if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
				return nil, fmt.Errorf("fragment IPv4: malformed option %d at offset %d", t, i)
			}
			l := int(opts[i+1])
			if t&copiedBit != 0 {
				out = append(out, opts[i:i+l]...)
			}
			i += l
		}
	}
	return out, nil
}

// FragmentIPv6 splits an IPv6 packet into fragments with identification id,
// whose fragmentable parts are at most size bytes (rounded down to a
// multiple of 8). The unfragmentable part (the IPv6 header, hop-by-hop and
// routing headers, and destination options before a routing header) is
// repeated in each fragment, followed by a fragment header.
func FragmentIPv6(pkt []byte, size int, id uint32) ([][]byte, error) {
	if len(pkt) < ipv6HeaderLen || pkt[0]>>4 != 6 {
		return nil, fmt.Errorf("fragment IPv6: not an IPv6 packet (%d bytes)", len(pkt))
	}
	end := ipv6HeaderLen + int(binary.BigEndian.Uint16(pkt[4:]))
	if end > len(pkt) {
		return nil, fmt.Errorf("fragment IPv6: payload length %d exceeds the %d bytes given", end-ipv6HeaderLen, len(pkt)-ipv6HeaderLen)
	}
	size -= size % fragUnit
	if size <= 0 {
		return nil, fmt.Errorf("fragment IPv6: fragment size must be at least %d", fragUnit)
	}
	// Walk the leading hop-by-hop, routing and destination options headers.
	// The unfragmentable part ends after the last routing header, or after a
	// leading hop-by-hop header when there is no routing header.
	unfragEnd, unfragNH := ipv6HeaderLen, 6 // 6: Next Header field of the IPv6 header
	nhPos, off := unfragNH, ipv6HeaderLen
	for first := true; ; first = false { // ends: off grows by >= 8 each turn
		nh := pkt[nhPos]
		if nh != ProtoHopByHop && nh != ProtoRouting && nh != ProtoDestOpts {
			break
		}
		if off+2 > end {
			return nil, fmt.Errorf("fragment IPv6: truncated extension header at %d", off)
		}
		hl := (int(pkt[off+1]) + 1) * extHeaderUnit
		if off+hl > end {
			return nil, fmt.Errorf("fragment IPv6: extension header at %d overruns the packet", off)
		}
		if nh == ProtoRouting || (nh == ProtoHopByHop && first) {
			unfragEnd, unfragNH = off+hl, off
		}
		nhPos, off = off, off+hl
	}
	unfrag := pkt[:unfragEnd]
	fragNext := pkt[unfragNH]
	data := pkt[unfragEnd:end]
	var out [][]byte
	for start := 0; start < len(data) || start == 0; start += size {
		stop := min(start+size, len(data))
		fh := FragmentHeader(uint16(start/fragUnit), stop < len(data), id).marshal(fragNext)
		f := make([]byte, 0, len(unfrag)+len(fh)+stop-start)
		f = append(f, unfrag...)
		f[unfragNH] = ProtoFragment
		f = append(f, fh...)
		f = append(f, data[start:stop]...)
		binary.BigEndian.PutUint16(f[4:], uint16(len(f)-ipv6HeaderLen))
		out = append(out, f)
		if stop == len(data) {
			break
		}
	}
	return out, nil
}
