package logd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

const (
	// ringPollInterval bounds how long Run takes to notice that xfw was
	// started again with a new ring buffer, or started at all.
	ringPollInterval = time.Second
	// ifCacheMaxAge bounds how long an interface name is trusted (a
	// renamed interface keeps its index).
	ifCacheMaxAge = 10 * time.Second
	// ifMissRefreshGap throttles the refreshes a flood of events about a
	// vanished interface would cause.
	ifMissRefreshGap = 100 * time.Millisecond
	// kmsgPath is the kernel log device.
	kmsgPath = "/dev/kmsg"
)

// Run copies the LOG events of the xfw data plane running in the current
// network namespace to out, one line each as the kernel's LOG target prints
// it (see Format), with a trailing newline. When kmsg is true each line is
// also written to /dev/kmsg with the rule's syslog level as a "<level>"
// prefix, so that dmesg shows it like the kernel's own LOG lines. (The
// kernel marks records written there with the user facility, and with
// kernel.printk_devkmsg=ratelimit, the default, it drops lines beyond its
// rate limit of 10 per 5 seconds; set it to "on" to keep every line.)
//
// Run waits for xfw when it is not loaded, keeps the ring buffer when the
// data plane is replaced (the loader reuses the map), and switches to the
// new ring, after reading what is left in the old one, when xfw is stopped
// and started again; it checks for that at least every second. It returns
// nil when ctx is cancelled, after writing the events already in the ring,
// or the first error of writing, reading or decoding. An error opening the
// ring is returned when it happens at start; later ones are retried.
func Run(ctx context.Context, out io.Writer, kmsg bool) error {
	r := &runner{out: out, names: newIfNames(), host: liveHost{}}
	if kmsg {
		f, err := os.OpenFile(kmsgPath, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", kmsgPath, err)
		}
		defer f.Close()
		r.kmsg = f
	}
	return r.run(ctx)
}

// runner holds Run's state.
type runner struct {
	out   io.Writer
	kmsg  io.Writer
	names *ifNames
	host  host
	// open returns the running ring, or nil when xfw is not loaded (a
	// variable for tests).
	open func() (*ebpf.Map, error)
	// sink, when set, takes each event instead of write (xfw nflog).
	sink func(Event) error
	// skipOld discards the events the first ring holds when it is opened
	// (NFLOG events nobody listened for).
	skipOld bool
	// opened, when set, is called once the first ring is read.
	opened func()
}

// ring is an open ring buffer.
type ring struct {
	id ebpf.MapID
	m  *ebpf.Map
	rd *ringbuf.Reader
	// stopFlush cancels the flush that ctx's cancellation triggers.
	stopFlush func() bool
}

// close releases the ring.
func (g *ring) close() {
	g.stopFlush()
	g.rd.Close()
	g.m.Close()
}

// openRunningRing returns the running LOG ring buffer, or nil when xfw is
// not loaded in the namespace.
func openRunningRing() (*ebpf.Map, error) {
	return openRunning(dataplane.LogRing, "LOG")
}

// openRunning returns the ring buffer ring opens (what names it in
// errors), or nil when xfw is not loaded in the namespace.
func openRunning(ring func() (*ebpf.Map, error), what string) (*ebpf.Map, error) {
	m, err := ring()
	if err == nil {
		return m, nil
	}
	cur, cerr := dataplane.Current()
	if cerr == nil && cur == nil {
		return nil, nil
	}
	cur.Close()
	return nil, fmt.Errorf("open the %s ring buffer: %w", what, err)
}

// newRing starts reading m; ctx's cancellation flushes the reader.
func newRing(ctx context.Context, m *ebpf.Map) (*ring, error) {
	info, err := m.Info()
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("LOG ring buffer info: %w", err)
	}
	id, _ := info.ID()
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("read the LOG ring buffer: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = rd.Flush() })
	return &ring{id: id, m: m, rd: rd, stopFlush: stop}, nil
}

// run is Run's loop.
func (r *runner) run(ctx context.Context) error {
	if r.open == nil {
		r.open = openRunningRing
	}
	var cur *ring
	defer func() {
		if cur != nil {
			cur.close()
		}
	}()
	started := false
	var lastCheck time.Time
	var rec ringbuf.Record
	// budget bounds the events written after ctx is cancelled: those in
	// the ring at that time (the reader stops at ErrFlushed once it has
	// caught up, which a fast producer could otherwise prevent).
	budget := -1
	for {
		if cur == nil {
			m, err := r.open()
			if err != nil && !started {
				return err
			}
			started = true
			if m == nil {
				if !sleepCtx(ctx, ringPollInterval) {
					return nil
				}
				continue
			}
			if cur, err = newRing(ctx, m); err != nil {
				return err
			}
			if r.skipOld {
				r.skipOld = false
				skipPending(cur)
			}
			if r.opened != nil {
				r.opened()
				r.opened = nil
			}
			lastCheck = time.Now()
		}
		cur.rd.SetDeadline(lastCheck.Add(ringPollInterval))
		err := cur.rd.ReadInto(&rec)
		switch {
		case err == nil:
			if err := r.handle(rec.RawSample); err != nil {
				return err
			}
			if ctx.Err() != nil {
				if budget < 0 {
					budget = cur.rd.AvailableBytes()/recordStride(len(rec.RawSample)) + 1
				}
				if budget--; budget <= 0 {
					return nil
				}
			}
		case errors.Is(err, ringbuf.ErrFlushed):
			return nil // ctx cancelled: what was in the ring is written
		case errors.Is(err, os.ErrDeadlineExceeded):
			if ctx.Err() != nil {
				return nil
			}
		default:
			return fmt.Errorf("read the LOG ring buffer: %w", err)
		}
		if ctx.Err() != nil || time.Since(lastCheck) < ringPollInterval {
			continue
		}
		lastCheck = time.Now()
		next, err := r.replacement(ctx, cur)
		if err != nil {
			return err
		}
		if next != nil {
			cur.close()
			cur = next
		}
	}
}

