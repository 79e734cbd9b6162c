package nettest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// DefaultCaptureDuration bounds a capture: it stops reading by itself
	// after this long even if nobody calls Stop.
	DefaultCaptureDuration = 60 * time.Second
	// maxCapturedFrames bounds the memory a capture (or a server) keeps.
	maxCapturedFrames = 10000
	// captureBufSize fits any frame on a 1500-byte veth, and GRO aggregates
	// up to 64 KiB.
	captureBufSize = 1 << 17
	// auxBufSize is room for one PACKET_AUXDATA control message.
	auxBufSize = 64
	// streamRcvBuf is the socket buffer of a StartCaptureFunc capture.
	streamRcvBuf = 8 << 20
)

// htons converts a 16-bit value to network byte order for AF_PACKET.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// packetSocket opens an AF_PACKET raw socket for protocol proto (host
// order; 0 receives nothing). It must be called in the target namespace.
func packetSocket(proto uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(proto)))
	if err != nil {
		return -1, fmt.Errorf("socket(AF_PACKET): %w", err)
	}
	return fd, nil
}

// closeFD closes a file descriptor, ignoring errors (used on cleanup paths).
func closeFD(fd int) { _ = unix.Close(fd) }

// Inject sends frames, unchanged, out of interface ifname in namespace ns
// through an AF_PACKET socket: each leaves the interface as if the namespace
// had sent it, and arrives at the veth peer. A frame needs at least an
// Ethernet header and at most the MTU plus headers.
func Inject(ns, ifname string, frames ...[]byte) error {
	return InNamespace(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("inject on %s in %s: %w", ifname, ns, err)
		}
		fd, err := packetSocket(0)
		if err != nil {
			return fmt.Errorf("inject on %s in %s: %w", ifname, ns, err)
		}
		defer closeFD(fd)
		for i, f := range frames {
			if len(f) < ethHeaderLen {
				return fmt.Errorf("inject frame %d on %s in %s: %d bytes is shorter than an Ethernet header", i, ifname, ns, len(f))
			}
			sa := &unix.SockaddrLinklayer{
				Ifindex:  ifi.Index,
				Protocol: htons(binary.BigEndian.Uint16(f[12:14])),
				Halen:    6, // Ethernet address length
			}
			copy(sa.Addr[:], f[0:6])
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return fmt.Errorf("inject frame %d (%d bytes) on %s in %s: %w", i, len(f), ifname, ns, err)
			}
		}
		return nil
	})
}

// Captured is one frame seen by a Capture.
type Captured struct {
	// Packet is the decoded frame (decoding errors leave layers zero).
	*Packet
	// Time is when the frame was read.
	Time time.Time
	// Outgoing is true for frames the namespace sent out of the interface,
	// false for frames it received.
	Outgoing bool
}

// Capture records the frames seen on one interface of a namespace
// (AF_PACKET, both directions, VLAN tags restored). Start it with
// StartCapture; it stops by itself after its duration.
type Capture struct {
	// NS and Ifname say where the capture listens.
	NS, Ifname string

	filter func(Captured) bool
	// fn, when set, receives the frames instead of rec (StartCaptureFunc).
	fn      func(Captured)
	file    *os.File
	rec     recorder[Captured]
	done    chan struct{}
	stopMu  sync.Mutex
	stopped bool
	err     error
}

