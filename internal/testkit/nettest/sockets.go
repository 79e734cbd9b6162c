package nettest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// DefaultDialTimeout bounds TCPConnect, UDPSend's wait for a reply and
	// Ping when no WithTimeout is given.
	DefaultDialTimeout = 2 * time.Second
	// serverConnTimeout bounds the life of one connection a TCPServer
	// accepted, so a silent peer cannot hold it open.
	serverConnTimeout = 30 * time.Second
	// maxDatagram is the largest UDP payload the servers and UDPSend read.
	maxDatagram = 1 << 16
	// maxTCPRecord bounds the bytes a TCPServer keeps per connection.
	maxTCPRecord = 1 << 16
)

// Outcome is what became of a connection attempt, datagram or ping.
type Outcome string

const (
	// OK: connected (TCP), sent and answered as asked (UDP), echo reply (ping).
	OK Outcome = "ok"
	// Refused: TCP RST to the SYN, or ICMP port unreachable (ECONNREFUSED).
	Refused Outcome = "refused"
	// NotPermitted: the local stack refused to send (EPERM), as a DROP in
	// the sender's OUTPUT path does for UDP and ICMP. (A dropped TCP SYN is
	// retransmitted instead, so TCPConnect then reports TimedOut.)
	NotPermitted Outcome = "not-permitted"
	// Unreachable: an ICMP error other than port unreachable came back
	// (EHOSTUNREACH, ENETUNREACH, EACCES for IPv6 administratively
	// prohibited, ...), or for Ping any ICMP error quoting the request.
	Unreachable Outcome = "unreachable"
	// Reset: the connection was reset after it was established.
	Reset Outcome = "reset"
	// TimedOut: nothing came back in time (a silent DROP).
	TimedOut Outcome = "timed-out"
	// Failed: any other error; see Attempt.Err.
	Failed Outcome = "failed"
)

// Attempt is the result of TCPConnect, UDPSend or Ping.
type Attempt struct {
	// Outcome classifies the result.
	Outcome Outcome
	// Err is the underlying error (nil for OK).
	Err error
	// Errno is the system error behind Err, when there is one.
	Errno syscall.Errno
	// Local is the local address and port used, when known.
	Local netip.AddrPort
	// Reply is what came back: echoed TCP bytes, a UDP reply datagram, or
	// the ping's echo reply payload.
	Reply []byte
	// ICMPType and ICMPCode are those of the ICMP error Ping received.
	ICMPType, ICMPCode uint8
	// From is who sent Ping's reply or ICMP error.
	From netip.Addr
	// Elapsed is how long the attempt took.
	Elapsed time.Duration
}

// String summarises the attempt for test logs.
func (a Attempt) String() string {
	s := fmt.Sprintf("%s after %v", a.Outcome, a.Elapsed.Round(time.Millisecond))
	if a.Err != nil {
		s += fmt.Sprintf(" (%v)", a.Err)
	}
	if a.From.IsValid() {
		s += fmt.Sprintf(" from %s", a.From)
	}
	if a.ICMPType != 0 || a.ICMPCode != 0 {
		s += fmt.Sprintf(" icmp type %d code %d", a.ICMPType, a.ICMPCode)
	}
	return s
}

// classify sets Outcome and Errno from err.
func (a *Attempt) classify(err error) {
	a.Err = err
	if err == nil {
		a.Outcome = OK
		return
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		a.Errno = errno
	}
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		a.Outcome = Refused
	case errors.Is(err, syscall.EPERM):
		a.Outcome = NotPermitted
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		a.Outcome = Reset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENONET),
		errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPROTO),
		errors.Is(err, syscall.EMSGSIZE):
		a.Outcome = Unreachable
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		a.Outcome = TimedOut
	default:
		a.Outcome = Failed
	}
}

