package dataplane

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

//go:embed bpf/guard.o
var guardObject []byte

// Names in bpf/guard.c.
const (
	guardProgName  = "xfw_guard"
	guardIfsMap    = "xfw_guard_ifs"
	guardDropsMap  = "xfw_guard_drops"
	guardDropIn    = 0 // XFW_GUARD_DROP_IN
	guardDropOut   = 1 // XFW_GUARD_DROP_OUT
	guardHookPre   = link.NetfilterInetPreRouting
	guardHookPost  = link.NetfilterInetPostRouting
	guardPriority  = math.MinInt32 + 1 // NF_IP_PRI_FIRST + 1: before every other hook
	guardProtoIPv4 = link.NetfilterProtoIPv4
	guardProtoIPv6 = link.NetfilterProtoIPv6
)

// Guard is the namespace-wide backstop of bpf/guard.c: netfilter links at
// PRE_ROUTING and POST_ROUTING of both families that drop the packets of
// every interface not known to run xfw's programs (SetProtected). It lives
// as long as its holder keeps it open (the agent): the links go with the
// last file descriptor.
type Guard struct {
	prog  *ebpf.Program
	ifs   *ebpf.Map
	drops *ebpf.Map
	links []link.Link
	known map[uint32]guardIf // what xfw_guard_ifs holds
}

// StartGuard loads the guard, fills its interfaces with protected (so that
// the interfaces already covered carry traffic from the first packet on),
// and links it to the current namespace's hooks.
func StartGuard(protected map[int]GuardedInterface) (_ *Guard, err error) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(guardObject))
	if err != nil {
		return nil, fmt.Errorf("guard object: %w", err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load the guard: %w", err)
	}
	g := &Guard{prog: coll.Programs[guardProgName], ifs: coll.Maps[guardIfsMap], drops: coll.Maps[guardDropsMap], known: map[uint32]guardIf{}}
	delete(coll.Programs, guardProgName)
	delete(coll.Maps, guardIfsMap)
	delete(coll.Maps, guardDropsMap)
	coll.Close()
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	if g.prog == nil || g.ifs == nil || g.drops == nil {
		return nil, errors.New("guard object lacks its program or maps")
	}
	if err := g.SetProtected(protected); err != nil {
		return nil, err
	}
	for _, proto := range []link.NetfilterProtocolFamily{guardProtoIPv4, guardProtoIPv6} {
		for _, hook := range []link.NetfilterInetHook{guardHookPre, guardHookPost} {
			l, err := link.AttachNetfilter(link.NetfilterOptions{Program: g.prog, ProtocolFamily: proto, Hook: hook, Priority: guardPriority})
			if err != nil {
				return nil, fmt.Errorf("link the guard to netfilter (family %d, hook %d): %w", proto, hook, err)
			}
			g.links = append(g.links, l)
		}
	}
	return g, nil
}

// GuardedInterface is what the guard knows of a protected interface.
type GuardedInterface struct {
	// XDPProgID is the id of xfw's XDP program the interface runs: a
	// packet arriving while it runs another (or none) is dropped.
	XDPProgID uint32
	// Veth: the device's own program pointer decides (a veth clears it
	// before the kernel records a removal).
	Veth bool
}

// guardIf mirrors struct xfw_guard_if (bpf/guard.c).
type guardIf struct {
	ProgID uint32
	Flags  uint32
}

// guardIfVeth is XFW_GUARD_IF_VETH.
const guardIfVeth = 1

// SetProtected makes the guard's interfaces exactly protected (by
// ifindex): packets of any other interface, or arriving on one that no
// longer runs xfw's XDP program, are dropped from now on.
func (g *Guard) SetProtected(protected map[int]GuardedInterface) error {
	for i := range g.known {
		if _, ok := protected[int(i)]; !ok {
			if err := g.ifs.Delete(i); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("guard: forget interface %d: %w", i, err)
			}
			delete(g.known, i)
		}
	}
	for i, gi := range protected {
		v := guardIf{ProgID: gi.XDPProgID}
		if gi.Veth {
			v.Flags |= guardIfVeth
		}
		if old, ok := g.known[uint32(i)]; ok && old == v {
			continue
		}
		if err := g.ifs.Put(uint32(i), v); err != nil {
			return fmt.Errorf("guard: admit interface %d: %w", i, err)
		}
		g.known[uint32(i)] = v
	}
	return nil
}

// Drops returns the packets the guard dropped at PRE_ROUTING (arriving on
// an unprotected interface) and at POST_ROUTING (leaving by one).
func (g *Guard) Drops() (in, out uint64, err error) {
	sum := func(i uint32) (uint64, error) {
		var per []uint64
		if err := g.drops.Lookup(i, &per); err != nil {
			return 0, fmt.Errorf("guard drop counts: %w", err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n, nil
	}
	if in, err = sum(guardDropIn); err != nil {
		return 0, 0, err
	}
	out, err = sum(guardDropOut)
	return in, out, err
}

// Close unlinks the guard: every interface carries traffic again as its
// own programs (or their absence) decide.
func (g *Guard) Close() error {
	var errs []error
	for _, l := range g.links {
		errs = append(errs, l.Close())
	}
	g.links = nil
	if g.prog != nil {
		errs = append(errs, g.prog.Close())
	}
	for _, m := range []*ebpf.Map{g.ifs, g.drops} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
