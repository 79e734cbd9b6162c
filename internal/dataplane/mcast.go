package dataplane

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The multicast groups the namespace's devices joined, mirrored into the
// data plane (bpf/mcast.h): the kernel's input routing drops multicast to
// a group the receiving device has not joined after PREROUTING, before
// INPUT (ip_check_mc_rcu, ipv6_chk_mcast_addr), and so does xfw's XDP
// hook. The groups are read from /proc/net/igmp and /proc/net/igmp6 at
// each sync and when the agent hears of a join or a leave (RefreshGroups),
// with the IPv4 groups' source filters (mcfilter.go).

// High halves of xfw_ifinfo's group keys (bpf/mcast.h).
const (
	mcKeyFirst     = 0x0f000000 // the lowest: interface keys stay below
	mcKeyMirrored4 = 0x0f000004
	mcKeyMirrored6 = 0x0f000006
	mcKeyGroup6    = 0x10000000
	// mcGroup6Max bounds the IPv6 group numbers (the key's high half
	// stays below IPv4's groups, 224.0.0.0 and up).
	mcGroup6Max = 0xe0000000 - mcKeyGroup6 - 1
)

// GroupsEnv is the environment variable that, "off" or "0" at a sync (or
// in the agent's environment), mirrors no groups: every device's
// multicast is then judged in INPUT whatever its group (for a device
// whose frames also feed macvlan or ipvlan devices of other namespaces,
// whose groups xfw does not see).
const GroupsEnv = "XFW_MCAST_GROUPS"

// Where the kernel lists the groups joined, per device.
var (
	igmpFile  = "/proc/net/igmp"
	igmp6File = "/proc/net/igmp6"
)

// joinedGroups are the groups each device joined: IPv4 groups in host
// order, IPv6 groups as addresses. A device is listed (with no groups,
// perhaps) when it has the family's configuration. With them, the IPv4
// groups' memberships (users) and source filters (sources: nil when
// they could not be read consistently, mcfilter.go).
type joinedGroups struct {
	v4      map[int][]uint32
	v6      map[int][][16]byte
	users   map[mcDevGroup]uint64
	sources map[mcDevGroup][]mcSource
}

// parseIGMP reads /proc/net/igmp's text: a line per device ("2\teth0 :
// 2 V3"), then a line per group it joined, the group as the hex of its
// network-order bytes read as a host-order number, and its memberships
// (Users), which it returns too.
func parseIGMP(text string) (map[int][]uint32, map[mcDevGroup]uint64, error) {
	out := map[int][]uint32{}
	users := map[mcDevGroup]uint64{}
	dev := -1
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		f := strings.Fields(line)
		if n == 1 || len(f) == 0 {
			continue // the heading
		}
		if !strings.HasPrefix(line, "\t") {
			idx, err := strconv.Atoi(f[0])
			if err != nil {
				return nil, nil, fmt.Errorf("%s line %d: device index %q: %w", igmpFile, n, f[0], err)
			}
			dev = idx
			out[dev] = []uint32{}
			continue
		}
		v, err := strconv.ParseUint(f[0], 16, 32)
		if err != nil || dev < 0 || len(f) < 2 {
			return nil, nil, fmt.Errorf("%s line %d: group %q: not a group of a device", igmpFile, n, f[0])
		}
		u, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%s line %d: users %q: %w", igmpFile, n, f[1], err)
		}
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], uint32(v))
		g := binary.BigEndian.Uint32(b[:])
		out[dev] = append(out[dev], g)
		users[mcDevGroup{dev, g}] = u
	}
	return out, users, sc.Err()
}

// parseIGMP6 reads /proc/net/igmp6's text: a line per group and device
// ("2 eth0 ff020000000000000000000000000001 1 0000000C 0").
func parseIGMP6(text string) (map[int][][16]byte, error) {
	out := map[int][][16]byte{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("%s line %d: %q: too few fields", igmp6File, n, sc.Text())
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: device index %q: %w", igmp6File, n, f[0], err)
		}
		var g [16]byte
		if b, err := hex.DecodeString(f[2]); err != nil || len(b) != 16 {
			return nil, fmt.Errorf("%s line %d: group %q: not an IPv6 address", igmp6File, n, f[2])
		} else {
			copy(g[:], b)
		}
		out[idx] = append(out[idx], g)
	}
	return out, sc.Err()
}

// mcReadTries is how many times the IPv4 groups and their source
// filters are read for a pair that did not change in between.
const mcReadTries = 4

// readProc returns a file's text, through a kept descriptor in a kept
// session (readKeptFile); a missing file (no IPv6) has none.
func readProc(name string) (string, error) {
	b, err := readKeptFile(name, procNetReadSize)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the groups joined: %w", err)
	}
	return string(b), nil
}