// dialConfig holds the DialOptions.
type dialConfig struct {
	timeout time.Duration
	source  netip.AddrPort
	payload []byte
	reply   bool
	// echoID is Ping's echo identifier when hasEchoID (else nextEchoID's).
	echoID    uint16
	hasEchoID bool
}

// DialOption configures TCPConnect, UDPSend and Ping.
type DialOption func(*dialConfig)

// WithTimeout bounds the whole attempt (default DefaultDialTimeout).
func WithTimeout(d time.Duration) DialOption { return func(c *dialConfig) { c.timeout = d } }

// WithSource binds the local address and/or port (zero parts are chosen by
// the kernel).
func WithSource(src netip.AddrPort) DialOption { return func(c *dialConfig) { c.source = src } }

// WithEchoID makes Ping send its echo request with identifier id instead
// of the next default one (a test whose rules match the identifier, as
// --ctorigsrcport does, must not depend on the draw). Fixed identifiers
// below 0x8000 never equal a default one (nextEchoID).
func WithEchoID(id uint16) DialOption {
	return func(c *dialConfig) { c.echoID, c.hasEchoID = id, true }
}

// WithPayload makes TCPConnect send payload once connected and read until as
// many bytes came back (from an echo server), EOF or the timeout.
func WithPayload(payload []byte) DialOption {
	return func(c *dialConfig) { c.payload = payload }
}

// ExpectReply makes UDPSend wait for a reply datagram: OK only if one came,
// Refused on ICMP port unreachable, TimedOut otherwise.
func ExpectReply() DialOption { return func(c *dialConfig) { c.reply = true } }

// newDialConfig applies opts to the defaults.
func newDialConfig(opts []DialOption) dialConfig {
	c := dialConfig{timeout: DefaultDialTimeout}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// localAddr returns the source as a net.Addr for network, or nil.
func (c dialConfig) localAddr(network string) net.Addr {
	if !c.source.IsValid() && c.source.Port() == 0 {
		return nil
	}
	if network == "tcp" {
		return net.TCPAddrFromAddrPort(c.source)
	}
	return net.UDPAddrFromAddrPort(c.source)
}

// TCPConnect connects from namespace ns to dst and reports the outcome: OK,
// Refused (RST), Unreachable (ICMP error), NotPermitted (local EPERM) or
// TimedOut (also for a SYN dropped in the sender's own OUTPUT path: the
// kernel retransmits it rather than failing connect). With WithPayload it
// then exchanges data with an echo server. The connection is closed before
// it returns.
func TCPConnect(ns string, dst netip.AddrPort, opts ...DialOption) Attempt {
	cfg := newDialConfig(opts)
	start := time.Now()
	var a Attempt
	err := InNamespace(ns, func() error {
		d := net.Dialer{Timeout: cfg.timeout, LocalAddr: cfg.localAddr("tcp"), KeepAlive: NoKeepAlive}
		conn, err := d.Dial("tcp", dst.String())
		if err != nil {
			a.classify(err)
			return nil
		}
		defer func() { _ = conn.Close() }()
		a.Local = conn.LocalAddr().(*net.TCPAddr).AddrPort()
		if len(cfg.payload) == 0 {
			a.classify(nil)
			return nil
		}
		if err := conn.SetDeadline(start.Add(cfg.timeout)); err != nil {
			return fmt.Errorf("set deadline: %w", err)
		}
		if _, err := conn.Write(cfg.payload); err != nil {
			a.classify(err)
			return nil
		}
		a.Reply = make([]byte, len(cfg.payload))
		n, err := io.ReadFull(conn, a.Reply)
		a.Reply = a.Reply[:n]
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("connection closed after %d of %d bytes: %w", n, len(cfg.payload), err)
			a.classify(err)
			a.Outcome = Reset
			return nil
		}
		a.classify(err)
		return nil
	})
	if err != nil {
		a.classify(fmt.Errorf("tcp connect in %s: %w", ns, err))
		a.Outcome = Failed
	}
	a.Elapsed = time.Since(start)
	return a
}

