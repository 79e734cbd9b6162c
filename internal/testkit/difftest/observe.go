package difftest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file holds the observers: what each topology saw, as events, and
// how an event is attributed to a probe and normalised for comparison.

// eventKind says which observer saw an event.
type eventKind uint8

const (
	// evGen and evSink: a frame arrived at gen's or sink's interface.
	evGen eventKind = iota
	evSink
	// evLocal: fw's socket layer received a packet (a raw socket got it:
	// it passed INPUT).
	evLocal
	// evLog: a LOG line.
	evLog
)

// event is one observation.
type event struct {
	kind eventKind
	// pkt is the frame (evGen, evSink; l3 is where its IP header starts)
	// or, for evLocal, the packet as far as the socket shows it.
	pkt *nettest.Packet
	l3  int
	// local says which raw socket saw an evLocal delivery.
	local string
	// line is an evLog line.
	line string
	// cands are the probes it may belong to.
	cands []candidate
}

// eventLog collects a topology's events.
type eventLog struct {
	mu     sync.Mutex
	events []event
	last   time.Time
}

// maxEvents bounds the events kept per run (a few per probe).
const maxEvents = 1 << 18

// add records e.
func (l *eventLog) add(e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) < maxEvents {
		l.events = append(l.events, e)
	}
	l.last = time.Now()
}

// reset forgets every event.
func (l *eventLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = nil
}

// snapshot returns the events and the time of the last one.
func (l *eventLog) snapshot() ([]event, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.events...), l.last
}

// lastAt returns when the last event arrived.
func (l *eventLog) lastAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// frameEvent turns a captured frame into an event.
func frameEvent(kind eventKind, c nettest.Captured) event {
	l3 := l3Offset(c.Raw)
	return event{kind: kind, pkt: c.Packet, l3: l3, cands: candidates(c.Packet, l3)}
}

// normFrame returns the frame for comparison: as it is when it is a copy
// of the probe; for replies fw generated, without the fields the kernel
// fills at random per namespace or from per-boot secrets (the IPv4
// identification with the header checksum that covers it, and the IPv6
// flow label: docs/differences.md).
func normFrame(raw []byte, l3 int, rel relation) []byte {
	b := append([]byte(nil), raw...)
	if rel == relCopy || l3 < 0 || len(b) < l3+1 {
		return b
	}
	switch b[l3] >> 4 {
	case 4:
		if len(b) >= l3+ipv4HeaderLen {
			b[l3+4], b[l3+5], b[l3+10], b[l3+11] = 0, 0, 0, 0
		}
	case 6:
		if len(b) >= l3+4 {
			w := binary.BigEndian.Uint32(b[l3:])
			binary.BigEndian.PutUint32(b[l3:], w&^0xfffff)
		}
	}
	return b
}

// relName names a relation in reports.
var relName = map[relation]string{relCopy: "the probe", relQuote: "ICMP error quoting it", relAnswer: "answer"}

// describe returns the event's text for comparison and reports, given how
// it relates to its probe.
func (e event) describe(rel relation) string {
	switch e.kind {
	case evGen, evSink:
		where := "gen"
		if e.kind == evSink {
			where = "sink"
		}
		b := normFrame(e.pkt.Raw, e.l3, rel)
		p, _ := nettest.Parse(b)
		return fmt.Sprintf("at %s: %s: %s\n      %s", where, relName[rel], describePacket(p), hex.EncodeToString(b))
	case evLocal:
		b := e.pkt.Raw
		if e.l3 == 0 { // IPv4: the socket shows the IP header
			b = normFrame(b, 0, rel)
		}
		return fmt.Sprintf("fw's sockets got %s: %s, %d bytes: %s", relName[rel], e.local, len(b), hex.EncodeToString(b))
	default:
		return "LOG: " + normLogLine(e.line, rel)
	}
}