// ringHeaderLen is BPF_RINGBUF_HDR_SZ, the header of each ring record;
// records are 8-byte aligned.
const ringHeaderLen = 8

// recordStride is the room a record of n bytes takes in the ring.
func recordStride(n int) int {
	return (n + ringHeaderLen + ringHeaderLen - 1) &^ (ringHeaderLen - 1)
}

// replacement returns the ring that replaced cur, after writing what is
// left in cur, or nil when cur is still the running ring or xfw is not
// loaded (cur may still hold events then).
func (r *runner) replacement(ctx context.Context, cur *ring) (*ring, error) {
	m, err := r.open()
	if err != nil || m == nil {
		return nil, nil // stopped or being replaced: look again later
	}
	info, err := m.Info()
	if err != nil {
		m.Close()
		return nil, nil
	}
	if id, ok := info.ID(); ok && id == cur.id {
		m.Close()
		return nil, nil
	}
	if err := r.drain(cur); err != nil {
		m.Close()
		return nil, err
	}
	return newRing(ctx, m)
}

// drain writes the events left in g without waiting for more.
func (r *runner) drain(g *ring) error {
	var rec ringbuf.Record
	g.rd.SetDeadline(time.Now())
	for {
		err := g.rd.ReadInto(&rec)
		switch {
		case err == nil:
			if err := r.handle(rec.RawSample); err != nil {
				return err
			}
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
			return nil
		default:
			return fmt.Errorf("read the old LOG ring buffer: %w", err)
		}
	}
}

// handle formats one raw event and writes it.
func (r *runner) handle(raw []byte) error {
	ev, err := dataplane.DecodeLogEvent(raw)
	if err != nil {
		return err
	}
	if r.sink != nil {
		return r.sink(ev)
	}
	return r.write(ev)
}

// write formats ev and writes the line.
func (r *runner) write(ev Event) error {
	line := formatEvent(ev, r.names.name, r.host)
	if _, err := io.WriteString(r.out, line+"\n"); err != nil {
		return fmt.Errorf("write LOG line: %w", err)
	}
	if r.kmsg != nil {
		if _, err := fmt.Fprintf(r.kmsg, "<%d>%s\n", ev.Level, line); err != nil {
			return fmt.Errorf("write LOG line to %s: %w", kmsgPath, err)
		}
	}
	return nil
}

// sleepCtx waits for d; it returns false when ctx was cancelled first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ifNames resolves interface indexes of the current namespace, caching the
// table and reloading it on a miss.
type ifNames struct {
	mu      sync.Mutex
	byIndex map[uint32]string
	loaded  time.Time
	// list returns the interfaces (a variable for tests).
	list func() ([]net.Interface, error)
}

func newIfNames() *ifNames {
	return &ifNames{list: net.Interfaces}
}

// name returns the name of interface index, or "if<index>" when no
// interface has it (it vanished before the event was read).
func (c *ifNames) name(index uint32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.loaded) > ifCacheMaxAge {
		c.reload(now)
	}
	if n, ok := c.byIndex[index]; ok {
		return n
	}
	if now.Sub(c.loaded) > ifMissRefreshGap {
		c.reload(now)
		if n, ok := c.byIndex[index]; ok {
			return n
		}
	}
	return fmt.Sprintf("if%d", index)
}

// reload reads the interface table; on error the old table stays.
func (c *ifNames) reload(now time.Time) {
	c.loaded = now
	ifs, err := c.list()
	if err != nil {
		return
	}
	c.byIndex = make(map[uint32]string, len(ifs))
	for _, i := range ifs {
		c.byIndex[uint32(i.Index)] = i.Name
	}
}

// liveHost answers the kernel's lookups from the current namespace's
// routing table.
type liveHost struct{}

// specDst is the preferred source of the route back to src.
func (liveHost) specDst(src netip.Addr) (netip.Addr, bool) {
	routes, err := netlink.RouteGet(src.AsSlice())
	if err != nil || len(routes) == 0 {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(routes[0].Src)
	if !ok {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// isLocal reports whether the route to a is a local one.
func (liveHost) isLocal(a netip.Addr) bool {
	routes, err := netlink.RouteGet(a.AsSlice())
	return err == nil && len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL
}

func (liveHost) now() time.Time { return time.Now() }