// UDPSend sends one datagram from namespace ns to dst. Without ExpectReply
// the outcome is OK once the kernel accepted it, or NotPermitted (an OUTPUT
// drop). With ExpectReply it waits for a reply: OK, Refused (ICMP port
// unreachable), Unreachable, or TimedOut.
func UDPSend(ns string, dst netip.AddrPort, payload []byte, opts ...DialOption) Attempt {
	cfg := newDialConfig(opts)
	start := time.Now()
	var a Attempt
	err := InNamespace(ns, func() error {
		var laddr *net.UDPAddr
		if l := cfg.localAddr("udp"); l != nil {
			laddr = l.(*net.UDPAddr)
		}
		// A connected socket reports ICMP errors about its peer on later calls.
		conn, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			a.classify(err)
			return nil
		}
		defer func() { _ = conn.Close() }()
		a.Local = conn.LocalAddr().(*net.UDPAddr).AddrPort()
		if err := conn.SetDeadline(start.Add(cfg.timeout)); err != nil {
			return fmt.Errorf("set deadline: %w", err)
		}
		if _, err := conn.Write(payload); err != nil || !cfg.reply {
			a.classify(err)
			return nil
		}
		buf := make([]byte, maxDatagram)
		n, err := conn.Read(buf)
		if err == nil {
			a.Reply = buf[:n]
		}
		a.classify(err)
		return nil
	})
	if err != nil {
		a.classify(fmt.Errorf("udp send in %s: %w", ns, err))
		a.Outcome = Failed
	}
	a.Elapsed = time.Since(start)
	return a
}

// Ping sends one ICMP or ICMPv6 echo request from namespace ns to dst over a
// raw socket and waits for the answer: OK for the echo reply, Unreachable
// for an ICMP error quoting the request (ICMPType and ICMPCode say which),
// NotPermitted when sending fails with EPERM, TimedOut otherwise.
func Ping(ns string, dst netip.Addr, opts ...DialOption) Attempt {
	cfg := newDialConfig(opts)
	start := time.Now()
	var a Attempt
	err := InNamespace(ns, func() error {
		return ping(&a, cfg, dst, start)
	})
	if err != nil {
		a.classify(fmt.Errorf("ping in %s: %w", ns, err))
		a.Outcome = Failed
	}
	a.Elapsed = time.Since(start)
	return a
}

// echoIDs hands out Ping's echo identifiers when WithEchoID gives none.
var echoIDs struct {
	once  sync.Once
	start uint32
	err   error
	next  atomic.Uint32
}

// nextEchoID is the next default echo identifier: from a random start, one
// after the other, in 0x8000-0xffff, so that no two pings of a test process
// (fewer than 32,768) share an identifier and none takes a test's fixed
// one (WithEchoID's, below 0x8000). A random identifier per ping repeated
// a still-tracked ICMP connection with odds 1 in 65,536 per pair of pings
// to one destination within conntrack's 30 s: the later ping then was no
// NEW connection, and twin firewalls' nat and state counters differed.
func nextEchoID() (uint16, error) {
	echoIDs.once.Do(func() {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			echoIDs.err = fmt.Errorf("random echo id: %w", err)
			return
		}
		echoIDs.start = uint32(binary.BigEndian.Uint16(b[:]))
	})
	if echoIDs.err != nil {
		return 0, echoIDs.err
	}
	return uint16(0x8000 | (echoIDs.start+echoIDs.next.Add(1))&0x7fff), nil
}

// pingPayload is the echo request's data.
var pingPayload = []byte("xfw-nettest-ping")

