package dataplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// XDPMode selects how the ingress program is attached.
type XDPMode string

const (
	// XDPAuto tries the driver's native XDP and falls back to generic.
	XDPAuto XDPMode = "auto"
	// XDPNative requires the driver's native XDP.
	XDPNative XDPMode = "native"
	// XDPGeneric uses the kernel's generic (skb) XDP.
	XDPGeneric XDPMode = "generic"
	// XDPVethGeneric is XDPAuto except on veth devices, which get generic
	// XDP: there the stack builds an skb for every packet passed anyway,
	// and the program running on it costs packets delivered or forwarded
	// by the stack less than native XDP on the veth's frames
	// (docs/benchmarks.md, "INPUT at 0–100 rules"), at the price of the
	// fast path's XDP frames (FORWARD, docs/design.md).
	XDPVethGeneric XDPMode = "veth-generic"
)

// ParseXDPMode validates a mode name.
func ParseXDPMode(s string) (XDPMode, error) {
	switch XDPMode(s) {
	case XDPAuto, XDPNative, XDPGeneric, XDPVethGeneric:
		return XDPMode(s), nil
	}
	return "", fmt.Errorf("unknown XDP mode %q (auto, native, generic or veth-generic)", s)
}

// AttachOptions tune attachment.
type AttachOptions struct {
	Mode XDPMode
}

// Interface is a device xfw attaches to.
type Interface struct {
	Index  int
	Name   string
	Group  uint32 // the device's group (-m devgroup)
	MAC    net.HardwareAddr
	VLAN   int // VLAN id of a VLAN device
	Parent int // its parent's ifindex
	// BridgePort: enslaved to a bridge, where xfw runs instead (bridge.go).
	BridgePort bool
	// PendingVeth: a down veth whose peer is here, not attached yet
	// (bridge.go).
	PendingVeth bool
	// IsBridge: a bridge device; Master: a port's bridge (bridge.go).
	IsBridge bool
	Master   int
	link     netlink.Link
}

// listInterfaces returns the namespace's devices, refusing kinds whose
// traffic xfw cannot parse (it would go unfiltered).
func listInterfaces() ([]Interface, error) {
	links, kept, err := netFacts.linkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []Interface
	byIndex := linksByIndex(links)
	for _, l := range links {
		a := l.Attrs()
		if a.EncapType != "ether" && a.EncapType != "loopback" {
			return nil, fmt.Errorf("interface %s (%s, link type %s) has no Ethernet header: xfw cannot filter it, and will not leave it unfiltered; remove it or keep it out of this namespace", a.Name, l.Type(), a.EncapType)
		}
		ifc := Interface{Index: a.Index, Name: a.Name, Group: a.Group, MAC: a.HardwareAddr, BridgePort: isBridgePort(l, byIndex),
			PendingVeth: isPendingVeth(l, byIndex), IsBridge: l.Type() == "bridge", Master: a.MasterIndex, link: l}
		if v, ok := l.(*netlink.Vlan); ok {
			ifc.VLAN = v.VlanId
			ifc.Parent = a.ParentIndex
		}
		out = append(out, ifc)
	}
	if kept {
		if err := refreshUnannounced(out); err != nil {
			return nil, fmt.Errorf("list interfaces: %w", err)
		}
	}
	return out, nil
}

// CompilerInterfaces lists the namespace's devices for the compiler.
func CompilerInterfaces() ([]compiler.Interface, error) {
	ifs, err := listInterfaces()
	if err != nil {
		return nil, err
	}
	out := make([]compiler.Interface, len(ifs))
	for i, ifc := range ifs {
		out[i] = compiler.Interface{Index: uint32(ifc.Index), Name: ifc.Name, Group: ifc.Group}
	}
	return out, nil
}

