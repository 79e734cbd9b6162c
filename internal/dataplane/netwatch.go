package dataplane

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A process that serves many commands (the agent) follows the
// namespace's links, addresses and routes instead of dumping them at
// every command (WatchNetwork): a netlink socket subscribed to their
// changes, read without waiting. The kernel queues a change's
// notification on the socket before the request that made it returns
// (rtnl_notify runs in the request), so a command that finds the socket
// empty knows of every change made before it began: the links it dumped
// last, and the addresses and routes it copied into the running state's
// maps, are still the namespace's. Anything queued, a lost notification
// (ENOBUFS: the socket overflowed) or a read error counts as a change,
// and the command dumps them again. A change made while a dump runs stays
// queued for the next command, which dumps again. What has no
// notification (sysctls, the fast path's facts, the TCX hooks) is read at
// every command as before.

// netWatchGroups are the notifications that change what a command would
// dump: links (devices, their flags, masters, XDP programs attached
// through netlink), both families' addresses and routes (the local and
// main tables), and IPv4's policy rules (the first one configured splits
// the kernel's merged local and main tables: ipv4TablesMerged).
const netWatchGroups = unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV4_ROUTE |
	unix.RTMGRP_IPV4_RULE | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV6_ROUTE

// netWatchBuffer is the socket's receive buffer: a burst of notifications
// larger than this between two commands overflows it, and the next
// command dumps (a lost notification is a change).
const netWatchBuffer = 1 << 20

// netWatch is the process's watch: its socket and what is known to be
// current while the socket stays empty.
type netWatch struct {
	mu sync.Mutex
	fd int // -1: not watching
	// epoch counts the changes seen: what was learnt in an older epoch
	// may be stale.
	epoch uint64
	// links is the last link dump, taken in epoch linksEpoch.
	links      []netlink.Link
	linksEpoch uint64
	// filled is the state whose maps got the addresses and routes of a
	// dump taken in epoch filledEpoch (nil: none).
	filled      *state
	filledEpoch uint64
	buf         []byte
}

var netFacts = netWatch{fd: -1}

// WatchNetwork makes this process follow the namespace's links, addresses
// and routes (the agent, before it serves commands); the returned
// function stops it.
func WatchNetwork() (stop func(), err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, netWatchBuffer); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket buffer: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: netWatchGroups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("subscribe to link, address and route changes: %w", err)
	}
	netFacts.mu.Lock()
	defer netFacts.mu.Unlock()
	if netFacts.fd >= 0 {
		unix.Close(fd)
		return nil, errors.New("the network is already watched")
	}
	netFacts.fd = fd
	netFacts.epoch++
	netFacts.buf = make([]byte, 64<<10)
	return func() {
		netFacts.mu.Lock()
		defer netFacts.mu.Unlock()
		unix.Close(netFacts.fd)
		netFacts.fd = -1
		netFacts.links, netFacts.filled = nil, nil
	}, nil
}

// pollLocked reads every queued notification without waiting and moves
// the epoch on when there was any (or a read failed). It reports whether
// the process watches at all.
func (w *netWatch) pollLocked() bool {
	if w.fd < 0 {
		return false
	}
	for {
		n, _, err := unix.Recvfrom(w.fd, w.buf, unix.MSG_DONTWAIT)
		switch {
		case err == nil && n > 0:
			w.epoch++
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return true
		case errors.Is(err, unix.ENOBUFS):
			w.epoch++ // notifications were lost
			continue
		}
		// A socket that fails otherwise tells nothing more: stop
		// watching, every command dumps.
		w.epoch++
		unix.Close(w.fd)
		w.fd = -1
		w.links, w.filled = nil, nil
		return false
	}
}

// linkList returns the namespace's links: the last dump when the watch
// saw no change since (kept true), else a new dump (netlink.LinkList).
// The links returned are shared: read them, never change them.
func (w *netWatch) linkList() (links []netlink.Link, kept bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pollLocked() {
		links, err = ListLinks()
		return links, false, err
	}
	if w.links != nil && w.linksEpoch == w.epoch {
		return w.links, true, nil
	}
	if links, err = ListLinks(); err != nil {
		return nil, false, err
	}
	w.links, w.linksEpoch = links, w.epoch
	return links, false, nil
}

// keptLinks returns the last link dump when the watch saw no change since
// it was taken (kept true); otherwise kept is false: the caller asks the
// kernel itself (no dump is taken here). The links are shared: read only.
func (w *netWatch) keptLinks() (links []netlink.Link, kept bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pollLocked() || w.links == nil || w.linksEpoch != w.epoch {
		return nil, false
	}
	return w.links, true
}

// refreshUnannounced asks again for the links among ifaces whose XDP hook
// may have changed unannounced: an XDP program attached through a bpf_link
// is not notified, and only where xfw runs no XDP program of its own (a
// bridge port, a pending veth) can one be attached at all (a hook holding
// a program attached through netlink refuses a link). ifaces come from
// links the watch kept (linkList).
func refreshUnannounced(ifaces []Interface) error {
	for i := range ifaces {
		if !ifaces[i].BridgePort && !ifaces[i].PendingVeth {
			continue
		}
		l, err := netlink.LinkByIndex(ifaces[i].Index)
		var gone netlink.LinkNotFoundError
		switch {
		case errors.As(err, &gone):
			// Removed since the dump, as if just after it: the
			// removal is queued for the next command.
		case err != nil:
			return fmt.Errorf("interface %s: %w", ifaces[i].Name, err)
		default:
			ifaces[i].link = l
		}
	}
	return nil
}

// currentEpoch returns the watch's epoch once every queued notification
// is read, and whether the process watches at all: what was learnt from
// the namespace after this call, in this epoch, stays current while the
// epoch does.
func (w *netWatch) currentEpoch() (epoch uint64, watching bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pollLocked() {
		return 0, false
	}
	return w.epoch, true
}

// filledFor reports whether cur's maps hold the addresses and routes of
// the namespace now (a fill of cur since the last change), and the epoch
// a fill starting now is of (for markFilled).
func (w *netWatch) filledFor(cur *state) (current bool, epoch uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pollLocked() {
		return false, 0
	}
	return w.filled == cur && w.filledEpoch == w.epoch, w.epoch
}

// markFilled records that cur's maps got the addresses and routes of a
// dump taken in epoch (filledFor's); a change seen since makes the record
// stale at once.
func (w *netWatch) markFilled(cur *state, epoch uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	w.filled, w.filledEpoch = cur, epoch
}

// forgetFilled drops the record of a fill (a fill failed half-way).
func (w *netWatch) forgetFilled() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.filled = nil
}
