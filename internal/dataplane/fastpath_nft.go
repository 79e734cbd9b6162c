package dataplane

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// nftables' base chains and flowtables see packets the fast path would
// keep from the stack: they are read from the kernel (nfnetlink, an
// NFT_MSG_GETCHAIN and an NFT_MSG_GETFLOWTABLE dump) at every decision.
// What decides (nftUsers):
//
//   - a chain of the ip, ip6 or inet family at prerouting, forward or
//     postrouting, any base chain of the bridge family (its hooks see the
//     frames of bridge ports, which the fast path may take), and any
//     flowtable: the fast path is off in the whole namespace;
//   - an ingress chain (netdev, or inet's ingress hook): the fast path
//     takes nothing arriving on its devices;
//   - a netdev egress chain: its devices are no targets.
//
// Chains at input and output (local traffic only) and the arp family's
// chains do not matter.

// The nf_tables netlink interface (include/uapi/linux/netfilter/nf_tables.h,
// nfnetlink.h, netfilter.h).
const (
	nfnlSubsysNFTables = 10 // NFNL_SUBSYS_NFTABLES
	nftMsgGetChain     = 4  // NFT_MSG_GETCHAIN
	nftMsgGetFlowtable = 23 // NFT_MSG_GETFLOWTABLE

	nftaChainTable = 1 // NFTA_CHAIN_TABLE
	nftaChainName  = 3 // NFTA_CHAIN_NAME
	nftaChainHook  = 4 // NFTA_CHAIN_HOOK

	nftaHookHooknum = 1 // NFTA_HOOK_HOOKNUM
	nftaHookDev     = 3 // NFTA_HOOK_DEV
	nftaHookDevs    = 4 // NFTA_HOOK_DEVS
	nftaDeviceName  = 1 // NFTA_DEVICE_NAME

	nftaFlowtableTable = 1 // NFTA_FLOWTABLE_TABLE
	nftaFlowtableName  = 2 // NFTA_FLOWTABLE_NAME

	nfprotoInet   = 1  // NFPROTO_INET
	nfprotoIPv4   = 2  // NFPROTO_IPV4
	nfprotoNetdev = 5  // NFPROTO_NETDEV
	nfprotoBridge = 7  // NFPROTO_BRIDGE
	nfprotoIPv6   = 10 // NFPROTO_IPV6

	nfInetLocalIn   = 1 // NF_INET_LOCAL_IN
	nfInetLocalOut  = 3 // NF_INET_LOCAL_OUT
	nfInetIngress   = 5 // NF_INET_INGRESS
	nfNetdevIngress = 0 // NF_NETDEV_INGRESS
	nfNetdevEgress  = 1 // NF_NETDEV_EGRESS

	nlaTypeMask = 0x3fff // NLA_TYPE_MASK: the type without the nested and byte-order flags
)

// nftChain is an nftables base chain as the fast path's decision needs it.
type nftChain struct {
	family  uint8
	table   string
	name    string
	hook    uint32
	devices []string // the devices of a netdev (or inet ingress) chain
}

// label names the chain as `nft list` would.
func (c nftChain) label() string {
	return fmt.Sprintf("nftables chain %s %s %s (%s hook)", nfFamilyName(c.family), c.table, c.name, nfHookName(c.family, c.hook))
}

// nfFamilyName is nft's name of an NFPROTO_* family.
func nfFamilyName(f uint8) string {
	switch f {
	case nfprotoInet:
		return "inet"
	case nfprotoIPv4:
		return "ip"
	case nfprotoIPv6:
		return "ip6"
	case nfprotoNetdev:
		return "netdev"
	case nfprotoBridge:
		return "bridge"
	case 3:
		return "arp"
	}
	return fmt.Sprintf("family-%d", f)
}

// nfHookName is nft's name of hook number h in family f.
func nfHookName(f uint8, h uint32) string {
	if f == nfprotoNetdev {
		if h == nfNetdevEgress {
			return "egress"
		}
		return "ingress"
	}
	names := []string{"prerouting", "input", "forward", "output", "postrouting", "ingress"}
	if int(h) < len(names) {
		return names[h]
	}
	return fmt.Sprintf("hook %d", h)
}

// nftLimits is what nftables' chains keep the fast path from.
type nftLimits struct {
	// all is why the fast path is off in the whole namespace, "".
	all string
	// noRX and noTX name, by device name (a trailing "*" matches a
	// prefix, as nft's wildcard hooks do), why the fast path takes
	// nothing arriving on a device, sends nothing to it.
	noRX, noTX map[string]string
}

// deviceLimit returns the reason m gives for a device called name, "".
func deviceLimit(m map[string]string, name string) string {
	if why, ok := m[name]; ok {
		return why
	}
	for pat, why := range m {
		if p, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(name, p) {
			return why
		}
	}
	return ""
}

// classifyNFT sorts chains and flowtables into the fast path's limits.
func classifyNFT(chains []nftChain, flowtables []string) nftLimits {
	l := nftLimits{noRX: map[string]string{}, noTX: map[string]string{}}
	if len(flowtables) > 0 {
		l.all = flowtables[0]
	}
	for _, c := range chains {
		switch {
		case c.family == 3: // arp: no IP packet
		case c.family == nfprotoNetdev && c.hook == nfNetdevEgress:
			for _, d := range c.devices {
				l.noTX[d] = c.label()
			}
		case c.family == nfprotoNetdev || (c.family == nfprotoInet && c.hook == nfInetIngress):
			for _, d := range c.devices {
				l.noRX[d] = c.label()
			}
		case c.family == nfprotoBridge:
			if l.all == "" {
				l.all = c.label()
			}
		case c.hook == nfInetLocalIn || c.hook == nfInetLocalOut:
			// Local traffic only.
		default:
			if l.all == "" {
				l.all = c.label()
			}
		}
	}
	return l
}

