package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// The fast path's decision kept between commands. A process that serves
// many commands (the agent) decided the fast path's targets and sources
// afresh at every commit: a dozen netlink requests, 0.3–0.5 ms of a
// served command. The facts it rests on that the kernel notifies (tc
// qdiscs and filters, nftables, the devices' XDP features; the links
// through WatchNetwork) are followed as netwatch.go follows links: one
// socket per multicast group, read without waiting at each decision, any
// notification queued (or lost, or a failed read) a change. While none
// came, the links did not change, the interfaces are the same and
// FastPathEnv says the same, the decision kept is the one a new decision
// would make, but for the facts the kernel notifies no one of (another
// user's TCX programs, legacy tables, tracked connections, IPsec
// policies): the agent polls those every second and forgets the kept
// decision when they changed (ForgetFastPathDecision), as it then decides
// the data plane's marks again; until then a command writes the marks the
// data plane already has.

// FastPathGroup is a netlink multicast group whose notifications may
// change the fast path's decision.
type FastPathGroup struct {
	Name  string
	Proto int
	Group uint32
}

// fastPathWatch is the process's subscriptions and the decision kept.
type fastPathWatch struct {
	mu  sync.Mutex
	fds []int // nil: not watching
	// epoch counts the changes seen (notifications, forgets).
	epoch uint64
	buf   []byte
	kept  *keptDecision
}

// keptDecision is a decision with what it was made for.
type keptDecision struct {
	d                 fastDecision
	epoch, linksEpoch uint64
	on                bool
	ifaces            []ifaceKey
}

// ifaceKey is what names an interface of a decision.
type ifaceKey struct {
	index int
	name  string
}

var fpFacts fastPathWatch

// WatchFastPathFacts makes this process follow groups (the agent, beside
// WatchNetwork) so that commands keep the fast path's decision while
// nothing changed; the returned function stops it. On an error nothing is
// followed and every command decides afresh.
func WatchFastPathFacts(groups []FastPathGroup) (stop func(), err error) {
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for _, g := range groups {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, g.Proto)
		if err == nil {
			fds = append(fds, fd)
			err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		}
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(g.Group))
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("follow %s notifications: %w", g.Name, err)
		}
	}
	fpFacts.mu.Lock()
	defer fpFacts.mu.Unlock()
	if fpFacts.fds != nil {
		closeAll()
		return nil, errors.New("the fast path's facts are already followed")
	}
	fpFacts.fds, fpFacts.kept = fds, nil
	fpFacts.epoch++
	fpFacts.buf = make([]byte, 16<<10)
	return func() {
		fpFacts.mu.Lock()
		defer fpFacts.mu.Unlock()
		fpFacts.stopLocked()
	}, nil
}

// stopLocked closes the subscriptions: every command decides afresh.
func (w *fastPathWatch) stopLocked() {
	for _, fd := range w.fds {
		unix.Close(fd)
	}
	w.fds, w.kept = nil, nil
	w.epoch++
}

// ForgetFastPathDecision drops the decision kept (the agent found the
// facts it polls changed).
func ForgetFastPathDecision() {
	fpFacts.mu.Lock()
	defer fpFacts.mu.Unlock()
	fpFacts.kept = nil
	fpFacts.epoch++
}

// pollLocked reads every queued notification without waiting and moves
// the epoch on when there was any (or some were lost). It reports
// whether the process watches at all.
func (w *fastPathWatch) pollLocked() bool {
	if w.fds == nil {
		return false
	}
	for _, fd := range w.fds {
		for {
			n, _, err := unix.Recvfrom(fd, w.buf, unix.MSG_DONTWAIT)
			switch {
			case err == nil && n > 0:
				w.epoch++
				continue
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
			case errors.Is(err, unix.ENOBUFS):
				w.epoch++ // notifications were lost
				continue
			default:
				// A socket that fails otherwise tells nothing more.
				w.stopLocked()
				return false
			}
			break
		}
	}
	return true
}

// decideFastPathKept is decideFastPath, answered from the decision kept
// when nothing it rests on changed since (see the top of this file).
func decideFastPathKept(ifaces []Interface) fastDecision {
	if !keptSessionActive() {
		return decideFastPath(ifaces)
	}
	// The links first: a link change seen after the facts' poll is
	// then one this decision may miss, and the next command sees it.
	links, watchingLinks := netFacts.currentEpoch()
	keys := make([]ifaceKey, len(ifaces))
	for i, ifc := range ifaces {
		keys[i] = ifaceKey{ifc.Index, ifc.Name}
	}
	on := FastPathOn()
	w := &fpFacts
	w.mu.Lock()
	watching := watchingLinks && w.pollLocked()
	epoch := w.epoch
	if k := w.kept; watching && k != nil && k.epoch == epoch && k.linksEpoch == links && k.on == on && slices.Equal(k.ifaces, keys) {
		w.mu.Unlock()
		return k.d
	}
	w.mu.Unlock()
	d := decideFastPath(ifaces)
	if watching {
		w.mu.Lock()
		if w.epoch == epoch && w.fds != nil {
			w.kept = &keptDecision{d: d, epoch: epoch, linksEpoch: links, on: on, ifaces: keys}
		}
		w.mu.Unlock()
	}
	return d
}
