package logd

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// The stack parses the IPv4 options of a received packet before the
// PREROUTING hook (ip_rcv_options → ip_options_compile) and, doing so,
// writes into some of them: the LOG target on INPUT and FORWARD prints the
// options as rewritten, while the data plane saw them as received. This
// file replays those writes.

// IPv4 option types and fields.
const (
	ipoptEnd       = 0
	ipoptNop       = 1
	ipoptRR        = 7  // record route
	ipoptTimestamp = 68 // internet timestamp

	ipoptTSOnly    = 0 // timestamps only
	ipoptTSAndAddr = 1 // address and timestamp pairs
	ipoptTSPrespec = 3 // timestamps of prespecified addresses
	ipoptTSFlags   = 0x0f
	ipoptTSOflwMax = 15 // the overflow counter saturates (the kernel drops)

	ipAddrLen    = 4
	msPerDay     = 24 * 60 * 60 * 1000
	rrMinPointer = 4 // the first slot of a record route option
	tsMinPointer = 5 // the first slot of a timestamp option
)

// host answers what the kernel looks up while it rewrites options.
type host interface {
	// specDst is the address the stack records in a forwarded packet from
	// src (fib_compute_spec_dst: the preferred source of the route back).
	specDst(src netip.Addr) (netip.Addr, bool)
	// isLocal reports whether a is an address of this host.
	isLocal(a netip.Addr) bool
	// now is the time of the hook.
	now() time.Time
}

// offlineHost knows nothing of the host: forwarded packets keep the
// addresses they were received with.
type offlineHost struct{}

func (offlineHost) specDst(netip.Addr) (netip.Addr, bool) { return netip.Addr{}, false }
func (offlineHost) isLocal(netip.Addr) bool               { return false }
func (offlineHost) now() time.Time                        { return time.Now() }

// receivedOptions returns opts (the options of header ih) as the LOG target
// sees them on a received packet. input is true on INPUT, where a unicast
// packet's recorded address is its destination.
func receivedOptions(opts, ih []byte, input bool, h host) []byte {
	out := append([]byte(nil), opts...)
	src := netip.AddrFrom4([ipAddrLen]byte(ih[12:16]))
	dst := netip.AddrFrom4([ipAddrLen]byte(ih[16:20]))
	specDst := func() (netip.Addr, bool) {
		if input && !dst.IsMulticast() && dst != netip.AddrFrom4([ipAddrLen]byte{255, 255, 255, 255}) {
			return dst, true // a local route: the packet's destination
		}
		return h.specDst(src)
	}
	isLocal := func(a netip.Addr) bool { return (input && a == dst) || h.isLocal(a) }
	var seenRR, seenTS bool
	for i := 0; i < len(out); {
		switch out[i] {
		case ipoptEnd:
			// The kernel clears whatever follows the end of the list.
			clear(out[i+1:])
			return out
		case ipoptNop:
			i++
			continue
		}
		if len(out)-i < 2 {
			return out // malformed: the kernel drops the packet
		}
		optlen := int(out[i+1])
		if optlen < 2 || optlen > len(out)-i {
			return out
		}
		o := out[i : i+optlen]
		switch o[0] {
		case ipoptRR:
			if seenRR || !recordRoute(o, specDst) {
				return out
			}
			seenRR = true
		case ipoptTimestamp:
			if seenTS || !timestamp(o, specDst, isLocal, h.now) {
				return out
			}
			seenTS = true
		}
		i += optlen
	}
	return out
}

// recordRoute records the address in a record route option o; it returns
// false where the kernel finds the option malformed.
func recordRoute(o []byte, specDst func() (netip.Addr, bool)) bool {
	if len(o) < 3 || o[2] < rrMinPointer {
		return false
	}
	ptr := int(o[2])
	if ptr > len(o) {
		return true // full
	}
	if ptr+ipAddrLen-1 > len(o) {
		return false
	}
	if a, ok := specDst(); ok {
		a4 := a.As4()
		copy(o[ptr-1:], a4[:])
	}
	o[2] += ipAddrLen
	return true
}

// timestamp fills a timestamp option o; it returns false where the kernel
// finds the option malformed.
func timestamp(o []byte, specDst func() (netip.Addr, bool), isLocal func(netip.Addr) bool, now func() time.Time) bool {
	if len(o) < 4 || o[2] < tsMinPointer {
		return false
	}
	ptr := int(o[2])
	if ptr > len(o) {
		if o[3]&ipoptTSFlags != ipoptTSPrespec {
			overflow := o[3] >> 4
			if overflow == ipoptTSOflwMax {
				return false
			}
			o[3] = o[3]&ipoptTSFlags | (overflow+1)<<4
		}
		return true
	}
	if ptr+ipAddrLen-1 > len(o) {
		return false
	}
	timeAt := -1
	switch o[3] & ipoptTSFlags {
	case ipoptTSOnly:
		timeAt = ptr - 1
		o[2] += ipAddrLen
	case ipoptTSAndAddr:
		if ptr+2*ipAddrLen-1 > len(o) {
			return false
		}
		if a, ok := specDst(); ok {
			a4 := a.As4()
			copy(o[ptr-1:], a4[:])
			timeAt = ptr + ipAddrLen - 1
		}
		o[2] += 2 * ipAddrLen
	case ipoptTSPrespec:
		if ptr+2*ipAddrLen-1 > len(o) {
			return false
		}
		if !isLocal(netip.AddrFrom4([ipAddrLen]byte(o[ptr-1 : ptr-1+ipAddrLen]))) {
			return true // another host's slot
		}
		timeAt = ptr + ipAddrLen - 1
		o[2] += 2 * ipAddrLen
	}
	if timeAt >= 0 {
		binary.BigEndian.PutUint32(o[timeAt:], msSinceMidnight(now()))
	}
	return true
}

// msSinceMidnight is inet_current_timestamp: milliseconds since midnight UTC.
func msSinceMidnight(t time.Time) uint32 {
	t = t.UTC()
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return uint32(t.Sub(midnight).Milliseconds() % msPerDay)
}