// fillIfInfo records each device's MAC (to tell frames for this host),
// the VLAN devices' (parent, vid) keys, the XDP fast path's targets
// (fastpath.go), the sysctls of the device netfilter sees that the checks
// before any chain follow (insysctl.go) and the devices' IPv6 hop limits
// (REJECT's replies).
func fillIfInfo(m *ebpf.Map, ifaces []Interface) (err error) {
	keep := map[uint64]bool{}
	t := time.Now()
	brnf := brNFFlags()
	t = TraceSince("ifinfo: br_netfilter", t)
	fast := decideFastPathKept(ifaces)
	t = TraceSince("ifinfo: fast path decided", t)
	names := make(map[uint32]string, len(ifaces))
	list := make([]string, 0, len(ifaces))
	for _, ifc := range ifaces {
		names[uint32(ifc.Index)] = ifc.Name
		list = append(list, ifc.Name)
	}
	insys, err := inputSysctlFlags(list)
	if err != nil {
		return err
	}
	t = TraceSince("ifinfo: input sysctls", t)
	defer TraceSince("ifinfo: hop limits, written", t)
	for _, ifc := range ifaces {
		var v bpfIfInfo
		copy(v.MAC[:], ifc.MAC)
		v.Flags, v.Ifindex = bridgeInfo(ifc, brnf)
		v.Flags |= fast.fastFlags(ifc)
		// The sysctls of the device netfilter sees (a port's bridge).
		v.Flags |= rpfNoAddr(insys[names[v.Ifindex]], names[v.Ifindex])
		if v.HopLimit6, err = readHopLimit6(ifc.Name); err != nil {
			return err
		}
		key := uint64(ifc.Index)
		if ifc.VLAN != 0 {
			key = uint64(ifc.Parent) | uint64(ifc.VLAN)<<32
		}
		if err := m.Put(key, v); err != nil {
			return fmt.Errorf("record interface %s: %w", ifc.Name, err)
		}
		keep[key] = true
		if ifc.VLAN != 0 {
			// The VLAN device itself sees untagged frames too.
			if err := m.Put(uint64(ifc.Index), v); err != nil {
				return fmt.Errorf("record interface %s: %w", ifc.Name, err)
			}
			keep[uint64(ifc.Index)] = true
		}
	}
	// The group keys are fillGroups': the prune leaves them.
	if _, err := pruneMapFunc(m, func(k uint64) bool { return keep[k] || isGroupKey(k) }); err != nil {
		return fmt.Errorf("forget removed interfaces: %w", err)
	}
	return nil
}

// readHopLimit6 returns net.ipv6.conf.<dev>.hop_limit, the hop limit of
// the host's IPv6 packets leaving by dev when their route has no hop
// limit metric (ip6_dst_hoplimit), or 0 when dev has no IPv6 (no such
// sysctl).
func readHopLimit6(dev string) (uint8, error) {
	n, err := readSysctlInt("net/ipv6/conf/" + dev + "/hop_limit")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("interface %s: %w", dev, err)
	}
	if n < 1 || n > 255 {
		return 0, fmt.Errorf("interface %s: hop_limit %d out of range", dev, n)
	}
	return uint8(n), nil
}

// ifinfoGenKey is XFW_BANK_IFGEN: the entry of map xfw_bank holding the
// interface facts' generation, which tags the XDP hook's cached lookups
// of xfw_ifinfo (bpf/ifinfo_cache.h).
const ifinfoGenKey = 2

// bumpIfinfoGen moves the interface facts' generation on after a refill of
// xfw_ifinfo (fillIfInfo): every CPU's cached lookup is then stale.
func bumpIfinfoGen(bank *ebpf.Map) error {
	if bank == nil {
		return errors.New("the running program lacks map xfw_bank")
	}
	var gen uint32
	if err := bank.Lookup(uint32(ifinfoGenKey), &gen); err != nil {
		return fmt.Errorf("read the interface facts' generation: %w", err)
	}
	if err := bank.Put(uint32(ifinfoGenKey), gen+1); err != nil {
		return fmt.Errorf("renew the interface facts' generation: %w", err)
	}
	return nil
}

// pruneMap deletes the keys of m that keep lacks. The maps of interface
// facts outlive rule changes (the programs, and their maps, are loaded once
// per namespace), so the facts of removed interfaces and addresses must be
// deleted, not just the current ones written.
func pruneMap[K comparable](m *ebpf.Map, keep map[K]bool) (int, error) {
	return pruneMapFunc(m, func(k K) bool { return keep[k] })
}

