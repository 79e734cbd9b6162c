package dataplane

// The input device's sysctls the kernel's checks before any chain follow
// (bpf/route.h): accept_local (a source of this host's own from outside),
// route_localnet (127.0.0.0/8 from outside), accept_source_route (an
// IPv4 source route option), rp_filter (the reverse-path filter) and
// src_valid_mark (its lookup with the packet's mark). Each device's value
// is combined with "all"'s as the kernel combines them, and the result
// mirrored in the device's xfw_ifinfo flags at each sync (fillIfInfo) and
// when the agent sees one change (RefreshInputSysctls).

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
)

// The XFW_IF_* bits of the sysctls (bpf/common.h).
const (
	ifAcceptLocal   = 0x40  // XFW_IF_ACCEPT_LOCAL
	ifRouteLocalnet = 0x80  // XFW_IF_ROUTE_LOCALNET
	ifSrcRoute      = 0x100 // XFW_IF_SRCROUTE
	ifRPFStrict     = 0x200 // XFW_IF_RPF_STRICT
	ifRPFLoose      = 0x400 // XFW_IF_RPF_LOOSE
	ifSrcValidMark  = 0x800 // XFW_IF_SRC_VMARK
)

// rpfMask covers the rp_filter bits, a mode rather than flags: the
// kernel takes the larger of "all"'s value and the device's
// (IN_DEV_RPFILTER), 1 strict, any other nonzero value loose
// (__fib_validate_source tests rpf == 1).
const rpfMask = ifRPFStrict | ifRPFLoose

// rpfBits returns rp_filter value n as its XFW_IF_RPF_* bit.
func rpfBits(n int64) uint16 {
	switch {
	case n == 1:
		return ifRPFStrict
	case n != 0:
		return ifRPFLoose
	}
	return 0
}

// inputSysctl is one of those sysctls: its name under
// net/ipv4/conf/<device>/, its bit, and whether the kernel wants it on
// for both "all" and the device (IN_DEV_ANDCONF) rather than for either
// (IN_DEV_ORCONF).
type inputSysctl struct {
	name string
	bit  uint16
	and  bool
}

// inputSysctls are the sysctls, with include/linux/inetdevice.h's
// combinations: IN_DEV_ACCEPT_LOCAL and IN_DEV_ROUTE_LOCALNET (its
// IN_DEV_NET_ROUTE_LOCALNET twin alike) are ORCONF, IN_DEV_SOURCE_ROUTE
// ANDCONF.
var inputSysctls = []inputSysctl{
	{"accept_local", ifAcceptLocal, false},
	{"route_localnet", ifRouteLocalnet, false},
	{"accept_source_route", ifSrcRoute, true},
	{"src_valid_mark", ifSrcValidMark, false},
}

// inputSysctlMask covers every bit of inputSysctls and rp_filter's.
const inputSysctlMask = ifAcceptLocal | ifRouteLocalnet | ifSrcRoute | ifSrcValidMark | rpfMask

// readInputSysctls returns the bits of the sysctls that are on (nonzero)
// for dev ("all" included), and whether dev has them at all (a device
// without IPv4 has none).
func readInputSysctls(dev string) (bits uint16, ok bool, err error) {
	for _, s := range inputSysctls {
		n, err := readSysctlInt("net/ipv4/conf/" + dev + "/" + s.name)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("interface %s: %w", dev, err)
		}
		if n != 0 {
			bits |= s.bit
		}
	}
	n, err := readSysctlInt("net/ipv4/conf/" + dev + "/rp_filter")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("interface %s: %w", dev, err)
	}
	if n < 0 {
		n = 0 // max(all, dev) with the other at 0 or more
	}
	return bits | rpfBits(n), true, nil
}

// rpfNoAddr returns flags, the combined sysctls of dev, with loose
// reverse-path filtering made strict when dev has no IPv4 address:
// __fib_validate_source then fails a source routed by another device in
// loose mode too (no_addr), which is strict mode's rule. A device whose
// addresses cannot be read is taken as having none (the stricter).
func rpfNoAddr(flags uint16, dev string) uint16 {
	if flags&ifRPFLoose == 0 || hasIPv4Addr(dev) {
		return flags
	}
	return flags&^ifRPFLoose | ifRPFStrict
}

// hasIPv4Addr reports whether device dev has an IPv4 address.
func hasIPv4Addr(dev string) bool {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return false
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
			return true
		}
	}
	return false
}

// combineInputSysctls combines a device's bits with "all"'s as the kernel
// does.
func combineInputSysctls(all, dev uint16) uint16 {
	var out uint16
	for _, s := range inputSysctls {
		a, d := all&s.bit != 0, dev&s.bit != 0
		if (s.and && a && d) || (!s.and && (a || d)) {
			out |= s.bit
		}
	}
	// rp_filter: the larger value; the bits are ordered as the values
	// (off 0, strict 0x200 for 1, loose 0x400 for 2 and more).
	return out | max(all&rpfMask, dev&rpfMask)
}

// inputSysctlFlags returns, per device name, the XFW_IF_* bits of its
// sysctls combined with "all"'s: the values the kernel's checks of a
// packet received on it use. A device without IPv4 sysctls gets none.
func inputSysctlFlags(devs []string) (map[string]uint16, error) {
	all, _, err := readInputSysctls("all")
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint16, len(devs))
	for _, dev := range devs {
		bits, ok, err := readInputSysctls(dev)
		if err != nil {
			return nil, err
		}
		if ok {
			out[dev] = combineInputSysctls(all, bits)
		}
	}
	return out, nil
}

// InputSysctlFacts returns a digest of the input sysctls of "all" and of
// every device, for a watcher to tell when one changed (no notification
// is sent for them).
func InputSysctlFacts() string {
	ifs, err := listInterfaces()
	if err != nil {
		return "interfaces: " + err.Error()
	}
	names := []string{"all"}
	for _, ifc := range ifs {
		names = append(names, ifc.Name)
	}
	var b strings.Builder
	for _, n := range names {
		bits, ok, err := readInputSysctls(n)
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%s=%t/%d ", n, ok, bits)
	}
	return b.String()
}

// RefreshInputSysctls mirrors the input sysctls into the running data
// plane's interface facts (and the rest of them, read afresh: fillIfInfo),
// for a change seen between syncs. Nothing to do when xfw is not loaded.
func RefreshInputSysctls() error {
	cur, err := currentOwn()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	ifaces, err := listInterfaces()
	if err != nil {
		return err
	}
	if err := fillIfInfo(cur.maps["xfw_ifinfo"], ifaces); err != nil {
		return err
	}
	return bumpIfinfoGen(cur.maps["xfw_bank"])
}