// readIPv4Groups reads /proc/net/igmp and /proc/net/mcfilter until two
// readings in a row agree (a membership's counts are in both), at most
// mcReadTries times; it returns their text, and whether they agreed. A
// first reading that lists no source filter needs no second: there is
// nothing for the counts to agree with (the usual case, read again by
// every command's apply otherwise).
func readIPv4Groups() (igmp, mcf string, agreed bool, err error) {
	for i := 0; i < mcReadTries; i++ {
		a, err := readProc(igmpFile)
		if err != nil {
			return "", "", false, err
		}
		f, err := readProc(mcfilterFile)
		if err != nil {
			return "", "", false, err
		}
		if (i > 0 && a == igmp && f == mcf) || (i == 0 && !listsSourceFilter(f)) {
			return a, f, true, nil
		}
		igmp, mcf = a, f
	}
	return igmp, mcf, false, nil
}

// listsSourceFilter reports whether /proc/net/mcfilter's text has a line
// past its heading.
func listsSourceFilter(mcf string) bool {
	_, rest, _ := strings.Cut(mcf, "\n")
	return strings.TrimSpace(rest) != ""
}

// readJoinedGroups reads the files; a missing one (no IPv6) lists no
// device of its family. It returns their text too.
func readJoinedGroups() (joinedGroups, string, error) {
	var jg joinedGroups
	t4, mcf, agreed, err := readIPv4Groups()
	if err != nil {
		return jg, "", err
	}
	if jg.v4, jg.users, err = parseIGMP(t4); err != nil {
		return jg, "", err
	}
	if agreed {
		if jg.sources, err = parseMcfilter(mcf); err != nil {
			return jg, "", err
		}
	}
	t6, err := readProc(igmp6File)
	if err != nil {
		return jg, "", err
	}
	jg.v6, err = parseIGMP6(t6)
	return jg, fmt.Sprintf("%s\x00%s\x00%v\x00%s", t4, mcf, agreed, t6), err
}

// groupsFilled is what fillGroups last wrote, as the text of its inputs
// and the maps' ids: the same inputs into the same maps need no refill (a
// served command would otherwise rewrite every group key).
var groupsFilled struct {
	sync.Mutex
	key string
}

// groupsKey describes fillGroups' inputs; "" when they cannot be told
// (a map without an id, or IPv4 multicast routing on, whose devices'
// sysctls are read as they are needed).
func groupsKey(ifinfo, local6 *ebpf.Map, files string, ok map[int]bool, names map[int]string, routing mcRouting) string {
	if routing.all4 {
		return ""
	}
	var ids []ebpf.MapID
	for _, m := range []*ebpf.Map{ifinfo, local6} {
		// mapFacts, not Map.Info, which reads /proc/self/fdinfo too.
		_, id, err := mapFacts(m)
		if err != nil || id == 0 {
			return ""
		}
		ids = append(ids, id)
	}
	var devs []string
	for dev := range ok {
		devs = append(devs, fmt.Sprintf("%d=%s", dev, names[dev]))
	}
	sort.Strings(devs)
	return fmt.Sprintf("%v|%v|%s|%s", ids, routing.all6, strings.Join(devs, ","), files)
}

// mcStackedTypes are the devices that take their frames from a lower
// device's receive path: dropping a frame there at XDP would take it
// from them too.
var mcStackedTypes = map[string]bool{"macvlan": true, "macvtap": true, "ipvlan": true, "ipvtap": true, "macsec": true}

// mcMirrorable returns the devices whose groups the data plane may judge
// by: not loopback (its packets were routed when sent), not a bridge nor
// a bridge's, bond's or other master's port (a dropped frame would not be
// forwarded either), not the lower device of a macvlan, ipvlan or macsec
// device. The others keep every group taken as joined.
func mcMirrorable(links []netlink.Link) map[int]bool {
	stacked := map[int]bool{}
	for _, l := range links {
		if a := l.Attrs(); mcStackedTypes[l.Type()] && a.ParentIndex != 0 {
			stacked[a.ParentIndex] = true
		}
	}
	out := map[int]bool{}
	for _, l := range links {
		a := l.Attrs()
		if a.Index == 1 || l.Type() == "bridge" || a.MasterIndex != 0 || stacked[a.Index] {
			continue
		}
		out[a.Index] = true
	}
	return out
}

// mcRouting tells where multicast routing (a daemon holding the kernel's
// multicast routing socket) forwards: in IPv4 from a device whose and
// all's mc_forwarding are on (IN_DEV_MFORWARD), in IPv6 from any device
// when all's is. The kernel then hands such packets to its multicast
// router, which xfw does not follow: that family's groups there are not
// mirrored. A sysctl that cannot be read counts as on.
type mcRouting struct {
	all4, all6 bool
}

