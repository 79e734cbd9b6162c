package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// SCTP connection tracking over every chunk of a packet, against the
// kernel (nf_conntrack_proto_sctp walks them all: do_basic_checks,
// sctp_new, the state changes per chunk), both families: chunks behind a
// DATA chunk long enough to put them past the packet's first 128 bytes
// (as far as xfw's tracker once looked): a zero-length chunk, an INIT, an
// INIT ACK or a SHUTDOWN COMPLETE bundled there (INVALID), a SHUTDOWN
// there (the association shuts down), an association's first packet with
// an ABORT there (INVALID: out of the blue) or with DATA there (INVALID:
// no new association), and packets of 300 chunks (more than a 128-byte
// buffer, or a walk of 256, holds) whose last is a HEARTBEAT ACK or a
// SHUTDOWN ACK; then what sctp_new and the INIT record of Linux 6.18
// keep: an association opened by a HEARTBEAT ACK records no tag for the
// reply (DATA back with the packet's tag is INVALID, with tag 0 not), and
// an INIT retransmitted with the tag recorded after the peer's own INIT
// leaves both init flags set (an INIT ACK of another tag is INVALID).
// What each end saw, the INVALID and NEW rules' counters and `conntrack
// -L` (the sctp entries with their states) are compared.

// ctSCTPRuleset is TestConntrackSCTPChunksAgainstKernel's ruleset (both
// families): INVALID and NEW counted per direction, SCTP accepted unless
// INVALID.
const ctSCTPRuleset = `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p sctp -m sctp --dport 5000 -m conntrack --ctstate INVALID
-A FORWARD -p sctp -m sctp --sport 5000 -m conntrack --ctstate INVALID
-A FORWARD -p sctp -m conntrack --ctstate NEW
-A FORWARD -p sctp -m conntrack ! --ctstate INVALID -j ACCEPT
COMMIT
`

// SCTP chunk types beyond natSCTPSteps' (RFC 9260 3.2).
const (
	sctpHeartbeat = 4
	sctpError     = 9
)