// Fields of kernel LOG lines (nf_log_syslog.c), for attribution.
var (
	logOuterRe = regexp.MustCompile(`\bSRC=(\S+) DST=(\S+) `)
	logIDRe    = regexp.MustCompile(`\bID=(\d+)`)
	logFlowRe  = regexp.MustCompile(`\bFLOWLBL=(\d+)`)
	logSeqRe   = regexp.MustCompile(`\bSEQ=(\d+) ACK=(\d+)`)
	logEchoRe  = regexp.MustCompile(`\bTYPE=(0|129) CODE=0 ID=(\d+) SEQ=(\d+)`)
)

// logEvent turns a LOG line into an event.
func logEvent(line string) event {
	return event{kind: evLog, line: line, cands: logCandidates(line)}
}

// logCandidates lists the probes a LOG line may be about: the packet's own
// marker, the marker of the packet an ICMP error quotes ("[SRC=… ID=…]"),
// the TCP sequence numbers, an echo reply's identifier.
func logCandidates(line string) []candidate {
	in := strings.Index(line, "IN=")
	if in < 0 {
		return nil
	}
	body := line[in:]
	outer, inner := body, ""
	if i := strings.IndexByte(body, '['); i >= 0 {
		outer, inner = body[:i], body[i:]
	}
	var out []candidate
	parse := func(s string, rel relation, swap bool) {
		m := logOuterRe.FindStringSubmatch(s)
		if m == nil {
			return
		}
		src, err1 := netip.ParseAddr(m[1])
		dst, err2 := netip.ParseAddr(m[2])
		if err1 != nil || err2 != nil {
			return
		}
		var mk uint64
		if id := logIDRe.FindStringSubmatch(s); id != nil && src.Is4() {
			mk, _ = strconv.ParseUint(id[1], 10, 32)
		} else if fl := logFlowRe.FindStringSubmatch(s); fl != nil {
			mk, _ = strconv.ParseUint(fl[1], 10, 32)
		}
		out = append(out, candidate{marker: uint32(mk), rel: rel, src: src, dst: dst})
		if rel != relCopy {
			// An ICMP error quoting an echo reply fw's stack sent:
			// about the echo request, first (see candidates).
			if ec := logEchoRe.FindStringSubmatch(s); ec != nil {
				id, _ := strconv.ParseUint(ec[2], 10, 16)
				seq, _ := strconv.ParseUint(ec[3], 10, 16)
				out = append([]candidate{{marker: uint32(id)<<16 | uint32(seq), rel: relAnswer, src: dst, dst: src}}, out...)
			}
			return
		}
		if sq := logSeqRe.FindStringSubmatch(s); sq != nil {
			seq, _ := strconv.ParseUint(sq[1], 10, 32)
			ack, _ := strconv.ParseUint(sq[2], 10, 32)
			out = append(out, candidate{marker: uint32(seq) >> tcpMarkerShift, rel: relAnswer, src: dst, dst: src},
				candidate{marker: uint32(ack) >> tcpMarkerShift, rel: relAnswer, src: dst, dst: src})
		}
		if ec := logEchoRe.FindStringSubmatch(s); ec != nil {
			// First: it says more than the IPv4 ID (see candidates).
			id, _ := strconv.ParseUint(ec[2], 10, 16)
			seq, _ := strconv.ParseUint(ec[3], 10, 16)
			out = append([]candidate{{marker: uint32(id)<<16 | uint32(seq), rel: relAnswer, src: dst, dst: src}}, out...)
		}
	}
	parse(outer, relCopy, false)
	if inner != "" {
		parse(inner, relQuote, false)
	}
	return out
}

// logUIDRe matches the owner LOG --log-uid prints for a packet with a
// local socket.
var logUIDRe = regexp.MustCompile(` UID=\d+ GID=\d+`)

