package cli

import (
	"context"
	"errors"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

// The data plane drops multicast to a group the receiving device has not
// joined, as the kernel does (bpf/mcast.h), by the groups it last read: a
// group joined since then is dropped too. The agent follows the kernel's
// notifications of joins and leaves (Linux 6.13 and later) and reads the
// groups again at once; where the kernel sends none, every mcRecheck. The
// IPv4 source filters (blocked sources, source-specific joins) change
// without a notification: the agent reads /proc/net/mcfilter every
// mcRecheck, and the groups again when it changed.

// The notifications of multicast groups joined and left
// (include/uapi/linux/rtnetlink.h: RTNLGRP_IPV4_MCADDR, RTNLGRP_IPV6_MCADDR).
const (
	rtnlGroupIPv4MCAddr = 37
	rtnlGroupIPv6MCAddr = 38
)

// mcRetry is how soon a refresh that found xfw's lock busy is tried again.
const mcRetry = 20 * time.Millisecond

// mcRecheck is the interval of the refresh without notifications, and of
// the reading of the source filters.
const mcRecheck = time.Second

// watchGroups sends on events whenever a device joins or leaves a group
// (or notifications were lost), until ctx ends. It reports false when the
// kernel sends no such notifications (the caller then reads the groups
// every mcRecheck).
func (a *agent) watchGroups(ctx context.Context, events chan<- struct{}) bool {
	s, err := nl.Subscribe(unix.NETLINK_ROUTE)
	if err != nil {
		a.logf("multicast groups: follow joins and leaves: %v (read again every second)", err)
		return false
	}
	for _, g := range []int{rtnlGroupIPv4MCAddr, rtnlGroupIPv6MCAddr} {
		if err := unix.SetsockoptInt(s.GetFd(), unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			s.Close()
			a.logf("multicast groups: follow joins and leaves: %v (read again every second)", err)
			return false
		}
	}
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	go func() {
		for {
			_, _, err := s.Receive()
			if ctx.Err() != nil {
				return
			}
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				a.logf("multicast groups: notifications: %v (read again every second)", err)
				a.mcBlind.Store(true)
				return
			}
			select {
			case events <- struct{}{}:
			default: // a refresh is pending already
			}
		}
	}()
	return true
}

// refreshGroups reads the groups into the running data plane under xfw's
// lock, not waited for: when it is busy, it returns a timer to try again
// on (nil when done).
func (a *agent) refreshGroups() <-chan time.Time {
	unlock, err := lock(waitSpec{})
	if err != nil {
		return time.After(mcRetry)
	}
	err = dataplane.RefreshGroups()
	unlock()
	if err != nil {
		a.logOnce("multicast groups: %v", err)
	}
	return nil
}

// sourceFiltersChanged reports whether /proc/net/mcfilter changed since
// the agent last read it (the first reading counts as a change: the
// filters may have changed since the sync).
func (a *agent) sourceFiltersChanged() bool {
	b, err := dataplane.ReadProcFile(dataplane.SourceFiltersFile)
	if err != nil {
		return false // no IPv4 (its groups are read with the others)
	}
	if string(b) == a.mcfText {
		return false
	}
	a.mcfText = string(b)
	return true
}
