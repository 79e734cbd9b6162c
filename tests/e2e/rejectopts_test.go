package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT's ICMP errors about IPv4 packets with record route and timestamp
// options, against the kernel (bpf/reject_opts.h): the error's own header
// echoes the options (ip_options_echo, then the entry its output fills
// in) and its quote shows them as the input path filled them in (the
// address the host answers from, the time, the pointer moved on, an
// overflow counted, the quoted header checksum stale). INPUT and FORWARD;
// timestamps are compared as "near now" (ms since midnight UTC). The
// kernel verifies the transport checksum summing from that stale header:
// a datagram with a checksum whose options its input path changed gets no
// error at all.

// IPv4 option types and timestamp flags.
const (
	optNoop        = 1
	optRR          = 7
	optTS          = 68
	optTSOnly      = 0
	optTSAndAddr   = 1
	optTSPrespec   = 3
	rejectOptsIn   = 7100 // INPUT REJECT (tcp-reset: 7101)
	rejectOptsFwd  = 7102 // FORWARD REJECT (tcp-reset: 7103)
	optTSMaskedVal = 0xeeeeeeee
	msPerDay       = 24 * 60 * 60 * 1000
	optTSSlack     = 60 * 1000 // ms a stamp may be from the test's clock
)

const rejectOptsRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 7100 -j REJECT
-A INPUT -p tcp --dport 7101 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp --dport 7102 -j REJECT
-A FORWARD -p tcp --dport 7103 -j REJECT --reject-with tcp-reset
COMMIT
`

// TestRejectOptionsAgainstKernel compares the ICMP errors about packets
// with IPv4 options, byte for byte but the ID, checksum and timestamps.
func TestRejectOptionsAgainstKernel(t *testing.T) {
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		// Every error reaches gen: no per-destination limit, a burst
		// larger than the round.
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0", "net.ipv4.icmp_msgs_burst=1000")
	})
	// The second ruleset makes the namespace track connections: conntrack
	// verifies the checksums at PREROUTING, before the input path
	// changes the options, and REJECT trusts them then.
	tracked := strings.Replace(rejectOptsRules, ":OUTPUT ACCEPT [0:0]\n", ":OUTPUT ACCEPT [0:0]\n-A INPUT -m conntrack --ctstate NEW\n", 1)
	seen, saves := twinRejectRounds(t, tw, 4, []string{rejectOptsRules, tracked},
		func(t *testing.T, tp *nettest.Topology, _, _ int) string {
			return strings.Join(rejectOptsRound(t, tp), "\n")
		})
	if t.Failed() {
		return
	}
	cases := len(rejectOptsCases(netip.Addr{}, netip.Addr{}))
	kt := seen["kernel"][1]
	// Every error and INPUT reset; FORWARD resets as without tracking
	// (ip_forward drops the verified sum, the reset's check sums again).
	if errs, resets := strings.Count(kt, "opts "), strings.Count(kt, "reset "); errs != 4*cases || resets <= cases || resets >= 2*cases {
		t.Errorf("tracking, the kernel sent %d errors and %d resets, want %d and more than %d, fewer than %d:\n%s",
			errs, resets, 4*cases, cases, 2*cases, kt)
	}
	compareRejectRound(t, "errors, tracking", kt, seen["xfw"][1], saves["kernel"][1], saves["xfw"][1])
	// The test's own check: the kernel answers the datagrams without a
	// checksum (2 per case) and those with one (and the SYNs) whose
	// options its input path left alone, echoing a record route it
	// filled in.
	k := seen["kernel"][0]
	errs, resets := strings.Count(k, "opts "), strings.Count(k, "reset ")
	if errs <= 2*cases || errs >= 4*cases || resets == 0 || resets >= 2*cases {
		t.Errorf("the kernel sent %d errors and %d resets, want more than %d errors, fewer than %d, some resets, fewer than %d:\n%s",
			errs, resets, 2*cases, 4*cases, 2*cases, k)
	}
	if !strings.Contains(k, "opts 070f0c") {
		t.Errorf("the kernel's errors echo no record route option:\n%s", k)
	}
	compareRejectRound(t, "errors", k, seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
}

// rejectOptsCase is a packet's options (padded by nettest) and the UDP
// payload's length.
type rejectOptsCase struct {
	name    string
	opts    []byte
	payload int
}

// rejectOptsCases are the options gen sends (fw: fw's address, gen:
// gen's, as 4 bytes each).
func rejectOptsCases(gen, fw netip.Addr) []rejectOptsCase {
	a := func(x netip.Addr) []byte {
		if !x.IsValid() {
			return make([]byte, 4)
		}
		b := x.As4()
		return b[:]
	}
	zero := make([]byte, 36)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return []rejectOptsCase{
		{"rr room for 3", cat([]byte{optRR, 15, 4}, zero[:12]), 8},
		{"rr room for 1", cat([]byte{optRR, 11, 8}, a(gen), zero[:4]), 8},
		{"rr full", cat([]byte{optRR, 7, 8}, a(gen)), 8},
		{"ts only", cat([]byte{optTS, 12, 5, optTSOnly}, zero[:8]), 8},
		{"ts only, room for 1", cat([]byte{optTS, 8, 5, optTSOnly}, zero[:4]), 8},
		{"ts and addr", cat([]byte{optTS, 20, 5, optTSAndAddr}, zero[:16]), 8},
		{"ts prespec fw, gen", cat([]byte{optTS, 20, 5, optTSPrespec}, a(fw), zero[:4], a(gen), zero[:4]), 8},
		{"ts prespec fw, fw", cat([]byte{optTS, 20, 5, optTSPrespec}, a(fw), zero[:4], a(fw), zero[:4]), 8},
		{"ts prespec gen", cat([]byte{optTS, 12, 5, optTSPrespec}, a(gen), zero[:4]), 8},
		{"ts full", cat([]byte{optTS, 8, 9, optTSOnly | 2<<4}, zero[:4]), 8},
		{"ts then rr", cat([]byte{optTS, 12, 5, optTSOnly}, zero[:8], []byte{optRR, 11, 4}, zero[:8]), 8},
		{"noop, rr", cat([]byte{optNoop, optRR, 7, 4}, zero[:4]), 8},
		{"rr, long datagram", cat([]byte{optRR, 39, 4}, zero[:36]), 700},
	}
}

// rejectOptsRound sends each case to fw (INPUT) and through it to sink
// (FORWARD) and returns gen's errors, one line each, sorted.
func rejectOptsRound(t *testing.T, tp *nettest.Topology) []string {
	t.Helper()
	gen, fw, sink := familyAddrs(tp, 4)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	var frames [][]byte
	for i, c := range rejectOptsCases(gen, fw) {
		payload := bytes.Repeat([]byte{byte('a' + i)}, c.payload)
		for _, dst := range []netip.AddrPort{netip.AddrPortFrom(fw, rejectOptsIn), netip.AddrPortFrom(sink, rejectOptsFwd)} {
			// With a checksum (the kernel verifies it, summing
			// the header its input path left stale) and without.
			for j, zero := range []bool{false, true} {
				udp := nettest.UDP{SrcPort: uint16(5000 + 100*j + i), DstPort: dst.Port(), Payload: payload, ZeroChecksum: zero}
				frames = append(frames, eth.Frame(nettest.IPv4{Src: gen, Dst: dst.Addr(), ID: uint16(100 + i), Options: c.opts}.Packet(udp)))
			}
			// A SYN to the tcp-reset rule: the kernel verifies its
			// checksum the same way before it answers.
			syn := nettest.TCP{SrcPort: uint16(5200 + i), DstPort: dst.Port() + 1, Seq: 1000, Flags: nettest.TCPSyn, Window: 512}
			frames = append(frames, eth.Frame(nettest.IPv4{Src: gen, Dst: dst.Addr(), ID: uint16(100 + i), Options: c.opts}.Packet(syn)))
		}
	}
	got := genReceives(t, tp, 4, frames)
	var lines []string
	for _, f := range got {
		switch {
		case f.IsICMPError():
			lines = append(lines, rejectOptsLine(tp, f.Raw))
		case f.IsTCPReset():
			// Resets carry no options; which SYNs got one.
			lines = append(lines, fmt.Sprintf("reset %d→%d options %x", f.SrcPort, f.DstPort, f.IPv4Options))
		}
	}
	slices.Sort(lines)
	return lines
}

// rejectOptsLine describes an ICMP error frame (untagged Ethernet): its
// options, type, code and quote, timestamps masked, the topology's
// addresses by name (the twins' differ), the quoted header's checksum as
// whether it holds (the kernel's is stale after its input path changed
// the options), the quoted UDP checksum left out.
func rejectOptsLine(tp *nettest.Topology, frame []byte) string {
	const ethLen, icmpLen, udpCheck = 14, 8, 6
	if len(frame) < ethLen+20 {
		return fmt.Sprintf("short frame %x", frame)
	}
	ip := frame[ethLen:]
	hl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if hl < 20 || total > len(ip) || total < hl+icmpLen+20 {
		return fmt.Sprintf("bad packet %x", ip)
	}
	ip = ip[:total]
	now := uint32(time.Now().UTC().Sub(time.Now().UTC().Truncate(24*time.Hour)) / time.Millisecond)
	opts := maskStamps(ip[20:hl], now)
	icmp := ip[hl:]
	quote := slices.Clone(icmp[icmpLen:])
	if qhl := int(quote[0]&0xf) * 4; qhl >= 20 && qhl <= len(quote) {
		copy(quote[20:qhl], maskStamps(quote[20:qhl], now))
	}
	csum := "stale"
	qhl := int(quote[0]&0xf) * 4
	if qhl >= 20 && qhl+udpCheck+2 <= len(quote) {
		if ipv4Sum(quote[:qhl]) == 0xffff {
			csum = "holds"
		}
		quote[10], quote[11] = 0, 0
		quote[qhl+udpCheck], quote[qhl+udpCheck+1] = 0, 0
	}
	line := fmt.Sprintf("opts %x type %d code %d tos %#x quote(%d, header checksum %s) %x",
		opts, icmp[0], icmp[1], ip[1], len(quote), csum, quote)
	for name, a := range map[string]netip.Addr{"GEN": tp.Gen.IPv4, "FW": tp.FwIn.IPv4, "FWOUT": tp.FwOut.IPv4, "SINK": tp.Sink.IPv4} {
		b := a.As4()
		line = strings.ReplaceAll(line, fmt.Sprintf("%x", b[:]), "<"+name+">")
	}
	return line
}

// ipv4Sum is the folded one's complement sum of an IPv4 header.
func ipv4Sum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// maskStamps returns opts with each timestamp a timestamp option's pointer
// has passed replaced by optTSMaskedVal when it is within optTSSlack of
// now (ms since midnight UTC); others stay as they are.
func maskStamps(opts []byte, now uint32) []byte {
	out := slices.Clone(opts)
	for off := 0; off < len(out); {
		typ := out[off]
		if typ == 0 {
			break
		}
		if typ == optNoop {
			off++
			continue
		}
		if off+1 >= len(out) || out[off+1] < 2 || off+int(out[off+1]) > len(out) {
			break
		}
		l := int(out[off+1])
		if typ == optTS && l >= 4 {
			step, at := 4, 0 // timestamps only
			if fl := out[off+3] & 0xf; fl == optTSAndAddr || fl == optTSPrespec {
				step, at = 8, 4
			}
			ptr := int(out[off+2])
			for e := 4; e+step <= l && e+step < ptr; e += step {
				v := out[off+e+at : off+e+at+4]
				d := int64(binary.BigEndian.Uint32(v)) - int64(now)
				if d < 0 {
					d = -d
				}
				if d < optTSSlack || d > msPerDay-optTSSlack {
					binary.BigEndian.PutUint32(v, optTSMaskedVal)
				}
			}
		}
		off += l
	}
	return out
}