// StartCapture starts recording the frames on ifname in ns for which filter
// returns true (all frames if filter is nil), for at most
// DefaultCaptureDuration. The capture is armed when StartCapture returns.
// It fails the test if the socket cannot be opened, and is stopped by
// t.Cleanup.
func StartCapture(t testing.TB, ns, ifname string, filter func(Captured) bool) *Capture {
	t.Helper()
	c, err := StartCaptureFor(ns, ifname, DefaultCaptureDuration, filter)
	if err != nil {
		t.Fatalf("nettest: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// StartCaptureFor is StartCapture for at most d, without a test: the caller
// must call Stop.
func StartCaptureFor(ns, ifname string, d time.Duration, filter func(Captured) bool) (*Capture, error) {
	return startCapture(ns, ifname, d, filter, nil)
}

// startCapture opens and starts a capture; frames go to fn when it is set,
// else they are recorded.
func startCapture(ns, ifname string, d time.Duration, filter func(Captured) bool, fn func(Captured)) (*Capture, error) {
	c := &Capture{NS: ns, Ifname: ifname, filter: filter, fn: fn, done: make(chan struct{})}
	c.rec.init(maxCapturedFrames)
	var fd int
	err := InNamespace(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		// Protocol 0 receives nothing until bind picks the interface, so no
		// frame of another interface slips in.
		if fd, err = packetSocket(0); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			closeFD(fd)
			return fmt.Errorf("setsockopt(PACKET_AUXDATA): %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(unix.ETH_P_ALL)}); err != nil {
			closeFD(fd)
			return fmt.Errorf("bind AF_PACKET to %s: %w", ifname, err)
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			closeFD(fd)
			return fmt.Errorf("set non-blocking: %w", err)
		}
		if fn != nil {
			// Long streaming captures see bursts: room for thousands of
			// frames while fn catches up (best effort: the limit is
			// net.core.rmem_max without CAP_NET_ADMIN).
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, streamRcvBuf); err != nil {
				_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, streamRcvBuf)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("capture on %s in %s: %w", ifname, ns, err)
	}
	// A non-blocking descriptor makes os.File use the runtime poller, so
	// reads honour deadlines and Close interrupts them.
	c.file = os.NewFile(uintptr(fd), "capture:"+ns+":"+ifname)
	if err := c.file.SetReadDeadline(time.Now().Add(d)); err != nil {
		_ = c.file.Close()
		return nil, fmt.Errorf("capture on %s in %s: set deadline: %w", ifname, ns, err)
	}
	go c.loop()
	return c, nil
}

// loop reads frames until the deadline or Stop.
func (c *Capture) loop() {
	defer close(c.done)
	defer c.rec.close()
	rc, err := c.file.SyscallConn()
	if err != nil {
		c.setErr(err)
		return
	}
	buf := make([]byte, captureBufSize)
	oob := make([]byte, auxBufSize)
	for {
		var n, oobn int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, from, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				c.setErr(err)
			}
			return
		}
		c.keep(buf[:n], oob[:oobn], from)
	}
}

// keep decodes one frame read from the socket and records it (or hands it
// to fn) if the filter takes it.
func (c *Capture) keep(raw, oob []byte, from unix.Sockaddr) {
	frame := restoreVLAN(raw, oob)
	p, _ := Parse(frame)
	got := Captured{Packet: p, Time: time.Now()}
	if ll, ok := from.(*unix.SockaddrLinklayer); ok {
		got.Outgoing = ll.Pkttype == unix.PACKET_OUTGOING
	}
	if c.filter == nil || c.filter(got) {
		if c.fn != nil {
			c.fn(got)
		} else {
			c.rec.add(got)
		}
	}
}

// restoreVLAN returns a copy of frame with the VLAN tag the kernel moved to
// the packet's metadata (PACKET_AUXDATA) put back after the MAC addresses.
func restoreVLAN(frame, oob []byte) []byte {
	out := append([]byte(nil), frame...)
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(out) < 2*6 {
		return out
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA ||
			len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
			continue
		}
		aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
		if aux.Status&unix.TP_STATUS_VLAN_VALID == 0 {
			continue
		}
		tpid := EtherTypeVLAN
		if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && aux.Vlan_tpid != 0 {
			tpid = aux.Vlan_tpid
		}
		tag := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), aux.Vlan_tci)
		withTag := make([]byte, 0, len(out)+vlanTagLen)
		withTag = append(withTag, out[:12]...) // the two MAC addresses
		withTag = append(withTag, tag...)
		out = append(withTag, out[12:]...)
	}
	return out
}

// setErr records the first read error.
func (c *Capture) setErr(err error) {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// Dropped returns how many frames the capture's socket dropped (its buffer
// was full) since the previous call (PACKET_STATISTICS).
func (c *Capture) Dropped() (int, error) {
	rc, err := c.file.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("capture on %s in %s: %w", c.Ifname, c.NS, err)
	}
	var st *unix.TpacketStats
	var serr error
	if err := rc.Control(func(fd uintptr) {
		st, serr = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	}); err != nil {
		return 0, fmt.Errorf("capture on %s in %s: %w", c.Ifname, c.NS, err)
	}
	if serr != nil {
		return 0, fmt.Errorf("capture on %s in %s: PACKET_STATISTICS: %w", c.Ifname, c.NS, serr)
	}
	return int(st.Drops), nil
}

// Err returns the read error that ended the capture early, if any.
func (c *Capture) Err() error {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	return c.err
}