// readMcRouting reads all's mc_forwarding of both families.
func readMcRouting() mcRouting {
	on := func(name string) bool {
		n, err := readSysctlInt(name)
		return err != nil || n != 0
	}
	return mcRouting{all4: on("net/ipv4/conf/all/mc_forwarding"), all6: on("net/ipv6/conf/all/mc_forwarding")}
}

// forwards reports whether multicast routing forwards family fam's
// packets from device dev.
func (r mcRouting) forwards(fam int, dev string) bool {
	if fam == 6 {
		return r.all6
	}
	if !r.all4 {
		return false
	}
	n, err := readSysctlInt("net/ipv4/conf/" + dev + "/mc_forwarding")
	return err != nil || n != 0
}

// mcEntry is one key of xfw_ifinfo's group keys.
func mcEntry(hi uint32, ifindex int) uint64 { return uint64(hi)<<32 | uint64(uint32(ifindex)) }

// group6Numbers returns the numbers of the IPv6 groups in want: those
// local6's group entries hold already, the smallest unused for the
// others (a group keeps its number from one refresh to the next, so that
// no packet meets a number its group's keys do not have yet).
func group6Numbers(local6 *ebpf.Map, want map[[16]byte]bool) (map[[16]byte]uint32, error) {
	nums := map[[16]byte]uint32{}
	used := map[uint32]bool{}
	var k lpmKey6
	var v localVal
	it := local6.Iterate()
	for it.Next(&k, &v) {
		if v.Group != 0 && k.Prefixlen == 128 && want[k.Addr] {
			nums[k.Addr] = v.Group
			used[v.Group] = true
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list the IPv6 groups' numbers: %w", err)
	}
	var fresh [][16]byte
	for g := range want {
		if _, ok := nums[g]; !ok {
			fresh = append(fresh, g)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return string(fresh[i][:]) < string(fresh[j][:]) })
	next := uint32(1)
	for _, g := range fresh {
		for used[next] {
			next++
		}
		if next > mcGroup6Max {
			return nil, errors.New("too many IPv6 groups to number")
		}
		nums[g], used[next] = next, true
	}
	return nums, nil
}

// fillGroups mirrors the groups the namespace's devices joined into the
// running data plane: the IPv6 groups' numbers into local6, the devices'
// groups and which devices are mirrored into ifinfo (bpf/mcast.h). A
// device whose groups do not fit in ifinfo beside the interfaces is left
// unmirrored (its groups taken as joined).
func fillGroups(ifinfo, local6 *ebpf.Map, links []netlink.Link) error {
	if ifinfo == nil || local6 == nil {
		return errors.New("the running program lacks map xfw_ifinfo or xfw_local6")
	}
	jg, files, err := readJoinedGroups()
	if err != nil {
		return err
	}
	ok := mcMirrorable(links)
	if v := os.Getenv(GroupsEnv); v == "off" || v == "0" {
		ok = nil
	}
	routing := readMcRouting()
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	key := groupsKey(ifinfo, local6, files, ok, names, routing)
	groupsFilled.Lock()
	defer groupsFilled.Unlock()
	if key != "" && key == groupsFilled.key {
		return nil
	}
	groupsFilled.key = "" // until this fill is done
	if err := writeGroups(ifinfo, local6, jg, ok, names, routing); err != nil {
		return err
	}
	groupsFilled.key = key
	return nil
}

// writeGroups writes what fillGroups read into the maps.
func writeGroups(ifinfo, local6 *ebpf.Map, jg joinedGroups, ok map[int]bool, names map[int]string, routing mcRouting) error {
	want6 := map[[16]byte]bool{}
	for dev, gs := range jg.v6 {
		for _, g := range gs {
			if ok[dev] {
				want6[g] = true
			}
		}
	}
	nums, err := group6Numbers(local6, want6)
	if err != nil {
		return err
	}
	// The IPv6 groups' numbers first: a key below may name them.
	keep6 := map[lpmKey6]bool{}
	for g, n := range nums {
		k := lpmKey6{Prefixlen: 128, Addr: g}
		if err := local6.Put(k, localVal{Type: unix.RTN_MULTICAST, Group: n}); err != nil {
			return fmt.Errorf("record IPv6 group %x: %w", g, err)
		}
		keep6[k] = true
	}
	// Room: the map's entries that are not group keys stay.
	room := int(ifinfo.MaxEntries())
	var key uint64
	var val bpfIfInfo
	it := ifinfo.Iterate()
	for it.Next(&key, &val) {
		if key>>32 < mcKeyFirst {
			room--
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the interface facts: %w", err)
	}
	filters, err := filterNumbers(ifinfo, jg, ok)
	if err != nil {
		return err
	}
	keep := map[uint64]bool{}
	var devs []int
	for dev := range ok {
		devs = append(devs, dev)
	}
	sort.Ints(devs)
	for _, dev := range devs {
		var keys []mcKeyVal
		if gs, listed := jg.v4[dev]; listed && !routing.forwards(4, names[dev]) {
			for _, g := range gs {
				keys = append(keys, groupKeys4(dev, g, filters[mcDevGroup{dev, g}])...)
			}
			keys = append(keys, mcKeyVal{key: mcEntry(mcKeyMirrored4, dev)}) // last: after its groups
		}
		if gs, listed := jg.v6[dev]; listed && !routing.forwards(6, names[dev]) {
			for _, g := range gs {
				keys = append(keys, mcKeyVal{key: mcEntry(mcKeyGroup6+nums[g], dev)})
			}
			keys = append(keys, mcKeyVal{key: mcEntry(mcKeyMirrored6, dev)})
		}
		if len(keys) > room {
			continue
		}
		room -= len(keys)
		for _, kv := range keys {
			if err := ifinfo.Put(kv.key, kv.val); err != nil {
				return fmt.Errorf("record the groups of interface %s: %w", names[dev], err)
			}
			keep[kv.key] = true
		}
	}
	return pruneGroups(ifinfo, local6, keep, keep6)
}

// mcKeyVal is a group key of ifinfo and its value.
type mcKeyVal struct {
	key uint64
	val bpfIfInfo
}

// groupKeys4 returns the keys of IPv4 group g on device dev: its source
// filter's sources first (a group key may name them), then the group's,
// whose value names the filter (bpf/mcast.h).
func groupKeys4(dev int, g uint32, f mcNumbered) []mcKeyVal {
	var out []mcKeyVal
	val := bpfIfInfo{}
	if f.n != 0 {
		for _, src := range f.exceptions {
			out = append(out, mcKeyVal{key: uint64(mcKeySrc4+f.n)<<32 | uint64(src)})
		}
		val.Ifindex = f.n
		if f.unlistedPass {
			val.Flags = mcUnlisted
		}
	}
	return append(out, mcKeyVal{key: mcEntry(g, dev), val: val})
}

// pruneGroups deletes the group keys of ifinfo and the group entries of
// local6 that keep and keep6 lack (devices gone or no longer mirrored,
// groups left).
func pruneGroups(ifinfo, local6 *ebpf.Map, keep map[uint64]bool, keep6 map[lpmKey6]bool) error {
	var stale []uint64
	var key uint64
	var val bpfIfInfo
	it := ifinfo.Iterate()
	for it.Next(&key, &val) {
		if key>>32 >= mcKeyFirst && !keep[key] {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the interface facts: %w", err)
	}
	// A device's mark first: it then takes every group as joined, not
	// one it left or one whose key is gone.
	mark := func(k uint64) bool { return k>>32 == mcKeyMirrored4 || k>>32 == mcKeyMirrored6 }
	sort.Slice(stale, func(i, j int) bool { return mark(stale[i]) && !mark(stale[j]) })
	for _, k := range stale {
		if err := ifinfo.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forget a group left: %w", err)
		}
	}
	var stale6 []lpmKey6
	var k6 lpmKey6
	var v6 localVal
	it6 := local6.Iterate()
	for it6.Next(&k6, &v6) {
		if v6.Group != 0 && !keep6[k6] {
			stale6 = append(stale6, k6)
		}
	}
	if err := it6.Err(); err != nil {
		return fmt.Errorf("list the IPv6 groups' numbers: %w", err)
	}
	for _, k := range stale6 {
		if err := local6.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forget an IPv6 group: %w", err)
		}
	}
	return nil
}

// isGroupKey reports whether key of xfw_ifinfo is one of the group keys,
// which fillGroups owns: the refill of the interface facts (fillIfInfo)
// leaves them.
func isGroupKey(key uint64) bool { return key>>32 >= mcKeyFirst }

// keepGroupEntries adds to keep6 local6's IPv6 group entries, which
// fillGroups owns: the refill of the local table (fillLocal) leaves them.
func keepGroupEntries(local6 *ebpf.Map, keep6 map[lpmKey6]bool) error {
	var k lpmKey6
	var v localVal
	it := local6.Iterate()
	for it.Next(&k, &v) {
		if v.Group != 0 {
			keep6[k] = true
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the IPv6 groups' numbers: %w", err)
	}
	return nil
}

// fillGroupsNow mirrors the groups into cur's maps (fillGroups).
func fillGroupsNow(cur *state) error {
	links, _, err := netFacts.linkList()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	return fillGroups(cur.maps["xfw_ifinfo"], cur.maps["xfw_local6"], links)
}

// RefreshGroups mirrors the groups the namespace's devices joined into
// the running data plane at once (the agent, told of a join or a leave):
// a group joined since the last sync is no longer dropped, one left no
// longer judged by INPUT.
func RefreshGroups() error {
	cur, err := currentOwn()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	return fillGroupsNow(cur)
}