// ctSCTPSteps returns the steps for family fam (4 or 6): an association
// from gen's port 40000 to sink's 5000 with tags 0x11223344 (gen's) and
// 0x55667788 (sink's), then first packets from ports 40001 and 40002.
func ctSCTPSteps(fam int) []natStep {
	sink := func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return tp.Sink.IPv6
		}
		return tp.Sink.IPv4
	}
	const genTag, sinkTag = 0x11223344, 0x55667788
	exch := func(out, back []byte) func(*testing.T, *nettest.Topology) string {
		return natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(out), natBytes(back), natSCTPText)
	}
	out := func(chunks ...[]byte) []byte { return sctpWire(40000, 5000, sinkTag, chunks...) }
	back := func(chunks ...[]byte) []byte { return sctpWire(5000, 40000, genTag, chunks...) }
	long := sctpDataChunk(strings.Repeat("l", 200)) // the next chunk starts at byte 228
	initChunk := natSCTPPacket(40000, 5000, 0, natSCTPInit, genTag)[12:]
	initAckChunk := natSCTPPacket(5000, 40000, genTag, natSCTPInitAck, sinkTag)[12:]
	heartbeat := sctpChunk(sctpHeartbeat, 0, append([]byte{0, 1, 0, 204}, strings.Repeat("h", 200)...))
	// 300 chunks: DATA, 298 of an unknown type (skipped: the upper bits
	// 10), then last.
	many := func(last []byte) []byte {
		c := [][]byte{sctpDataChunk("many")}
		for range 298 {
			c = append(c, sctpChunk(0x85, 0, nil))
		}
		return back(append(c, last)...)
	}
	return []natStep{
		{"INIT and INIT ACK", exch(natSCTPPacket(40000, 5000, 0, natSCTPInit, genTag),
			natSCTPPacket(5000, 40000, genTag, natSCTPInitAck, sinkTag))},
		{"COOKIE ECHO and COOKIE ACK (ESTABLISHED)", exch(out(sctpChunk(sctpCookieEcho, 0, []byte("cookie"))),
			back(sctpChunk(sctpCookieAck, 0, nil)))},
		{"a long DATA chunk, then one of length 0 (INVALID)", exch(out(long, sctpChunk(sctpError, 0, nil, 0)),
			back(sctpDataChunk("none")))},
		{"a long DATA chunk, then an INIT (INVALID)", exch(out(long, initChunk), back(sctpDataChunk("none")))},
		{"a long DATA chunk, then an INIT ACK (INVALID)", exch(out(long, initAckChunk), back(sctpDataChunk("none")))},
		{"a long DATA chunk, then a SHUTDOWN COMPLETE (INVALID)", exch(out(long, sctpChunk(sctpShutdownDone, 0, nil)),
			back(sctpDataChunk("none")))},
		{"DATA both ways (still ESTABLISHED)", exch(out(long, sctpDataChunk("more")), back(sctpDataChunk("back")))},
		{"a long DATA chunk, then a HEARTBEAT; 300 chunks back, the last a HEARTBEAT ACK",
			exch(out(long, heartbeat), many(sctpChunk(sctpHeartbeat+1, 0, heartbeat[4:])))},
		{"a long DATA chunk, then a SHUTDOWN (SHUTDOWN_SENT); 300 chunks back, the last a SHUTDOWN ACK (SHUTDOWN_ACK_SENT)",
			exch(out(long, sctpChunk(sctpShutdown, 0, []byte{0, 0, 0, 1})), many(sctpChunk(sctpShutdownAck, 0, nil)))},
		{"a first packet from port 40001: a HEARTBEAT, then an ABORT (INVALID: out of the blue)",
			natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(sctpWire(40001, 5000, 0x0a0b0c0d, heartbeat, sctpChunk(sctpAbort, 0, nil))),
				natBytes(sctpWire(5000, 40001, 0x0a0b0c0d, sctpChunk(sctpAbort, 1, nil))), natSCTPText)},
		{"a first packet from port 40002: a HEARTBEAT, then DATA (INVALID: no association)",
			natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(sctpWire(40002, 5000, 0x0a0b0c0d, heartbeat, sctpDataChunk("x"))),
				natBytes(sctpWire(5000, 40002, 0x0a0b0c0d, sctpDataChunk("y"))), natSCTPText)},
		{"a first packet from port 40004: a HEARTBEAT ACK (NEW), DATA back with the same tag",
			natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(sctpWire(40004, 5000, 0x0a0b0c0d, sctpChunk(sctpHeartbeat+1, 0, heartbeat[4:]))),
				natBytes(sctpWire(5000, 40004, 0x0a0b0c0d, sctpDataChunk("y"))), natSCTPText)},
		{"a first packet from port 40005: a HEARTBEAT ACK (NEW), DATA back with tag 0",
			natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(sctpWire(40005, 5000, 0x0a0b0c0d, sctpChunk(sctpHeartbeat+1, 0, heartbeat[4:]))),
				natBytes(sctpWire(5000, 40005, 0, sctpDataChunk("y"))), natSCTPText)},
		{"from port 40006: an INIT", natRawExchange(fam, nettest.ProtoSCTP, sink,
			natBytes(natSCTPPacket(40006, 5000, 0, natSCTPInit, genTag)), natBytes(natSCTPPacket(5000, 40006, 0, natSCTPInit, sinkTag)), natSCTPText)},
		{"from port 40006: the INIT again, an INIT ACK of another tag", natRawExchange(fam, nettest.ProtoSCTP, sink,
			natBytes(natSCTPPacket(40006, 5000, 0, natSCTPInit, genTag)), natBytes(natSCTPPacket(5000, 40006, genTag, natSCTPInitAck, 0x01020304)), natSCTPText)},
		{"a first packet from port 40003: a HEARTBEAT alone (NEW)",
			natRawExchange(fam, nettest.ProtoSCTP, sink, natBytes(sctpWire(40003, 5000, 0x0a0b0c0d, heartbeat)),
				natBytes(sctpWire(5000, 40003, 0x0a0b0c0d, sctpChunk(sctpHeartbeat+1, 0, []byte{0, 1, 0, 4}))), natSCTPText)},
	}
}

// TestConntrackSCTPChunksAgainstKernel runs ctSCTPSteps through both
// twins, IPv4 and IPv6, and compares the outcomes, the counters and the
// sctp connections.
func TestConntrackSCTPChunksAgainstKernel(t *testing.T) {
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			nettest.RequireRoot(t)
			tool := "iptables-legacy"
			if fam == 6 {
				tool = "ip6tables-legacy"
			}
			requireTools(t, tool, "conntrack", "sysctl")
			tw := newTwins(t, xfwPath(t))
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				natPortlessSinkDrop(t, tp, tool)
				// The shutdown states last 3 seconds: long enough to be
				// listed at the end (xfw reads them at the restore).
				res, err := nettest.Exec(tp.FwNS, "sysctl", "-qw",
					"net.netfilter.nf_conntrack_sctp_timeout_shutdown_sent=120",
					"net.netfilter.nf_conntrack_sctp_timeout_shutdown_ack_sent=120")
				if err != nil || res.ExitCode != 0 {
					t.Errorf("sysctl: %v %v", err, res)
				}
				fw.restore(t, tp, fam, ctSCTPRuleset)
			})
			if t.Failed() {
				return
			}
			runNatSteps(t, tw, ctSCTPSteps(fam))
			compareNatCountersFam(t, tw, fam, 3)
			compareNatConntrackProtos(t, tw, fam, []string{"sctp"}, func(string, int) bool { return false }, 2)
		})
	}
}
