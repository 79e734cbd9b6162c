package dataplane

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"

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
// every interface not known to run xfw's programs (SetProtected). Where a
// bpffs is mounted (GuardPinEnv) it is pinned there, one directory per
// namespace, and outlives its holder (the agent) until Remove or xfw stop;
// elsewhere it lives as long as its holder keeps it open.
type Guard struct {
	// mu orders SetProtected and Admit: the agent's checks and the
	// commands it serves (attachMissing) both write the interfaces.
	mu    sync.Mutex
	prog  *ebpf.Program
	ifs   *ebpf.Map
	drops *ebpf.Map
	links []link.Link
	known map[uint32]guardIf // what xfw_guard_ifs holds
	// pinDir is the guard's pin directory ("" when not pinned); Reused
	// reports a guard found pinned there rather than made.
	pinDir string
	Reused bool
}

// StartGuard returns the namespace's guard admitting exactly protected:
// the pinned one when there is one (an agent that died left it), else a
// new one, filled before it is linked to the hooks (so the interfaces
// already covered carry traffic from the first packet on) and pinned when
// a bpffs is mounted.
func StartGuard(protected map[int]GuardedInterface) (_ *Guard, err error) {
	dir, err := guardPinDir()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if g, err := openPinnedGuard(dir); err == nil {
			heldGuard.Store(g)
			return g, g.SetProtected(protected)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	g, err := newGuard()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.Remove()
		}
	}()
	if err := g.SetProtected(protected); err != nil {
		return nil, err
	}
	if err := g.link(); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := g.pin(dir); err != nil {
			return nil, err
		}
	}
	heldGuard.Store(g)
	return g, nil
}

// newGuard loads the guard's program and maps (not linked yet).
func newGuard() (*Guard, error) {
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
	if g.prog == nil || g.ifs == nil || g.drops == nil {
		g.Close()
		return nil, errors.New("guard object lacks its program or maps")
	}
	return g, nil
}

// guardLinks are the guard's hooks, in the order of its links (and pins).
var guardLinks = []struct {
	name  string
	proto link.NetfilterProtocolFamily
	hook  link.NetfilterInetHook
}{
	{"ipv4-prerouting", guardProtoIPv4, guardHookPre},
	{"ipv4-postrouting", guardProtoIPv4, guardHookPost},
	{"ipv6-prerouting", guardProtoIPv6, guardHookPre},
	{"ipv6-postrouting", guardProtoIPv6, guardHookPost},
}

// link links the guard's program to its hooks.
func (g *Guard) link() error {
	for _, h := range guardLinks {
		l, err := link.AttachNetfilter(link.NetfilterOptions{Program: g.prog, ProtocolFamily: h.proto, Hook: h.hook, Priority: guardPriority})
		if err != nil {
			return fmt.Errorf("link the guard to netfilter (%s): %w", h.name, err)
		}
		g.links = append(g.links, l)
	}
	return nil
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

// entry is gi as the guard's interface map holds it.
func (gi GuardedInterface) entry() guardIf {
	v := guardIf{ProgID: gi.XDPProgID}
	if gi.Veth {
		v.Flags |= guardIfVeth
	}
	return v
}

// SetProtected makes the guard's interfaces exactly protected (by
// ifindex): packets of any other interface, or arriving on one that no
// longer runs xfw's XDP program, are dropped from now on.
func (g *Guard) SetProtected(protected map[int]GuardedInterface) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.known {
		if _, ok := protected[int(i)]; !ok {
			if err := g.ifs.Delete(i); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("guard: forget interface %d: %w", i, err)
			}
			delete(g.known, i)
		}
	}
	return g.admitLocked(protected)
}

// Admit adds protected to the guard's interfaces, leaving the others as
// they are: a command that has just attached xfw's programs to them lets
// their traffic through before it returns, not at the agent's next look.
func (g *Guard) Admit(protected map[int]GuardedInterface) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(protected)
}

// admitLocked writes protected's entries that differ from what the guard
// holds; g.mu is held.
func (g *Guard) admitLocked(protected map[int]GuardedInterface) error {
	for i, gi := range protected {
		v := gi.entry()
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

// Close releases the guard's descriptors: a pinned guard stays in force,
// one that is not is unlinked with them.
func (g *Guard) Close() error {
	heldGuard.CompareAndSwap(g, nil)
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

// Remove unpins and unlinks the guard: every interface carries traffic
// again as its own programs (or their absence) decide.
func (g *Guard) Remove() error {
	var errs []error
	if g.pinDir != "" {
		errs = append(errs, os.RemoveAll(g.pinDir))
	}
	return errors.Join(append(errs, g.Close())...)
}