// nftAbsent reports whether nf_tables is certainly absent from the kernel:
// not a loaded module (/proc/modules) and not built in (the modules.builtin
// list, when there is one). Then no table can exist, and the dump is not
// asked for (it would load the module).
func nftAbsent() bool {
	mods, err := os.ReadFile("/proc/modules")
	if err != nil || strings.Contains(string(mods), "nf_tables ") {
		return false
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	release := unix.ByteSliceToString(u.Release[:])
	builtin, err := os.ReadFile("/lib/modules/" + release + "/modules.builtin")
	return err == nil && !strings.Contains(string(builtin), "/nf_tables.ko")
}

// nftDump sends an nf_tables dump request (msg) for every family and
// returns the replies' families and attributes. No nf_tables in the
// kernel is an empty answer.
func nftDump(msg int) ([]uint8, [][]syscall.NetlinkRouteAttr, error) {
	if nftAbsent() {
		return nil, nil, nil
	}
	req := nl.NewNetlinkRequest(nfnlSubsysNFTables<<8|msg, unix.NLM_F_DUMP)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: 0})
	execute := func() ([][]byte, error) { return req.Execute(unix.NETLINK_NETFILTER, 0) }
	msgs, err := consistentDump("the nftables ruleset", execute)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		// A module loaded on the way: asked once more. (A dump a change
		// interrupted, NLM_F_DUMP_INTR, consistentDump asks again.)
		msgs, err = consistentDump("the nftables ruleset", execute)
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil, nil, nil // no nf_tables (or no nfnetlink) here: no chain
	}
	if err != nil {
		return nil, nil, err
	}
	var fams []uint8
	var attrs [][]syscall.NetlinkRouteAttr
	for _, m := range msgs {
		if len(m) < nl.SizeofNfgenmsg {
			continue
		}
		a, err := parseNLAttrs(m[nl.SizeofNfgenmsg:])
		if err != nil {
			return nil, nil, err
		}
		fams = append(fams, m[0])
		attrs = append(attrs, a)
	}
	return fams, attrs, nil
}

// parseNLAttrs parses netlink attributes, their types without the flags.
func parseNLAttrs(b []byte) ([]syscall.NetlinkRouteAttr, error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return nil, err
	}
	for i := range attrs {
		attrs[i].Attr.Type &= nlaTypeMask
	}
	return attrs, nil
}

// nlString is a NUL-terminated string attribute's value.
func nlString(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\x00")
	return s
}

// nftBaseChains returns the namespace's nftables base chains.
func nftBaseChains() ([]nftChain, error) {
	fams, attrs, err := nftDump(nftMsgGetChain)
	if err != nil {
		return nil, fmt.Errorf("list the nftables chains: %w", err)
	}
	var out []nftChain
	for i, as := range attrs {
		c := nftChain{family: fams[i]}
		base := false
		for _, a := range as {
			switch a.Attr.Type {
			case nftaChainTable:
				c.table = nlString(a.Value)
			case nftaChainName:
				c.name = nlString(a.Value)
			case nftaChainHook:
				base = true
				if err := parseNFTHook(&c, a.Value); err != nil {
					return nil, fmt.Errorf("parse the hook of nftables chain %s: %w", c.name, err)
				}
			}
		}
		if base {
			out = append(out, c)
		}
	}
	return out, nil
}

// parseNFTHook reads an NFTA_CHAIN_HOOK attribute's contents into c.
func parseNFTHook(c *nftChain, b []byte) error {
	hook, err := parseNLAttrs(b)
	if err != nil {
		return err
	}
	for _, h := range hook {
		switch h.Attr.Type {
		case nftaHookHooknum:
			if len(h.Value) >= 4 {
				c.hook = uint32(h.Value[0])<<24 | uint32(h.Value[1])<<16 | uint32(h.Value[2])<<8 | uint32(h.Value[3])
			}
		case nftaHookDev:
			c.devices = append(c.devices, nlString(h.Value))
		case nftaHookDevs:
			devs, err := parseNLAttrs(h.Value)
			if err != nil {
				return err
			}
			for _, d := range devs {
				if d.Attr.Type == nftaDeviceName {
					c.devices = append(c.devices, nlString(d.Value))
				}
			}
		}
	}
	return nil
}

// nftFlowtables returns the namespace's nftables flowtables, labelled.
func nftFlowtables() ([]string, error) {
	fams, attrs, err := nftDump(nftMsgGetFlowtable)
	if err != nil {
		return nil, fmt.Errorf("list the nftables flowtables: %w", err)
	}
	var out []string
	for i, as := range attrs {
		var table, name string
		for _, a := range as {
			switch a.Attr.Type {
			case nftaFlowtableTable:
				table = nlString(a.Value)
			case nftaFlowtableName:
				name = nlString(a.Value)
			}
		}
		out = append(out, fmt.Sprintf("nftables flowtable %s %s %s", nfFamilyName(fams[i]), table, name))
	}
	return out, nil
}

// nftUsers returns what the namespace's nftables chains and flowtables
// keep the fast path from; an error when they cannot be read (the caller
// then keeps the fast path off: nothing may fail open).
func nftUsers() (nftLimits, error) {
	chains, err := nftBaseChains()
	if err != nil {
		return nftLimits{}, err
	}
	fts, err := nftFlowtables()
	if err != nil {
		return nftLimits{}, err
	}
	return classifyNFT(chains, fts), nil
}