// ping does Ping's work inside the namespace.
func ping(a *Attempt, cfg dialConfig, dst netip.Addr, start time.Time) error {
	network, listen, reqType, replyType := "ip4:icmp", "0.0.0.0", ICMPv4EchoRequest, ICMPv4EchoReply
	if dst.Is6() && !dst.Is4In6() {
		network, listen, reqType, replyType = "ip6:ipv6-icmp", "::", ICMPv6EchoRequest, ICMPv6EchoReply
	}
	if cfg.source.Addr().IsValid() {
		listen = cfg.source.Addr().String()
	}
	conn, err := net.ListenPacket(network, listen)
	if err != nil {
		return fmt.Errorf("raw ICMP socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(start.Add(cfg.timeout)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	id, seq := cfg.echoID, uint16(1)
	if !cfg.hasEchoID {
		var err error
		if id, err = nextEchoID(); err != nil {
			return err
		}
	}
	rest := uint32(id)<<16 | uint32(seq)
	var msg []byte
	if reqType == ICMPv4EchoRequest {
		msg = ICMPv4{Type: reqType, Rest: rest, Payload: pingPayload}.Marshal(netip.Addr{}, netip.Addr{})
	} else {
		// The kernel fills in the ICMPv6 checksum of raw sockets.
		msg = icmpHeader(reqType, 0, rest, pingPayload)
	}
	if _, err := conn.WriteTo(msg, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		a.classify(err)
		return nil
	}
	buf := make([]byte, maxDatagram)
	for { // bounded by the deadline
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			a.classify(err)
			return nil
		}
		p := &Packet{IPVersion: 4, Protocol: ProtoICMP}
		if reqType == ICMPv6EchoRequest {
			p.IPVersion, p.Protocol = 6, ProtoICMPv6
		}
		if err := p.parseTransport(buf[:n]); err != nil {
			continue
		}
		fromIP, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
		switch {
		case p.ICMPType == replyType && p.ICMPRest == rest:
			a.Reply = append([]byte(nil), p.Payload...)
			a.From = fromIP.Unmap()
			a.classify(nil)
			return nil
		case p.IsICMPError() && p.Inner != nil && p.Inner.ICMPType == reqType && p.Inner.ICMPRest == rest:
			a.From = fromIP.Unmap()
			a.ICMPType, a.ICMPCode = p.ICMPType, p.ICMPCode
			a.Outcome = Unreachable
			a.Err = fmt.Errorf("ICMP error type %d code %d from %s", p.ICMPType, p.ICMPCode, a.From)
			return nil
		}
	}
}

// serverConfig holds the ServerOptions.
type serverConfig struct {
	echo bool
	// ackFIN acknowledges a peer's FIN before closing (TCP).
	ackFIN bool
}

// NoKeepAlive turns off TCP keepalives (net.Dialer and net.ListenConfig's
// KeepAlive). Go sends them every 15 s by default: a test slowed past that
// by load would see probes and their ACKs in the counters it compares.
const NoKeepAlive = -1

// ServerOption configures StartUDPServer and StartTCPServer.
type ServerOption func(*serverConfig)

// Echo makes a server send back what it receives.
func Echo() ServerOption { return func(c *serverConfig) { c.echo = true } }

// AckFINFirst makes a TCP server acknowledge the peer's FIN at once
// (TCP_QUICKACK) before it closes the connection. Without it the kernel
// delays that ACK (a FIN puts the socket in delayed-ACK mode), and the
// server's close either carries it in its FIN or follows it, by timing: a
// close from the peer then costs three segments or four. Tests that count
// forwarded packets need it always four.
func AckFINFirst() ServerOption { return func(c *serverConfig) { c.ackFIN = true } }

// Datagram is one datagram a UDPServer received.
type Datagram struct {
	// From is the sender's address and port (IPv4 unmapped).
	From netip.AddrPort
	// Payload is the datagram's data.
	Payload []byte
	// Time is when it was read.
	Time time.Time
}

// UDPServer records the datagrams that reach a UDP socket in a namespace.
type UDPServer struct {
	// Addr is the bound address and port.
	Addr netip.AddrPort

	ns   string
	conn *net.UDPConn
	rec  recorder[Datagram]
	done chan struct{}
	once sync.Once
	// syncs are the markers of pending Syncs, each closed when read.
	syncMu sync.Mutex
	syncs  map[string]chan struct{}
}

// StartUDPServer listens on addr (port 0 picks one; see Addr) in namespace
// ns and records every datagram until Close, which t.Cleanup calls. It fails
// the test if it cannot listen.
func StartUDPServer(t testing.TB, ns string, addr netip.AddrPort, opts ...ServerOption) *UDPServer {
	t.Helper()
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := &UDPServer{ns: ns, done: make(chan struct{}), syncs: map[string]chan struct{}{}}
	s.rec.init(maxCapturedFrames)
	err := InNamespace(ns, func() error {
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return err
		}
		s.conn = conn
		return nil
	})
	if err != nil {
		t.Fatalf("nettest: UDP server on %s in %s: %v", addr, ns, err)
	}
	s.Addr = s.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	go s.serve(cfg)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serve reads datagrams until the socket is closed.
func (s *UDPServer) serve(cfg serverConfig) {
	defer close(s.done)
	defer s.rec.close()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED left by an echo to a closed port
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if s.synced(buf[:n]) {
			continue
		}
		s.rec.add(Datagram{From: from, Payload: append([]byte(nil), buf[:n]...), Time: time.Now()})
		if cfg.echo {
			_, _ = s.conn.WriteToUDPAddrPort(buf[:n], from)
		}
	}
}