// pruneMapFunc deletes the keys of m for which keep is false.
func pruneMapFunc[K comparable](m *ebpf.Map, keep func(K) bool) (int, error) {
	var stale []K
	var cur, next K
	err := m.NextKey(nil, &next)
	for err == nil {
		if !keep(next) {
			stale = append(stale, next)
		}
		cur = next
		err = m.NextKey(cur, &next)
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return 0, fmt.Errorf("list %s: %w", m.String(), err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, fmt.Errorf("delete from %s: %w", m.String(), err)
		}
	}
	return len(stale), nil
}

// ErrForeignProgram reports an interface that runs another XDP program
// than xfw's: xfw does not replace it (that would silently remove someone
// else's filter or load balancer), and does not load a ruleset it could
// not enforce there.
var ErrForeignProgram = errors.New("runs another XDP program")

// checkForeignXDP returns an error naming every interface whose XDP hook
// holds a program that is not xfw's (any build). ours is the running XDP
// program's id (0: none), recognised without asking the kernel: a ruleset
// change pays no system call per interface that runs it.
func checkForeignXDP(ifaces []Interface, ours ebpf.ProgramID) error {
	var errs []error
	for _, ifc := range ifaces {
		x := ifc.link.Attrs().Xdp
		if x == nil || !x.Attached || x.ProgId == 0 || ebpf.ProgramID(x.ProgId) == ours {
			continue
		}
		name := programName(ebpf.ProgramID(x.ProgId))
		if name == xdpProgName || name == "" { // "": detached meanwhile
			continue
		}
		errs = append(errs, fmt.Errorf("interface %s %w (id %d, name %q): xfw will not replace it; detach it, or chain both programs with a dispatcher (docs/install.md, \"Coexistence\")", ifc.Name, ErrForeignProgram, x.ProgId, name))
	}
	return errors.Join(errs...)
}

// attachMissing attaches the namespace's programs to every interface that
// does not run them yet (new interfaces, or the first load); interfaces
// already running them are left alone.
//
// During a takeover it attaches nothing: the takeover swaps the programs in
// once every family's ruleset is in them (takeover.go).
func attachMissing(cur *state, ifaces []Interface, opts AttachOptions) error {
	if attachHeld.Load() {
		return nil
	}
	ifaces, ports, err := splitPorts(ifaces)
	if err != nil {
		return err
	}
	if cur.xdp == nil || cur.tc == nil || cur.tcIn == nil {
		return errors.New("xfw's entry programs are not loaded")
	}
	xdpID, tcID, err := cur.programIDs()
	if err != nil {
		return err
	}
	tcInID, err := cur.ingressID()
	if err != nil {
		return err
	}
	// A bridge port runs the TC programs, not XDP: frames bridged to it,
	// and the input port of what it passes up (bridge.go).
	isPort := map[int]bool{}
	for _, ifc := range ports {
		isPort[ifc.Index] = true
	}
	var attached []Interface
	for _, ifc := range append(ifaces, ports...) {
		did, err := attachOne(cur, ifc, isPort[ifc.Index], xdpID, tcID, tcInID, opts.Mode)
		if err != nil {
			if vanished(ifc) {
				continue // deleted since it was listed: nothing left to protect
			}
			return err
		}
		if did && !isPort[ifc.Index] {
			attached = append(attached, ifc)
		}
	}
	return admitAttached(attached, xdpID)
}

// attachOne attaches to ifc each of the namespace's programs (ids xdpID,
// tcID, tcInID) it does not run yet; a bridge port (port) gets no XDP. It
// reports whether it attached any.
func attachOne(cur *state, ifc Interface, port bool, xdpID, tcID, tcInID ebpf.ProgramID, mode XDPMode) (did bool, err error) {
	if x := ifc.link.Attrs().Xdp; !port && (x == nil || !x.Attached || ebpf.ProgramID(x.ProgId) != xdpID) {
		if err := attachXDP(cur.xdp, ifc, mode); err != nil {
			return did, err
		}
		did = true
	}
	if !tcxAttached(ifc, egressHook, tcID) {
		if err := attachTCX(cur.tc, ifc, egressHook); err != nil {
			return did, err
		}
		did = true
	}
	if !tcxAttached(ifc, ingressHook, tcInID) {
		if err := attachTCX(cur.tcIn, ifc, ingressHook); err != nil {
			return did, err
		}
		did = true
	}
	return did, nil
}

