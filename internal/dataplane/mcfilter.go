package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// The IPv4 source filters of the groups the namespace's devices joined,
// mirrored beside the groups (bpf/mcast.h): the kernel's input routing
// drops multicast from a source the group's filter leaves out
// (ip_check_mc_rcu), whatever the socket asked for it (a source-specific
// join, MCAST_JOIN_SOURCE_GROUP, a blocked source, IP_BLOCK_SOURCE, a
// filter set with MCAST_MSFILTER). IPv6 has none to mirror: ip6_mc_input
// asks ipv6_chk_mcast_addr without the source.
//
// The kernel keeps, per device and group, how many memberships are in
// INCLUDE mode and how many in EXCLUDE mode (sfcount), and per source how
// many of each mode name it (sf_count). A source passes when an INCLUDE
// membership names it or not every EXCLUDE membership excludes it; a
// source none names passes when some membership is in EXCLUDE mode.
// /proc/net/mcfilter lists the sources with their two counts,
// /proc/net/igmp the group's memberships (Users), but no file the number
// in each mode: it is worked out from the sources (each INCLUDE
// membership names at least one source, none names one twice), and where
// that leaves a verdict open the source passes (judged in INPUT, as
// without the mirror).

// SourceFiltersFile is where the kernel lists the IPv4 source filters
// (the agent watches it for changes, which have no notification).
const SourceFiltersFile = "/proc/net/mcfilter"

// mcfilterFile is the file read for them.
var mcfilterFile = SourceFiltersFile

// mcKeySrc4 is the high half of xfw_ifinfo's source keys (bpf/mcast.h),
// and mcFilterMax bounds the filter numbers added to it.
const (
	mcKeySrc4   = 0xf0000000
	mcFilterMax = 0xffffffff - mcKeySrc4
)

// mcUnlisted is an IPv4 group value's flag: the sources its filter does
// not list pass (bpf/mcast.h XFW_MC_UNLISTED).
const mcUnlisted = 1

// mcAllHosts is 224.0.0.1, which the kernel joins itself on every device
// up in EXCLUDE mode with no source (ip_mc_up), so every source passes;
// its leave at a device's down does not count that membership's mode out
// (ip_mc_dec_group), so Users does not tell the modes apart there.
const mcAllHosts = 0xe0000001

// mcDevGroup names an IPv4 group on a device (the group in host order).
type mcDevGroup struct {
	dev   int
	group uint32
}

// mcSource is a line of /proc/net/mcfilter: a source (host order) and
// how many INCLUDE and EXCLUDE memberships of its group name it.
type mcSource struct {
	addr     uint32
	inc, exc uint64
}

// parseMcfilter reads /proc/net/mcfilter's text: a heading, then a line
// per device, group and source ("  2 eth0   0xef010102 0x0a000102      1      0").
func parseMcfilter(text string) (map[mcDevGroup][]mcSource, error) {
	out := map[mcDevGroup][]mcSource{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) == 0 {
			continue // the heading
		}
		if len(f) != 6 {
			return nil, fmt.Errorf("%s line %d: %q: want 6 fields", mcfilterFile, n, sc.Text())
		}
		dev, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: device index %q: %w", mcfilterFile, n, f[0], err)
		}
		var v [4]uint64
		for i, s := range []string{f[2], f[3], f[4], f[5]} {
			bits := 64
			if i < 2 {
				bits = 32
			}
			if v[i], err = strconv.ParseUint(s, 0, bits); err != nil {
				return nil, fmt.Errorf("%s line %d: %q: %w", mcfilterFile, n, s, err)
			}
		}
		k := mcDevGroup{dev, uint32(v[0])}
		out[k] = append(out[k], mcSource{addr: uint32(v[1]), inc: v[2], exc: v[3]})
	}
	return out, sc.Err()
}

// mcFilter is what the data plane needs of a group's source filter: the
// verdict of the sources it does not list, and the sources whose verdict
// is the other.
type mcFilter struct {
	unlistedPass bool
	exceptions   []uint32
}

