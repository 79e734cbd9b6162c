package dataplane

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The XDP fast path for FORWARD (bpf/fastpath.h): a packet FORWARD accepts
// is rewritten and redirected at XDP when its output device is a target,
// a device marked ifFastTX in xfw_ifinfo at every sync (fillIfInfo). A
// device is a target when it takes XDP frames (the kernel's xdp-features
// say ndo-xmit: a veth whose peer runs an XDP program or has GRO on; a
// driver with xfw's program attached natively, which gives it its XDP
// transmit queues) and nothing on its egress needs the skb: the default
// qdisc, no egress filter, no other TCX egress program, no nftables egress
// chain. A device is a source (ifFastRX: the fast path may take packets
// arriving on it) when nothing of another user runs on its ingress, after
// XDP: no tc ingress filter, TCX ingress program or nftables ingress
// chain. No device is a target when the fast path is off (FastPathEnv),
// when another netfilter user may see forwarded packets (iptables-legacy
// tables, tracked connections of the kernel, nftables chains:
// fastpath_nft.go) or IPsec policies exist (ip_forward checks them; the
// XDP route lookup does not). The agent decides again when these change
// (RefreshFastPath).

// ifFastTX is XFW_IF_FASTTX: the device is a fast-path target; ifFastRX is
// XFW_IF_FASTRX: the fast path may take packets arriving on it.
const (
	ifFastTX = 0x10
	ifFastRX = 0x20
)

// FastPathEnv is the environment variable that turns the fast path off
// ("off" or "0") at every sync; any other value, or none, leaves it on.
const FastPathEnv = "XFW_FASTPATH"

// The netdev generic netlink family (include/uapi/linux/netdev.h).
const (
	netdevFamily          = "netdev"
	netdevCmdDevGet       = 1
	netdevADevIfindex     = 1
	netdevADevXDPFeatures = 3
	xdpActNdoXmit         = 1 << 2 // NETDEV_XDP_ACT_NDO_XMIT
)

// FastPathOn reports whether the fast path is on for this process's syncs.
func FastPathOn() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(FastPathEnv)))
	return v != "off" && v != "0"
}

// xdpFeatures returns the xdp-features of the device ifindex (Linux 6.3's
// netdev family; an error on older kernels). One request per device: the
// family's dump replies are not marked multipart, and the netlink
// library stops reading after the first.
func xdpFeatures(familyID uint16, ifindex int) (uint64, error) {
	req := nl.NewNetlinkRequest(int(familyID), 0)
	req.AddData(&nl.Genlmsg{Command: netdevCmdDevGet, Version: 1})
	req.AddData(nl.NewRtAttr(netdevADevIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return 0, fmt.Errorf("read the XDP features of device %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return 0, fmt.Errorf("parse the XDP features of device %d: %w", ifindex, err)
		}
		for _, a := range attrs {
			if a.Attr.Type == netdevADevXDPFeatures && len(a.Value) >= 8 {
				return nl.NativeEndian().Uint64(a.Value), nil
			}
		}
	}
	return 0, nil
}

// otherNetfilterUser names what in this namespace would see forwarded
// packets the fast path keeps from the stack, or "" for nothing.
func otherNetfilterUser() string {
	for _, f := range []string{"/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"} {
		if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return "iptables-legacy tables (" + f + ")"
		}
	}
	if n, err := readSysctlInt("net/netfilter/nf_conntrack_count"); err == nil && n > 0 {
		return "the kernel's connection tracking"
	}
	if pols, err := listXfrmPolicies(netlink.FAMILY_ALL); err == nil && len(pols) > 0 {
		return "IPsec policies"
	}
	return ""
}

// defaultEgress reports whether nothing on ifc's egress needs the skb: its
// qdiscs are the kernel's defaults (handle 0), no clsact egress filter, no
// TCX egress program besides xfw's.
func defaultEgress(ifc Interface) bool {
	qdiscs, err := listQdiscs(ifc.link)
	if err != nil {
		return false
	}
	for _, q := range qdiscs {
		a := q.Attrs()
		if a.Parent == netlink.HANDLE_CLSACT {
			if f, err := listFilters(ifc.link, netlink.HANDLE_MIN_EGRESS); err != nil || len(f) > 0 {
				return false
			}
			continue
		}
		if a.Handle>>16 != 0 {
			return false // configured by someone: shaping, priorities
		}
	}
	_, others := tcxPrograms(ifc, egressHook)
	return len(others) == 0
}

// fastCandidate reports whether ifc is a kind of device the fast path may
// send to at all, before anything is asked of the kernel about it.
func fastCandidate(ifc Interface) bool {
	return ifc.VLAN == 0 && !ifc.BridgePort && !ifc.IsBridge && !ifc.PendingVeth && ifc.Name != "lo" && ifc.link != nil
}