// Frames returns the frames recorded so far.
func (c *Capture) Frames() []Captured { return c.rec.snapshot() }

// Wait waits until at least n frames were recorded, the timeout passes or
// the capture ends, and returns the frames recorded by then.
func (c *Capture) Wait(n int, timeout time.Duration) []Captured {
	return c.rec.wait(n, timeout)
}

// WaitFor waits up to timeout for a recorded frame for which match returns
// true, and returns the first one.
func (c *Capture) WaitFor(match func(Captured) bool, timeout time.Duration) (Captured, bool) {
	return c.rec.waitMatch(match, timeout)
}

// Stop ends the capture and returns every frame it recorded. It may be
// called more than once.
func (c *Capture) Stop() []Captured {
	c.stopMu.Lock()
	if !c.stopped {
		c.stopped = true
		_ = c.file.Close() // interrupts the pending read
	}
	c.stopMu.Unlock()
	<-c.done
	return c.rec.snapshot()
}

// StopQueued ends the capture after reading every frame already queued on
// its socket, and returns every frame it recorded. After Topology.Drain,
// a frame fw forwarded to the captured interface before the call is
// queued there: StopQueued then tells for certain whether it arrived,
// where Wait could only wait a while for it. It may be called more than
// once, and after Stop (which discards the queue).
func (c *Capture) StopQueued() []Captured {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		<-c.done
		return c.rec.snapshot()
	}
	c.stopped = true
	// A past deadline ends the loop without losing a frame: it returns
	// between two reads, and the queue stays on the socket.
	derr := c.file.SetReadDeadline(time.Unix(1, 0))
	<-c.done
	if derr == nil {
		c.readQueued()
	} else if c.err == nil {
		c.err = fmt.Errorf("capture on %s in %s: set deadline: %w", c.Ifname, c.NS, derr)
	}
	_ = c.file.Close()
	return c.rec.snapshot()
}

// readQueued reads the frames queued on the stopped capture's socket,
// without waiting, into the record. The caller holds stopMu.
func (c *Capture) readQueued() {
	rc, err := c.file.SyscallConn()
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return
	}
	buf := make([]byte, captureBufSize)
	oob := make([]byte, auxBufSize)
	for {
		var n, oobn int
		var from unix.Sockaddr
		var rerr error
		if err := rc.Control(func(fd uintptr) {
			n, oobn, _, from, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
		}); err != nil {
			rerr = err
		}
		if rerr != nil {
			if !errors.Is(rerr, unix.EAGAIN) && c.err == nil {
				c.err = rerr
			}
			return
		}
		c.keep(buf[:n], oob[:oobn], from)
	}
}

// recorder is a bounded, waitable list of items added by one goroutine.
type recorder[T any] struct {
	mu      sync.Mutex
	items   []T
	max     int
	closed  bool
	changed chan struct{} // closed and replaced on every change
}

// init prepares an empty recorder keeping at most max items.
func (r *recorder[T]) init(max int) {
	r.max = max
	r.changed = make(chan struct{})
}

// add appends v (dropped beyond max) and wakes waiters.
func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) < r.max {
		r.items = append(r.items, v)
	}
	if r.closed { // a capture's queue read after its loop ended
		return
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// close marks the end of additions and wakes waiters.
func (r *recorder[T]) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.changed)
	}
}

// snapshot returns a copy of the items.
func (r *recorder[T]) snapshot() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// wait waits for at least n items, the timeout, or close.
func (r *recorder[T]) wait(n int, timeout time.Duration) []T {
	items, _ := r.waitUntil(timeout, func(items []T) bool { return len(items) >= n })
	return items
}

// waitMatch waits for an item matching match.
func (r *recorder[T]) waitMatch(match func(T) bool, timeout time.Duration) (T, bool) {
	var found T
	_, ok := r.waitUntil(timeout, func(items []T) bool {
		for _, it := range items {
			if match(it) {
				found = it
				return true
			}
		}
		return false
	})
	return found, ok
}

// waitUntil waits until cond holds for the items, the timeout passes or the
// recorder is closed; it returns the items and whether cond held.
func (r *recorder[T]) waitUntil(timeout time.Duration, cond func([]T) bool) ([]T, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		items := append([]T(nil), r.items...)
		changed, closed := r.changed, r.closed
		r.mu.Unlock()
		if cond(items) {
			return items, true
		}
		if closed {
			return items, false
		}
		select {
		case <-changed:
		case <-timer.C:
			return items, cond(items)
		}
	}
}