// sourceFilter works out a group's filter from its memberships (users)
// and its sources' counts, as ip_check_mc_rcu decides. It reports false
// when no source is dropped, or when the counts cannot tell whether
// the sources no one names pass (or contradict each other: read while
// they changed): then every source passes.
func sourceFilter(group uint32, users uint64, srcs []mcSource) (mcFilter, bool) {
	if group == mcAllHosts || len(srcs) == 0 {
		return mcFilter{}, false // no source filter: EXCLUDE {}
	}
	// The INCLUDE memberships: at least as many as name the source
	// most named by them, at most as many as name sources in all.
	var incMin, incMax, excMax uint64
	for _, s := range srcs {
		incMin = max(incMin, s.inc)
		incMax += s.inc
		excMax = max(excMax, s.exc)
	}
	incMax = min(incMax, users)
	if incMin > users || users-incMin < excMax {
		return mcFilter{}, false
	}
	// The EXCLUDE memberships (the kernel's sfcount[MCAST_EXCLUDE]).
	exclMin, exclMax := max(users-incMax, excMax), users-incMin
	var f mcFilter
	switch {
	case exclMin > 0:
		f.unlistedPass = true
	case exclMax == 0:
	default:
		return mcFilter{}, false
	}
	for _, s := range srcs {
		// Passes surely when an INCLUDE membership names it or fewer
		// than the fewest EXCLUDE memberships exclude it; dropped
		// surely when as many as the most do (and none includes it);
		// in between, it passes.
		drop := s.inc == 0 && s.exc >= exclMax
		if drop == f.unlistedPass {
			f.exceptions = append(f.exceptions, s.addr)
		}
	}
	if f.unlistedPass && len(f.exceptions) == 0 {
		return mcFilter{}, false
	}
	sort.Slice(f.exceptions, func(i, j int) bool { return f.exceptions[i] < f.exceptions[j] })
	return f, true
}

// mcNumbered is a group's source filter and its number in xfw_ifinfo's
// source keys (bpf/mcast.h; 0: none).
type mcNumbered struct {
	mcFilter
	n uint32
}

// filterNumbers works out the source filters of the groups of the
// devices in ok and numbers them: a group keeps the number its key
// holds when the verdict of its unlisted sources stays, so its source
// keys change in place; another gets the smallest number no key holds
// yet, its sources written under it before its group key names it.
func filterNumbers(ifinfo *ebpf.Map, jg joinedGroups, ok map[int]bool) (map[mcDevGroup]mcNumbered, error) {
	type held struct {
		n     uint32
		flags uint16
	}
	had := map[mcDevGroup]held{}
	used := map[uint32]bool{}
	var key uint64
	var val bpfIfInfo
	it := ifinfo.Iterate()
	for it.Next(&key, &val) {
		if hi := uint32(key >> 32); hi >= 0xe0000000 && hi < mcKeySrc4 && val.Ifindex != 0 {
			had[mcDevGroup{int(uint32(key)), hi}] = held{val.Ifindex, val.Flags}
			used[val.Ifindex] = true
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list the groups' source filters: %w", err)
	}
	var fresh []mcDevGroup
	out := map[mcDevGroup]mcNumbered{}
	for dg, srcs := range jg.sources {
		if !ok[dg.dev] {
			continue
		}
		f, filtered := sourceFilter(dg.group, jg.users[dg], srcs)
		if !filtered {
			continue
		}
		out[dg] = mcNumbered{mcFilter: f}
		if h, was := had[dg]; was && (h.flags&mcUnlisted != 0) == f.unlistedPass {
			out[dg] = mcNumbered{mcFilter: f, n: h.n}
		} else {
			fresh = append(fresh, dg)
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		return fresh[i].dev < fresh[j].dev || fresh[i].dev == fresh[j].dev && fresh[i].group < fresh[j].group
	})
	next := uint32(1)
	for _, dg := range fresh {
		for used[next] {
			next++
		}
		if next > mcFilterMax {
			return nil, errors.New("too many IPv4 source filters to number")
		}
		f := out[dg]
		f.n, used[next] = next, true
		out[dg] = f
	}
	return out, nil
}
