package settable

import (
	"net/netip"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
)

// ifaceBlocker collects the entries of one network of a hash:net,iface set
// (physdev ones aside: they hash elsewhere in the kernel) for its blocker
// entry: the kernel's test stops at the longest prefix length where an
// entry of the packet's network exists, whatever its interface
// (IP_SET_HASH_WITH_MULTI; checked against the kernel: 10.0.0.0/30,out0
// keeps 10.0.0.1 arriving on in0 from matching 10.0.0.0/28,in0).
type ifaceBlocker struct {
	n       int
	ifindex uint32 // the only entry's interface (0: unresolved)
	expires uint64 // the latest expiry (0: never)
	never   bool   // some entry never expires
	live    bool   // some entry has not expired
}

// add counts entry e.
func (b *ifaceBlocker) add(e *ipset.Entry, listExp time.Time, ifaces []compiler.Interface, clk setClock) {
	exp := e.Expires
	if !listExp.IsZero() && (exp.IsZero() || listExp.Before(exp)) {
		exp = listExp
	}
	mono, live := clk.expiry(exp)
	if !live {
		return
	}
	b.n++
	b.live = true
	if mono == 0 {
		b.never = true
	} else if mono > b.expires {
		b.expires = mono
	}
	b.ifindex = 0
	for _, ifc := range ifaces {
		if ifc.Name == e.Iface {
			b.ifindex = ifc.Index
		}
	}
}

// entry returns the blocker of network p, if it has live entries.
func (b *ifaceBlocker) entry(p netip.Prefix) (dataplane.SetHashEntry, bool) {
	if !b.live {
		return dataplane.SetHashEntry{}, false
	}
	h := dataplane.SetHashEntry{Expires: b.expires}
	if b.never {
		h.Expires = 0
	}
	if b.n == 1 {
		h.Aux = b.ifindex
	}
	h.Key.Hi, h.Key.Lo = addrWords(p.Addr())
	h.Key.Plen = uint8(p.Bits())
	return h, true
}

// setHashEntries returns the hash table entries of set entry e (none when
// it cannot match: expired, a physdev interface, an interface the
// namespace lacks), its expiry capped by listExp.
func setHashEntries(kind uint8, e *ipset.Entry, listExp time.Time, ifaces []compiler.Interface, clk setClock) []dataplane.SetHashEntry {
	exp := e.Expires
	if !listExp.IsZero() && (exp.IsZero() || listExp.Before(exp)) {
		exp = listExp
	}
	mono, live := clk.expiry(exp)
	if !live {
		return nil
	}
	h := dataplane.SetHashEntry{Expires: mono, Answer: dataplane.SetMember}
	if e.Nomatch {
		h.Answer = dataplane.SetNomatch
	}
	if kind&dataplane.SetKindAddr != 0 {
		h.Key.Hi, h.Key.Lo = addrWords(e.Prefix.Addr())
		h.Key.Plen = uint8(e.Prefix.Bits())
	}
	if kind&(dataplane.SetKindPort|dataplane.SetKindTCPUDP) != 0 {
		h.Key.Port = e.Port
	}
	if kind&dataplane.SetKindPort != 0 {
		h.Key.Proto = e.Proto
	}
	if kind&dataplane.SetKindIface == 0 {
		return []dataplane.SetHashEntry{h}
	}
	// The kernel's match never fills a physdev name (it would need the
	// match's IPSET_FLAG_PHYSDEV, which iptables never sets): such
	// entries never match.
	if e.Physdev {
		return nil
	}
	// Nor do wildcard entries ("eth+"): the kernel's test looks the
	// packet's exact interface name up (checked against the kernel:
	// 127.0.0.0/8,l+ does not match packets from lo).
	if strings.HasSuffix(e.Iface, "+") {
		return nil
	}
	for _, ifc := range ifaces {
		if ifc.Name == e.Iface {
			h.Key.Ifindex = ifc.Index
			return []dataplane.SetHashEntry{h}
		}
	}
	return nil
}

// addrWords splits an address as the data plane holds it: IPv4 in the low
// word (host order), IPv6 in two big-endian halves.
func addrWords(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	if a.Is4() {
		return 0, lo & 0xffffffff
	}
	return hi, lo
}