// fastTarget reports whether ifc, a fastCandidate with xdp-features feat,
// is a target.
func fastTarget(ifc Interface, feat uint64) bool {
	if feat&xdpActNdoXmit == 0 {
		return false
	}
	// A driver's XDP transmit queues exist while an XDP program runs
	// natively on the device; veth's ndo-xmit bit already says its peer
	// can take the frames.
	if ifc.link.Type() != "veth" {
		x := ifc.link.Attrs().Xdp
		if x == nil || !x.Attached || x.AttachMode != nl.XDP_ATTACHED_DRV {
			return false
		}
	}
	return defaultEgress(ifc)
}

// fastDecision is the fast path's choice of devices at one moment.
type fastDecision struct {
	// off is why no device is a target ("" when some may be).
	off string
	// tx are the targets; rx the devices the fast path may take packets
	// arriving on (nothing else sees them first), by ifindex.
	tx, rx map[int]bool
	// whyRX names, by device name, what keeps a device from rx: another
	// user's ingress hook; whyTX what keeps a device that could be one
	// from tx: another user's nftables egress chain.
	whyRX, whyTX map[string]string
}

// foreignIngress names what of another user on ifc's ingress would miss a
// frame the fast path redirects at XDP (which runs before it): a clsact or
// ingress qdisc's filter, another TCX ingress program; "" for nothing.
func foreignIngress(ifc Interface) string {
	qdiscs, err := listQdiscs(ifc.link)
	if err != nil {
		return "its qdiscs could not be read"
	}
	for _, q := range qdiscs {
		if q.Attrs().Parent != netlink.HANDLE_INGRESS {
			continue
		}
		if f, err := listFilters(ifc.link, netlink.HANDLE_MIN_INGRESS); err != nil || len(f) > 0 {
			return "a tc ingress filter"
		}
	}
	if _, others := tcxPrograms(ifc, ingressHook); len(others) > 0 {
		return "TCX ingress program " + strings.Join(others, ", ")
	}
	return ""
}

// decideFastPath returns the fast path's targets and sources among
// ifaces (none when it is off or unusable here).
func decideFastPath(ifaces []Interface) fastDecision {
	d := fastDecision{tx: map[int]bool{}, rx: map[int]bool{}, whyRX: map[string]string{}, whyTX: map[string]string{}}
	if !FastPathOn() {
		d.off = FastPathEnv + "=off"
		return d
	}
	if d.off = otherNetfilterUser(); d.off != "" {
		return d
	}
	nft, err := nftUsers()
	if err != nil {
		d.off = err.Error()
		return d
	}
	if nft.all != "" {
		d.off = nft.all
		return d
	}
	fam, err := netlink.GenlFamilyGet(netdevFamily)
	if err != nil {
		d.off = "the kernel does not tell the devices' XDP features"
		return d // an older kernel: no target, the stack forwards
	}
	for _, ifc := range ifaces {
		if !fastCandidate(ifc) {
			continue // no netlink request for devices never sent to
		}
		if why := deviceLimit(nft.noRX, ifc.Name); why != "" {
			d.whyRX[ifc.Name] = why
		} else if why := foreignIngress(ifc); why != "" {
			d.whyRX[ifc.Name] = why
		} else {
			d.rx[ifc.Index] = true
		}
		if why := deviceLimit(nft.noTX, ifc.Name); why != "" {
			d.whyTX[ifc.Name] = why
			continue
		}
		feat, err := xdpFeatures(fam.ID, ifc.Index)
		if err == nil && fastTarget(ifc, feat) {
			d.tx[ifc.Index] = true
		}
	}
	return d
}

// fastFlags are ifc's fast-path bits of xfw_ifinfo's flags under d.
func (d fastDecision) fastFlags(ifc Interface) uint16 {
	var f uint16
	if d.tx[ifc.Index] {
		f |= ifFastTX
	}
	if d.rx[ifc.Index] {
		f |= ifFastRX
	}
	return f
}

// fpNumWhy is XFW_FP_NWHY: the fast path's outcomes (enum xfw_fp_why).
const fpNumWhy = 11

// FastPathOutcomes names the fast path's outcomes, indexed as enum
// xfw_fp_why: "taken", then why a packet FORWARD accepted went to the stack.
var FastPathOutcomes = [fpNumWhy]string{
	"taken", "no-target", "no-neighbour", "mtu", "fragment", "nat", "header", "route", "mark-or-mangle", "checksum", "no-source",
}