// normLogLine removes from a LOG line what is not compared: the owner of
// the packet's socket (for a received packet, the socket the kernel's
// early demux finds, which xfw's lookup does not always find alike, and
// which the kernel skips for a packet of a receive batch:
// docs/differences.md); and for a
// reply fw generated, what differs between namespaces: the IPv4
// identification of the reply itself (the quoted packet's stays) and the IPv6
// flow label.
func normLogLine(line string, rel relation) string {
	line = logUIDRe.ReplaceAllString(line, "")
	if rel == relCopy {
		return line
	}
	// The quoted packet's bracket comes after "IN=" (a LOG prefix may
	// hold brackets too: "[UFW BLOCK] ").
	outer, inner := line, ""
	if in := strings.Index(line, "IN="); in >= 0 {
		if i := strings.IndexByte(line[in:], '['); i >= 0 {
			outer, inner = line[:in+i], line[in+i:]
		}
	}
	if loc := logIDRe.FindStringIndex(outer); loc != nil && strings.Contains(outer, " TTL=") {
		outer = outer[:loc[0]] + "ID=?" + outer[loc[1]:]
	}
	outer = logFlowRe.ReplaceAllString(outer, "FLOWLBL=?")
	return outer + inner
}

// rawReader reads one raw socket in fw: every packet of its protocol that
// reaches fw's socket layer.
type rawReader struct {
	f     *os.File
	proto int
	v6    bool
	drops uint32
	mu    sync.Mutex
}

// rawProtocols are the protocols whose local delivery fw's raw sockets
// observe: every protocol number but 0 (hop-by-hop in IPv6, not
// deliverable). The socket of 255 (IPPROTO_RAW) is also the one fw sends
// its own packets from (side.send): it receives protocol 255 as the
// others receive theirs, and is read as they are. (Unread, its queue
// filled up over a long campaign, and from then on the kernel answered
// every protocol-255 datagram to fw with "protocol unreachable"; when the
// queue filled depended on the truesize of every packet it held, which
// differs between the sides: an intermittent difference late in long nat
// campaigns.)
func rawProtocols() []int {
	var out []int
	for p := 1; p <= rawSendProto; p++ {
		out = append(out, p)
	}
	return out
}

// rawSendProto is the protocol of fw's raw socket that sends its own
// packets: IPPROTO_RAW, whose header the sender writes (IP_HDRINCL; IPv6
// likewise).
const rawSendProto = unix.IPPROTO_RAW

// ipv6FlowInfo is IPV6_FLOWINFO (linux/in6.h), missing from x/sys/unix:
// as a socket option it asks for the flow information of received packets,
// as a control message type it carries it.
const ipv6FlowInfo = 11

// rawRcvBuf is the buffer of each raw socket (memory is only used while
// packets wait): a whole run's packets of one protocol fit.
const rawRcvBuf = 4 << 20

// openRawReaders opens fw's raw sockets for family v6 (call it inside fw's
// namespace).
func openRawReaders(v6 bool) ([]*rawReader, error) {
	var out []*rawReader
	fail := func(err error) ([]*rawReader, error) {
		for _, r := range out {
			r.f.Close()
		}
		return nil, err
	}
	for _, proto := range rawProtocols() {
		af := unix.AF_INET
		if v6 {
			af = unix.AF_INET6
		}
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return fail(fmt.Errorf("raw socket for protocol %d: %w", proto, err))
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rawRcvBuf); err != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rawRcvBuf)
		}
		if v6 {
			// The flow label (the marker) and the destination address come
			// as control messages: IPv6 raw sockets see no IPv6 header.
			if err := unix.SetsockoptInt(fd, unix.SOL_IPV6, ipv6FlowInfo, 1); err != nil {
				unix.Close(fd)
				return fail(fmt.Errorf("IPV6_FLOWINFO on raw socket %d: %w", proto, err))
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_IPV6, unix.IPV6_RECVPKTINFO, 1); err != nil {
				unix.Close(fd)
				return fail(fmt.Errorf("IPV6_RECVPKTINFO on raw socket %d: %w", proto, err))
			}
		}
		out = append(out, &rawReader{f: os.NewFile(uintptr(fd), fmt.Sprintf("raw%d", proto)), proto: proto, v6: v6})
	}
	return out, nil
}

// maxIPPacket bounds one received packet.
const maxIPPacket = 1 << 16

// run reads until the socket is closed, adding an event per packet.
func (r *rawReader) run(log *eventLog) {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, maxIPPacket)
	oob := make([]byte, 256)
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
			return // closed
		}
		data := append([]byte(nil), buf[:n]...)
		var e event
		if r.v6 {
			e = r.event6(data, oob[:oobn], from)
		} else {
			e = r.event4(data, oob[:oobn])
		}
		log.add(e)
	}
}