// Received returns the datagrams received so far.
func (s *UDPServer) Received() []Datagram { return s.rec.snapshot() }

// syncTag starts the payload of Sync's markers.
const syncTag = "xfw-nettest-sync-"

var syncSeq atomic.Uint64

// Sync returns once the server has read every datagram that was queued on
// its socket when Sync was called: it sends a marker datagram from the
// server's namespace to the server's address, which the socket queues
// behind them, and waits up to timeout for the server to read it (the
// marker is not recorded). After Topology.Drain, the datagrams fw
// forwarded to a server in sink are queued there: Received then has them
// all. The marker goes through the namespace's own loopback: use Sync
// only where no firewall filters it.
func (s *UDPServer) Sync(timeout time.Duration) error {
	tag := fmt.Sprintf("%s%d", syncTag, syncSeq.Add(1))
	seen := make(chan struct{})
	s.syncMu.Lock()
	s.syncs[tag] = seen
	s.syncMu.Unlock()
	defer func() {
		s.syncMu.Lock()
		delete(s.syncs, tag)
		s.syncMu.Unlock()
	}()
	dst := s.Addr
	if dst.Addr().IsUnspecified() {
		loopback := netip.IPv6Loopback()
		if dst.Addr().Is4() {
			loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		dst = netip.AddrPortFrom(loopback, dst.Port())
	}
	if a := UDPSend(s.ns, dst, []byte(tag)); a.Outcome != OK {
		return fmt.Errorf("nettest: sync UDP server %s in %s: %v", s.Addr, s.ns, a)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-seen:
		return nil
	case <-s.done:
		return fmt.Errorf("nettest: sync UDP server %s in %s: closed", s.Addr, s.ns)
	case <-timer.C:
		return fmt.Errorf("nettest: sync UDP server %s in %s: its marker not read in %v", s.Addr, s.ns, timeout)
	}
}

// synced reports whether payload is a pending Sync's marker, and signals
// that Sync.
func (s *UDPServer) synced(payload []byte) bool {
	if !bytes.HasPrefix(payload, []byte(syncTag)) {
		return false
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	seen, ok := s.syncs[string(payload)]
	if ok {
		close(seen)
		delete(s.syncs, string(payload))
	}
	return ok
}

// Wait waits until at least n datagrams arrived or the timeout passed, and
// returns those received by then.
func (s *UDPServer) Wait(n int, timeout time.Duration) []Datagram { return s.rec.wait(n, timeout) }

// WaitFor waits up to timeout for a datagram for which match returns true.
func (s *UDPServer) WaitFor(match func(Datagram) bool, timeout time.Duration) (Datagram, bool) {
	return s.rec.waitMatch(match, timeout)
}

// Close stops the server and waits for its goroutine. It may be called more
// than once.
func (s *UDPServer) Close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	<-s.done
	return err
}

// Conn is one connection a TCPServer accepted.
type Conn struct {
	// From is the client's address and port (IPv4 unmapped).
	From netip.AddrPort
	// Data is what the client sent (up to 64 KiB), known once it closed.
	Data []byte
	// Time is when it was accepted.
	Time time.Time
}

// TCPServer accepts connections in a namespace and records them.
type TCPServer struct {
	// Addr is the bound address and port.
	Addr netip.AddrPort

	ln       *net.TCPListener
	accepted recorder[Conn]
	finished recorder[Conn]
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
	once     sync.Once
}

// StartTCPServer listens on addr (port 0 picks one; see Addr) in namespace
// ns and accepts connections until Close, which t.Cleanup calls. Each
// connection is read to its end (bounded) and, with Echo, echoed. It fails
// the test if it cannot listen.
func StartTCPServer(t testing.TB, ns string, addr netip.AddrPort, opts ...ServerOption) *TCPServer {
	t.Helper()
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := &TCPServer{conns: map[net.Conn]bool{}}
	s.accepted.init(maxCapturedFrames)
	s.finished.init(maxCapturedFrames)
	err := InNamespace(ns, func() error {
		lc := net.ListenConfig{KeepAlive: NoKeepAlive}
		ln, err := lc.Listen(context.Background(), "tcp", addr.String())
		if err != nil {
			return err
		}
		s.ln = ln.(*net.TCPListener)
		return nil
	})
	if err != nil {
		t.Fatalf("nettest: TCP server on %s in %s: %v", addr, ns, err)
	}
	s.Addr = s.ln.Addr().(*net.TCPAddr).AddrPort()
	s.wg.Add(1)
	go s.serve(cfg)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serve accepts connections until the listener is closed.
func (s *TCPServer) serve(cfg serverConfig) {
	defer s.wg.Done()
	defer s.accepted.close()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		ap := c.RemoteAddr().(*net.TCPAddr).AddrPort()
		rec := Conn{From: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Time: time.Now()}
		s.accepted.add(rec)
		s.wg.Add(1)
		go s.handle(c, rec, cfg)
	}
}

// handle reads (and echoes) one connection until EOF, error or timeout.
func (s *TCPServer) handle(c net.Conn, rec Conn, cfg serverConfig) {
	defer s.wg.Done()
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.finished.add(rec)
	}()
	_ = c.SetDeadline(time.Now().Add(serverConnTimeout))
	buf := make([]byte, maxDatagram)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if len(rec.Data) < maxTCPRecord {
				rec.Data = append(rec.Data, buf[:min(n, maxTCPRecord-len(rec.Data))]...)
			}
			if cfg.echo {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if cfg.ackFIN && errors.Is(err, io.EOF) {
				quickAck(c)
			}
			return
		}
	}
}

// quickAck sends a TCP connection's pending ACK now (TCP_QUICKACK).
func quickAck(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}

// Accepted returns the connections accepted so far.
func (s *TCPServer) Accepted() []Conn { return s.accepted.snapshot() }

// Wait waits until at least n connections were accepted or the timeout
// passed, and returns those accepted by then.
func (s *TCPServer) Wait(n int, timeout time.Duration) []Conn { return s.accepted.wait(n, timeout) }

// WaitFinished waits until at least n connections ended (their Data is then
// complete) or the timeout passed, and returns those.
func (s *TCPServer) WaitFinished(n int, timeout time.Duration) []Conn {
	return s.finished.wait(n, timeout)
}

// Close stops accepting, closes open connections and waits for the
// server's goroutines. It may be called more than once.
func (s *TCPServer) Close() error {
	var err error
	s.once.Do(func() {
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return err
}