// FastPathState is what `xfw fastpath` shows.
type FastPathState struct {
	// Targets are the devices xfw_ifinfo marks as fast-path targets.
	Targets []string
	// Off is why the fast path is off in the whole namespace now, ""
	// when it may run (decided again, not read from the data plane).
	Off string
	// NoSource names, by device, what keeps the fast path from taking
	// packets arriving on it now (another user's ingress hook); NoTarget
	// what keeps it from sending to a device (an nftables egress chain).
	NoSource, NoTarget map[string]string
	// Stale is set when the data plane's marks differ from what is
	// decided now: the last sync's facts changed since, or the sync ran
	// with another FastPathEnv (the agent, or the next sync, applies the
	// new decision).
	Stale bool
	// Outcomes are the outcome counts (FastPathOutcomes' order), summed
	// over CPUs.
	Outcomes []uint64
}

// FastPath returns the fast path's targets, why it is off or limited, and
// its outcome counts; nil when xfw is not loaded.
func FastPath() (*FastPathState, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	sum, err := statSummer(cur.maps["xfw_stats"])
	if err != nil {
		return nil, err
	}
	st := &FastPathState{Outcomes: make([]uint64, fpNumWhy)}
	for i := range st.Outcomes {
		if st.Outcomes[i], err = sum(uint32(statFP + i)); err != nil {
			return nil, fmt.Errorf("the fast path's counts: %w", err)
		}
	}
	m := cur.maps["xfw_ifinfo"]
	if m == nil {
		return nil, errors.New("the running program lacks map xfw_ifinfo")
	}
	ifaces, err := listInterfaces()
	if err != nil {
		return nil, err
	}
	d := decideFastPath(ifaces)
	st.Off, st.NoSource, st.NoTarget = d.off, d.whyRX, d.whyTX
	for _, ifc := range ifaces {
		var v bpfIfInfo
		if ifc.VLAN != 0 || m.Lookup(uint64(ifc.Index), &v) != nil {
			continue
		}
		if v.Flags&ifFastTX != 0 {
			st.Targets = append(st.Targets, ifc.Name)
		}
		if v.Flags&(ifFastTX|ifFastRX) != d.fastFlags(ifc) {
			st.Stale = true
		}
	}
	return st, nil
}

// RefreshFastPath decides the fast path's targets and sources again and
// applies what changed to the running data plane (the agent's answer to
// a change of the facts: a tc filter, an nftables chain, a device's XDP
// features). It reports whether anything changed and, when the fast path
// is off, why. The caller holds xfw's lock.
func RefreshFastPath() (changed bool, off string, err error) {
	cur, err := currentOwn()
	if err != nil || cur == nil {
		return false, "", err
	}
	defer cur.Close()
	m := cur.maps["xfw_ifinfo"]
	if m == nil {
		return false, "", errors.New("the running program lacks map xfw_ifinfo")
	}
	ifaces, err := listInterfaces()
	if err != nil {
		return false, "", err
	}
	d := decideFastPath(ifaces)
	for _, ifc := range ifaces {
		var v bpfIfInfo
		if ifc.VLAN != 0 || m.Lookup(uint64(ifc.Index), &v) != nil {
			continue // a device the next sync records
		}
		want := v.Flags&^(ifFastTX|ifFastRX) | d.fastFlags(ifc)
		if want == v.Flags {
			continue
		}
		v.Flags = want
		if err := m.Put(uint64(ifc.Index), v); err != nil {
			return changed, d.off, fmt.Errorf("record interface %s: %w", ifc.Name, err)
		}
		changed = true
	}
	if changed {
		if err := bumpIfinfoGen(cur.maps["xfw_bank"]); err != nil {
			return changed, d.off, err
		}
	}
	return changed, d.off, nil
}

// FastPathPolledFacts returns a summary of the facts the fast path's
// decision rests on that the kernel sends no notification of: another
// netfilter user (legacy tables, tracked connections, IPsec policies) and
// other users' TCX programs on the devices. The agent decides again when
// it changes; it costs a fraction of a decision (no netlink request per
// device).
func FastPathPolledFacts() string {
	var b strings.Builder
	b.WriteString(otherNetfilterUser())
	links, _, err := netFacts.linkList()
	if err != nil {
		return "links: " + err.Error()
	}
	for _, l := range links {
		ifc := Interface{Index: l.Attrs().Index}
		for _, h := range []tcxHook{ingressHook, egressHook} {
			if _, others := tcxPrograms(ifc, h); len(others) > 0 {
				fmt.Fprintf(&b, "|%d %s %s", ifc.Index, h.label, strings.Join(others, ","))
			}
		}
	}
	return b.String()
}
