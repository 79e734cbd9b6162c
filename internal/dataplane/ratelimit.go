package dataplane

// The kernel's ICMP error rate limits, as REJECT's replies obey them
// (bpf/reject_rate.h): the namespace's sysctls and its IPv6 routes' prefix
// lengths, copied into the data plane at each sync; with them the other
// sysctls the data plane follows (rp_filter, ip_default_ttl, the early
// demux switches LOG --log-uid follows in INPUT: bpf/demux.h).

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// Maps of bpf/reject_rate.h and bpf/route_main.h.
const (
	rateCfgMap    = "xfw_rl_cfg"
	rateRoute6Map = "xfw_rl_rt6"
)

// rateCfg mirrors struct xfw_rl_cfg.
type rateCfg struct {
	MsgsPerSec   uint64
	MsgsBurst    uint64
	Ratelimit4NS uint64
	Ratelimit6NS uint64
	Ratemask4    uint32
	Ratemask6    uint32
	Set          uint32
	RPFilter     uint32 // rp_filter on for some device (rpfilter.go)
	TTL4         uint32 // net.ipv4.ip_default_ttl: REJECT's IPv4 replies' TTL
	EarlyDemux   uint32 // demux* bits: the early demux sysctls (LOG --log-uid in INPUT)
	TAIOff       int64  // CLOCK_TAI - CLOCK_REALTIME in ns: the time of REJECT's timestamp options
}

// The bits of rateCfg.EarlyDemux (bpf/demux.h XFW_DEMUX_*): the early
// demux sysctls that are on, which decide whether a received packet has
// a socket LOG --log-uid prints the ids of in INPUT.
const (
	demuxIP  = 1 << iota // net.ipv4.ip_early_demux
	demuxTCP             // net.ipv4.tcp_early_demux
	demuxUDP             // net.ipv4.udp_early_demux
)

// earlyDemuxSysctls names each demux* bit's sysctl.
var earlyDemuxSysctls = []struct {
	name string
	bit  uint32
}{
	{"net/ipv4/ip_early_demux", demuxIP},
	{"net/ipv4/tcp_early_demux", demuxTCP},
	{"net/ipv4/udp_early_demux", demuxUDP},
}

// readEarlyDemux reads the namespace's early demux sysctls as demux* bits.
func readEarlyDemux() (uint32, error) {
	var on uint32
	for _, s := range earlyDemuxSysctls {
		n, err := readSysctlInt(s.name)
		if err != nil {
			return 0, err
		}
		if n != 0 {
			on |= s.bit
		}
	}
	return on, nil
}

// rateMaskTypes is XFW_RL_MASK_TYPES: the ICMP types whose ratemask bits
// the data plane keeps (REJECT sends type 3, ICMPv6 type 1).
const rateMaskTypes = 32

// ipv6HostPlen is a host route's prefix length (XFW_RL_V6_HOST_PLEN).
const ipv6HostPlen = 128

// The sysctls, under /proc/sys (read in the calling thread's namespace).
const (
	sysctlMsgsPerSec  = "net/ipv4/icmp_msgs_per_sec"
	sysctlMsgsBurst   = "net/ipv4/icmp_msgs_burst"
	sysctlRatelimit4  = "net/ipv4/icmp_ratelimit"
	sysctlRatemask4   = "net/ipv4/icmp_ratemask"
	sysctlRatelimit6  = "net/ipv6/icmp/ratelimit"
	sysctlRatemask6   = "net/ipv6/icmp/ratemask"
	sysctlDefaultTTL  = "net/ipv4/ip_default_ttl"
	nanosPerMilli     = 1_000_000
	sysctlProcPrefix  = "/proc/sys/"
	defaultRatemask6  = "0-1,3-127" // the kernel's, when IPv6 is off
	defaultRatelimit6 = 1000        // ms
)

// readRateCfg reads the namespace's ICMP rate limit sysctls.
func readRateCfg() (rateCfg, error) {
	c := rateCfg{Set: 1}
	ints := []struct {
		name string
		dst  *uint64
	}{{sysctlMsgsPerSec, &c.MsgsPerSec}, {sysctlMsgsBurst, &c.MsgsBurst}, {sysctlRatelimit4, &c.Ratelimit4NS}}
	for _, v := range ints {
		n, err := readSysctlInt(v.name)
		if err != nil {
			return c, err
		}
		*v.dst = uint64(max(n, 0))
	}
	c.Ratelimit4NS *= nanosPerMilli
	ttl, err := readSysctlInt(sysctlDefaultTTL)
	if err != nil {
		return c, err
	}
	c.TTL4 = uint32(ttl)
	if c.EarlyDemux, err = readEarlyDemux(); err != nil {
		return c, err
	}
	wc, err := readWallClock()
	if err != nil {
		return c, err
	}
	c.TAIOff = wc.taiOff
	mask4, err := readSysctlInt(sysctlRatemask4)
	if err != nil {
		return c, err
	}
	c.Ratemask4 = uint32(mask4)
	// IPv6's sysctls are absent when IPv6 is disabled: its defaults then.
	rl6, err := readSysctlInt(sysctlRatelimit6)
	if errors.Is(err, os.ErrNotExist) {
		rl6 = defaultRatelimit6
	} else if err != nil {
		return c, err
	}
	c.Ratelimit6NS = uint64(max(rl6, 0)) * nanosPerMilli
	list, err := readSysctlFile(sysctlProcPrefix + sysctlRatemask6)
	if errors.Is(err, os.ErrNotExist) {
		list = []byte(defaultRatemask6)
	} else if err != nil {
		return c, fmt.Errorf("read %s: %w", sysctlRatemask6, err)
	}
	if c.Ratemask6, err = parseTypeList(strings.TrimSpace(string(list))); err != nil {
		return c, fmt.Errorf("%s: %w", sysctlRatemask6, err)
	}
	return c, nil
}

// readSysctlInt reads an integer sysctl.
func readSysctlInt(name string) (int64, error) {
	b, err := readSysctlFile(sysctlProcPrefix + name)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// parseTypeList turns a bitmap sysctl's list ("0-1,3-127", "" for none)
// into the bits of types 0..31.
func parseTypeList(s string) (uint32, error) {
	var mask uint32
	if s == "" {
		return 0, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("bad type list %q", s)
		}
		to := from
		if isRange {
			if to, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("bad type list %q", s)
			}
		}
		for t := from; t <= to && t < rateMaskTypes; t++ {
			mask |= 1 << uint(t)
		}
	}
	return mask, nil
}

// fillRateCfg copies the namespace's ICMP rate limit sysctls into the
// data plane.
func fillRateCfg(maps map[string]*ebpf.Map) error {
	cfgMap, rt6 := maps[rateCfgMap], maps[rateRoute6Map]
	if cfgMap == nil || rt6 == nil {
		return errors.New("running xfw program lacks its rate limit maps")
	}
	c, err := readRateCfg()
	if err != nil {
		return fmt.Errorf("ICMP rate limits: %w", err)
	}
	if c.RPFilter, err = readRPFilterOn(); err != nil {
		return err
	}
	if err := cfgMap.Put(uint32(0), c); err != nil {
		return fmt.Errorf("record ICMP rate limits: %w", err)
	}
	return nil
}