// sendTo sends the IP packet b (its own header) to sa through the socket,
// waiting for room in its (non-blocking) send buffer.
func (r *rawReader) sendTo(b []byte, sa unix.Sockaddr) error {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, sa)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err != nil {
		return err
	}
	return serr
}

// noteDrops records the SO_RXQ_OVFL count of a control message.
func (r *rawReader) noteDrops(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4 {
			r.mu.Lock()
			r.drops = binary.NativeEndian.Uint32(m.Data)
			r.mu.Unlock()
		}
	}
}

// dropped returns how many packets the socket dropped so far for want of
// room. (An IPv6 ICMPv6 socket also counts the packets whose checksum it
// refuses, as the kernel verifies ICMPv6 checksums for raw sockets: its
// count says nothing about lost packets, and it is left out; its buffer is
// as large as the others'.)
func (r *rawReader) dropped() uint32 {
	if r.v6 && r.proto == unix.IPPROTO_ICMPV6 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drops
}

// event4 describes an IPv4 packet (with its header) received by a raw
// socket.
func (r *rawReader) event4(data, oob []byte) event {
	r.noteDrops(oob)
	p, _ := nettest.ParseIP(data)
	return event{kind: evLocal, pkt: p, l3: 0, cands: candidates(p, 0), local: fmt.Sprintf("IPv4 protocol %d", r.proto)}
}

// event6 describes what an IPv6 raw socket received: the payload after the
// extension headers up to its protocol, the source, and from control
// messages the destination and the flow label.
func (r *rawReader) event6(data, oob []byte, from unix.Sockaddr) event {
	r.noteDrops(oob)
	p := &nettest.Packet{IPVersion: 6, Protocol: uint8(r.proto), Raw: data}
	if sa, ok := from.(*unix.SockaddrInet6); ok {
		p.Src = netip.AddrFrom16(sa.Addr)
	}
	var flow uint32
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			switch {
			case m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= int(unsafe.Sizeof(unix.Inet6Pktinfo{})):
				pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&m.Data[0]))
				p.Dst = netip.AddrFrom16(pi.Addr)
			case m.Header.Level == unix.SOL_IPV6 && m.Header.Type == ipv6FlowInfo && len(m.Data) >= 4:
				flow = binary.BigEndian.Uint32(m.Data) & 0xfffff
			}
		}
	}
	cands := []candidate{{marker: flow, rel: relCopy, src: p.Src, dst: p.Dst}}
	if r.proto == unix.IPPROTO_ICMPV6 && len(data) >= icmpHeaderLen {
		p.ICMPType, p.ICMPCode = data[0], data[1]
		p.ICMPRest = binary.BigEndian.Uint32(data[4:])
		if data[0] < 128 { // an error: it quotes a packet
			if in, _ := nettest.ParseIP(data[icmpHeaderLen:]); in != nil && in.IPVersion == 6 {
				cands = append(cands, candidate{marker: flowLabel(in.Raw), rel: relQuote, src: in.Src, dst: in.Dst})
			}
		} else if data[0] == nettest.ICMPv6EchoReply {
			cands = append(cands, candidate{marker: p.ICMPRest, rel: relAnswer, src: p.Dst, dst: p.Src})
		}
	}
	if r.proto == unix.IPPROTO_TCP && len(data) >= tcpHeaderLen {
		seq, ack := binary.BigEndian.Uint32(data[4:]), binary.BigEndian.Uint32(data[8:])
		cands = append(cands, candidate{marker: seq >> tcpMarkerShift, rel: relAnswer, src: p.Dst, dst: p.Src},
			candidate{marker: ack >> tcpMarkerShift, rel: relAnswer, src: p.Dst, dst: p.Src})
	}
	return event{kind: evLocal, pkt: p, l3: -1, cands: cands,
		local: fmt.Sprintf("IPv6 protocol %d (the bytes after the IPv6 header)", r.proto)}
}
