package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

// The XDP fast path's targets and sources are decided on facts that change
// without a sync: a device's XDP features (a veth peer turning GRO off or
// removing its XDP program), another user's tc filters, nftables chains,
// the kernel's connection tracking. The agent follows the kernel's
// notifications of the first three and decides again at once (after
// fpSettle); every fpRecheck it reads what sends none (a TCX program of
// another user, connections tracked, IPsec policies) and decides again
// when that changed.

// fpSettle batches a burst of notifications into one decision.
const fpSettle = 20 * time.Millisecond

// fpRecheck is the interval of the decision without a notification.
const fpRecheck = time.Second

// Multicast groups (include/uapi/linux/rtnetlink.h, nfnetlink.h).
const (
	rtnlGroupTC      = 4 // RTNLGRP_TC: qdiscs and filters
	nfnlGroupNFTable = 7 // NFNLGRP_NFTABLES
	netdevMgmtGroup  = "mgmt"
)

// fpWatch is a subscription to one netlink multicast group.
type fpWatch struct {
	name  string
	proto int
	group uint32
}

// fpWatches returns the groups whose notifications may change the fast
// path's decision; the netdev family's only where the kernel has it.
func fpWatches() []fpWatch {
	w := []fpWatch{
		{"tc", unix.NETLINK_ROUTE, rtnlGroupTC},
		{"nftables", unix.NETLINK_NETFILTER, nfnlGroupNFTable},
	}
	if fam, err := netlink.GenlFamilyGet("netdev"); err == nil {
		for _, g := range fam.Groups {
			if g.Name == netdevMgmtGroup {
				w = append(w, fpWatch{"device XDP features", unix.NETLINK_GENERIC, g.ID})
			}
		}
	}
	return w
}

// watchFastPathFacts sends the name of a watch on events whenever its
// group has news (or lost some: an overrun is news too), until ctx ends.
// A subscription that fails is logged; the periodic decision stays.
func (a *agent) watchFastPathFacts(ctx context.Context, events chan<- string) {
	for _, w := range fpWatches() {
		s, err := nl.Subscribe(w.proto)
		if err == nil {
			err = unix.SetsockoptInt(s.GetFd(), unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(w.group))
			if err != nil {
				s.Close()
			}
		}
		if err != nil {
			a.logf("fast path: follow %s notifications: %v (decided again every %v)", w.name, err, fpRecheck)
			a.fpBlind.Store(true)
			continue
		}
		go func() {
			<-ctx.Done()
			s.Close()
		}()
		go func(name string) {
			for {
				_, _, err := s.Receive()
				if ctx.Err() != nil {
					return
				}
				if err != nil && !errors.Is(err, unix.ENOBUFS) {
					a.logf("fast path: %s notifications: %v (decided again every %v)", name, err, fpRecheck)
					a.fpBlind.Store(true)
					return
				}
				select {
				case events <- name:
				default: // one decision is pending already
				}
			}
		}(w.name)
	}
}

// refreshFastPath decides the fast path's targets again, under xfw's lock,
// and logs a change. The lock is not waited for (it is one for all
// namespaces, and a long command would stall the agent's other work): when
// it is busy, the decision is left pending for the next check.
func (a *agent) refreshFastPath(why string) {
	unlock, err := lock(waitSpec{})
	if err != nil {
		a.fpPending = why
		return
	}
	a.fpPending = ""
	changed, off, err := dataplane.RefreshFastPath()
	unlock()
	if err != nil {
		a.logOnce("fast path: %v", err)
		return
	}
	if !changed {
		return
	}
	state := "targets and sources decided again"
	if off != "" {
		state = fmt.Sprintf("off (%s)", off)
	}
	a.logf("fast path %s after %s", state, why)
}