// vanished reports whether ifc has been deleted since it was listed (a
// container's veth removed while a command runs): an attach to it fails,
// and there is nothing left on it to protect. Its index is not given to
// another device soon (the kernel allocates indexes cyclically), and a
// device created meanwhile is attached by the next sync (the agent's
// guard drops its traffic until then).
func vanished(ifc Interface) bool {
	_, err := netlink.LinkByIndex(ifc.Index)
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

func attachXDP(prog *ebpf.Program, ifc Interface, mode XDPMode) error {
	// Keep the mode of a program already attached: a replacement must use
	// the same one.
	x := ifc.link.Attrs().Xdp
	if x != nil && x.Attached && x.ProgId != 0 {
		switch x.AttachMode {
		case nl.XDP_ATTACHED_DRV:
			mode = XDPNative
		case nl.XDP_ATTACHED_SKB:
			mode = XDPGeneric
		}
	}
	if mode == "" {
		mode = XDPAuto
	}
	if mode == XDPVethGeneric {
		mode = XDPAuto
		if ifc.link.Type() == "veth" {
			mode = XDPGeneric
		}
	}
	try := func(flags int) error {
		return netlink.LinkSetXdpFdWithFlags(ifc.link, prog.FD(), flags)
	}
	var err error
	switch mode {
	case XDPNative:
		err = try(nl.XDP_FLAGS_DRV_MODE)
	case XDPGeneric:
		err = try(nl.XDP_FLAGS_SKB_MODE)
	default:
		if ifc.Name == "lo" {
			err = try(nl.XDP_FLAGS_SKB_MODE)
		} else if err = try(nl.XDP_FLAGS_DRV_MODE); err != nil {
			err = try(nl.XDP_FLAGS_SKB_MODE)
		}
	}
	if err != nil {
		return fmt.Errorf("attach XDP (%s) to %s: %w", mode, ifc.Name, err)
	}
	return nil
}

// tcxHook is one of xfw's TCX hooks: where its program is attached, the
// program's name, and whether it goes first or last there.
type tcxHook struct {
	attach ebpf.AttachType
	prog   string
	label  string
	first  bool
}

var (
	// egressHook judges OUTPUT; it runs last, after the others' programs.
	egressHook = tcxHook{attach: ebpf.AttachTCXEgress, prog: tcProgName, label: "TCX egress"}
	// ingressHook sends REJECT replies; it runs first, so that no other
	// program sees a reply frame as a received packet.
	ingressHook = tcxHook{attach: ebpf.AttachTCXIngress, prog: tcInProgName, label: "TCX ingress", first: true}
)

// tcxPrograms reports whether xfw's program of hook runs on ifc and names
// the others there.
func tcxPrograms(ifc Interface, hook tcxHook) (ours bool, others []string) {
	ids, err := tcxProgramIDs(ifc.Index, hook.attach)
	if err != nil {
		return false, nil
	}
	for _, id := range ids {
		name := programName(id)
		if name == hook.prog {
			ours = true
			continue
		}
		others = append(others, fmt.Sprintf("%q (id %d)", name, id))
	}
	return ours, others
}

// ourTC returns the id of xfw's egress program attached to ifc, or 0.
func ourTC(ifc Interface) (ebpf.ProgramID, error) {
	return ourTCX(ifc, egressHook)
}

// ourTCX returns the id of xfw's program of hook attached to ifc, or 0.
func ourTCX(ifc Interface, hook tcxHook) (ebpf.ProgramID, error) {
	ids, err := tcxProgramIDs(ifc.Index, hook.attach)
	if err != nil {
		return 0, fmt.Errorf("query %s of %s: %w", hook.label, ifc.Name, err)
	}
	for _, id := range ids {
		if programName(id) == hook.prog {
			return id, nil
		}
	}
	return 0, nil
}

// tcxAttached reports whether the program of id is attached to ifc's hook
// (a query, without opening the programs as ourTCX does).
func tcxAttached(ifc Interface, hook tcxHook, id ebpf.ProgramID) bool {
	ids, err := tcxProgramIDs(ifc.Index, hook.attach)
	return err == nil && slices.Contains(ids, id)
}

// attachTCX attaches prog to ifc's hook, replacing xfw's program there.
func attachTCX(prog *ebpf.Program, ifc Interface, hook tcxHook) error {
	old, err := ourTCX(ifc, hook)
	if err != nil {
		return err
	}
	opts := link.RawAttachProgramOptions{Target: ifc.Index, Program: prog, Attach: hook.attach}
	switch {
	case old != 0:
		// Replace by file descriptor: the ID form of the anchor is
		// refused for program (non-link) attachments.
		oldProg, err := ebpf.NewProgramFromID(old)
		if err != nil {
			return fmt.Errorf("open running %s program of %s: %w", hook.label, ifc.Name, err)
		}
		defer oldProg.Close()
		opts.Anchor = link.ReplaceProgram(oldProg)
	case hook.first:
		opts.Anchor = link.Head()
	default:
		opts.Anchor = link.Tail()
	}
	if err := link.RawAttachProgram(opts); err != nil {
		return fmt.Errorf("attach %s to %s: %w", hook.label, ifc.Name, err)
	}
	return nil
}

// detachTCX removes xfw's program of hook from ifc.
func detachTCX(ifc Interface, hook tcxHook) error {
	id, err := ourTCX(ifc, hook)
	if err != nil || id == 0 {
		return err
	}
	prog, err := ebpf.NewProgramFromID(id)
	if err == nil {
		err = link.RawDetachProgram(link.RawDetachProgramOptions{Target: ifc.Index, Program: prog, Attach: hook.attach})
		prog.Close()
	}
	if err != nil {
		return fmt.Errorf("detach %s from %s: %w", hook.label, ifc.Name, err)
	}
	return nil
}

// detachInterface removes xfw's programs from ifc (others' are left alone).
func detachInterface(ifc Interface) error {
	var errs []error
	if err := detachXDP(ifc); err != nil {
		errs = append(errs, err)
	}
	for _, hook := range []tcxHook{egressHook, ingressHook} {
		if err := detachTCX(ifc, hook); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// detachXDP removes xfw's XDP program from ifc, if it runs there.
func detachXDP(ifc Interface) error {
	x := ifc.link.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 || programName(ebpf.ProgramID(x.ProgId)) != xdpProgName {
		return nil
	}
	flags := 0
	switch x.AttachMode {
	case nl.XDP_ATTACHED_DRV:
		flags = nl.XDP_FLAGS_DRV_MODE
	case nl.XDP_ATTACHED_SKB:
		flags = nl.XDP_FLAGS_SKB_MODE
	}
	if err := netlink.LinkSetXdpFdWithFlags(ifc.link, -1, flags); err != nil {
		return fmt.Errorf("detach XDP from %s: %w", ifc.Name, err)
	}
	return nil
}

// Route types of the local table that mean "for this host".
var localRouteTypes = map[int]bool{
	unix.RTN_LOCAL: true, unix.RTN_BROADCAST: true, unix.RTN_ANYCAST: true, unix.RTN_MULTICAST: true,
}

// lpmKey4 and lpmKey6 mirror struct xfw_lpm4_key / xfw_lpm6_key.
type lpmKey4 struct {
	Prefixlen uint32
	Addr      [4]byte
}

type lpmKey6 struct {
	Prefixlen uint32
	Addr      [16]byte
}

// localVal mirrors struct xfw_local_val: a local-table route's type and
// device (0: the type depends on no device), what -m addrtype sees where
// it differs from the type (IPv6: at6Local, at6Anycast; IPv4: at4Unicast;
// hostroutes.go), and an IPv6 group's number (mcast.go; 0 for the table's
// routes).
type localVal struct {
	Type    uint8
	AT      uint8
	Pad     [2]uint8
	Ifindex uint32
	Group   uint32
}

// localRoute is one entry of the data plane's local table.
type localRoute struct {
	dst *net.IPNet
	val localVal
}

// localRoutes returns the namespace's local routing table of family fam
// as the data plane keeps it (hostEntries), from the dumped tables routes:
// this host's routes (local, broadcast, anycast, multicast) with their
// type and device, the table's other routes as RTN_UNICAST (an address
// they cover is not this host's, and -m addrtype calls it UNICAST), the
// main table's routes the kernel's lookups see through the local table,
// and for IPv4 the addresses the kernel delivers locally without a route
// (224.0.0.0/4, 255.255.255.255).
func localRoutes(fam int, routes *familyRoutes) ([]localRoute, error) {
	merged := false
	if fam == netlink.FAMILY_V4 {
		var err error
		if merged, err = ipv4TablesMerged(routes.localRaw); err != nil {
			return nil, err
		}
	}
	return hostEntries(fam, routes.local, routes.main, merged), nil
}

// ipv4TablesMerged reports whether the kernel keeps the IPv4 local and
// main tables in one trie (fib_new_table's alias while no policy rule was
// ever configured: net->ipv4.fib_has_custom_rules, which user space cannot
// read). A rule list other than the default three means unmerged; with
// the default list, tables once unmerged (a rule added and deleted) tell
// by the route lookup of one of this host's local-table addresses: merged,
// the kernel looks it up in main's table, which holds it, and says so.
func ipv4TablesMerged(local []netlink.Route) (bool, error) {
	rules, err := netlink.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return false, fmt.Errorf("list IPv4 policy rules: %w", err)
	}
	defaults := map[int]int{0: unix.RT_TABLE_LOCAL, 32766: unix.RT_TABLE_MAIN, 32767: unix.RT_TABLE_DEFAULT}
	if len(rules) != len(defaults) {
		return false, nil
	}
	for _, r := range rules {
		if t, ok := defaults[r.Priority]; !ok || t != r.Table {
			return false, nil
		}
	}
	for _, r := range local {
		if r.Type != unix.RTN_LOCAL || r.Dst == nil {
			continue
		}
		got, err := netlink.RouteGetWithOptions(r.Dst.IP, &netlink.RouteGetOptions{FIBMatch: true})
		if err != nil || len(got) == 0 {
			continue // the next address
		}
		return got[0].Table == unix.RT_TABLE_MAIN, nil
	}
	// No local address to ask about: the tables start merged.
	return true, nil
}

// fillLocal copies the namespace's local routing table (addresses of this
// host, broadcast, multicast, anycast), from the dumped tables nr, into
// the data plane, which needs it to tell INPUT from "dropped by the
// kernel" when forwarding is off, and for -m addrtype.
func fillLocal(m4, m6 *ebpf.Map, nr *netRoutes) error {
	keep4, keep6 := map[lpmKey4]bool{}, map[lpmKey6]bool{}
	changed4 := false // an IPv4 entry added, changed or removed
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := localRoutes(fam, nr.of(fam))
		if err != nil {
			return err
		}
		for _, lr := range routes {
			dst := lr.dst
			ones, _ := dst.Mask.Size()
			if ip4 := dst.IP.To4(); ip4 != nil && fam == netlink.FAMILY_V4 {
				k := lpmKey4{Prefixlen: uint32(ones)}
				copy(k.Addr[:], ip4)
				var old localVal
				if m4.Lookup(k, &old) != nil || old != lr.val {
					changed4 = true
				}
				if err := m4.Put(k, lr.val); err != nil {
					return fmt.Errorf("record local route %s: %w", dst, err)
				}
				keep4[k] = true
			} else if fam == netlink.FAMILY_V6 {
				k := lpmKey6{Prefixlen: uint32(ones)}
				copy(k.Addr[:], dst.IP.To16())
				if err := m6.Put(k, lr.val); err != nil {
					return fmt.Errorf("record local route %s: %w", dst, err)
				}
				keep6[k] = true
			}
		}
	}
	if err := keepGroupEntries(m6, keep6); err != nil {
		return err
	}
	removed4, err := pruneMap(m4, keep4)
	if err != nil {
		return fmt.Errorf("forget removed local routes: %w", err)
	}
	if _, err := pruneMap(m6, keep6); err != nil {
		return fmt.Errorf("forget removed local routes: %w", err)
	}
	if !changed4 && removed4 == 0 {
		return nil
	}
	// Cached route answers hold what the IPv4 map said
	// (bpf/route_cache.h, which caches IPv4 only).
	return flushRouteCache()
}

// InterfaceStatus is what xfw has attached to one interface.
type InterfaceStatus struct {
	Name  string
	Index int
	// XDPMode is "native", "generic", "offload" or "-" (none of xfw's).
	XDPMode string
	// XDPProgID is the id of xfw's XDP program there (0: none).
	XDPProgID uint32
	// Kind is the device's kind ("veth", "bridge", "device", …).
	Kind string
	// TCX is true when xfw's egress program is attached.
	TCX bool
	// TCXIngress is true when xfw's ingress program (REJECT replies) is
	// attached.
	TCXIngress bool
	// ForeignXDP names another XDP program attached to the interface
	// ("name (id N)"), "" when there is none.
	ForeignXDP string
	// OtherTCX names the other programs on the interface's TCX egress
	// hook, in their order ("name (id N)"; xfw's runs last).
	OtherTCX []string
}

// Protected reports whether all of xfw's programs run on the interface.
func (i InterfaceStatus) Protected() bool { return i.XDPMode != "-" && i.TCX && i.TCXIngress }

// Missing names the programs the interface lacks ("" when protected).
func (i InterfaceStatus) Missing() string {
	var miss []string
	if i.XDPMode == "-" {
		miss = append(miss, "XDP")
	}
	if !i.TCX {
		miss = append(miss, "TCX egress")
	}
	if !i.TCXIngress {
		miss = append(miss, "TCX ingress")
	}
	switch len(miss) {
	case 0:
		return ""
	case 1:
		return miss[0]
	}
	return strings.Join(miss[:len(miss)-1], ", ") + " and " + miss[len(miss)-1]
}

// NamespaceStatus describes xfw in the current network namespace.
type NamespaceStatus struct {
	Loaded     bool
	IPv4, IPv6 bool
	Interfaces []InterfaceStatus
}

// Unprotected returns the interfaces that lack one of xfw's programs.
func (st *NamespaceStatus) Unprotected() []InterfaceStatus {
	var out []InterfaceStatus
	for _, i := range st.Interfaces {
		if !i.Protected() {
			out = append(out, i)
		}
	}
	return out
}

// Status reports what xfw has loaded and attached in this namespace.
func Status() (*NamespaceStatus, error) {
	st := &NamespaceStatus{}
	cur, err := currentOwn()
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return st, nil
	}
	defer cur.Close()
	st.Loaded = true
	st.IPv4, st.IPv6 = cur.hasFamily(ir.IPv4), cur.hasFamily(ir.IPv6)
	ifaces, err := listInterfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if ifc.BridgePort || ifc.PendingVeth {
			continue // xfw runs on its bridge (a port: TC egress only), or later (bridge.go)
		}
		is := InterfaceStatus{Name: ifc.Name, Index: ifc.Index, XDPMode: "-", Kind: ifc.link.Type()}
		if x := ifc.link.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 && programName(ebpf.ProgramID(x.ProgId)) == xdpProgName {
			switch x.AttachMode {
			case nl.XDP_ATTACHED_DRV:
				is.XDPMode = "native"
			case nl.XDP_ATTACHED_SKB:
				is.XDPMode = "generic"
			case nl.XDP_ATTACHED_HW:
				is.XDPMode = "offload"
			}
			is.XDPProgID = x.ProgId
		} else if x != nil && x.Attached && x.ProgId != 0 {
			is.ForeignXDP = fmt.Sprintf("%q (id %d)", programName(ebpf.ProgramID(x.ProgId)), x.ProgId)
		}
		is.TCX, is.OtherTCX = tcxPrograms(ifc, egressHook)
		is.TCXIngress, _ = tcxPrograms(ifc, ingressHook)
		st.Interfaces = append(st.Interfaces, is)
	}
	return st, nil
}

// RefreshLocal copies the namespace's local routing table into the running
// data plane at once (without a recompile): a new address of this host is
// judged by INPUT from the next packet on, not passed as "no route" until
// the next sync. The groups the devices joined (mcast.go), the ICMP rate
// limit sysctls and IPv6 routes REJECT's replies follow (ratelimit.go)
// are refreshed with it.
func RefreshLocal() error {
	cur, err := currentOwn()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	if err := fillRouteFacts(cur); err != nil {
		return err
	}
	if err := fillGroupsNow(cur); err != nil {
		return err
	}
	return fillRateCfg(cur.maps)
}
