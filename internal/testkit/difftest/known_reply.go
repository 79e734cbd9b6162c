package difftest

import (
	"bytes"
	"encoding/hex"
	"strings"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file pairs the replies the kernel sent with xfw's for the
// documented differences of REJECT replies (known.go), strictly: each
// documented item explains some fields of a reply (where it is seen, its
// source address, its IPv4 options), and every other byte must be the
// same (the destination, the ICMP type and code, the quoted packet, the
// TCP header). Replies were normalized before (normFrame: the IPv4
// identification and header checksum, the IPv6 flow label).

// IP header fields compared by the pairing.
const (
	ipv4ChecksumOff = 10 // the header checksum
	ipv4SrcOff      = 12 // source address, then destination
	ipv4AddrsEnd    = 20
	ipv6SrcOff      = 8 // source address
	ipv6SrcEnd      = 24
	ipv6NextOff     = 6  // next header
	transportSumOff = 2  // the ICMP and ICMPv6 checksum
	tcpSumOff       = 16 // the TCP checksum
)

// sentReply is a reply one side sent, as a replyRe match shows it.
type sentReply struct {
	// place is "gen", "sink" or "" (fw's sockets).
	place string
	// kind is "ICMP error quoting it" or "answer".
	kind string
	// pkt holds the bytes from the IP header on (frames at gen and sink
	// without Ethernet and VLAN tags; fw's sockets show IPv4 from the
	// IP header); for IPv6 at fw's sockets, the bytes after the IPv6
	// header (hasIP false).
	pkt   []byte
	hasIP bool
}

// parseReply returns the reply a replyRe match shows.
func parseReply(m []string) sentReply {
	r := sentReply{place: m[1], kind: m[2]}
	b, err := hex.DecodeString(m[3])
	if err != nil {
		return r
	}
	switch {
	case m[1] != "": // a frame: skip Ethernet and VLAN tags
		if off := l3Offset(b); off >= 0 {
			r.pkt, r.hasIP = b[off:], true
		}
	case len(b) > 0 && b[0]>>4 == 4 && !bytesAfterIPv6(m[0]):
		r.pkt, r.hasIP = b, true
	default:
		r.pkt = b
	}
	return r
}

// bytesAfterIPv6 reports whether an observation of fw's sockets shows
// only the bytes after the IPv6 header.
func bytesAfterIPv6(obs string) bool {
	return strings.Contains(obs, "after the IPv6 header")
}

// ipVersion returns the reply's IP version, or 0 when its IP header is
// not shown or too short.
func (r sentReply) ipVersion() int {
	switch {
	case !r.hasIP || len(r.pkt) == 0:
		return 0
	case r.pkt[0]>>4 == 4 && len(r.pkt) >= ipv4HeaderLen && len(r.pkt) >= int(r.pkt[0]&0xf)*4:
		return 4
	case r.pkt[0]>>4 == 6 && len(r.pkt) >= ipv6HeaderLen:
		return 6
	}
	return 0
}

// sameReplyElsewhere reports whether k and x are the same reply, byte for
// byte from the IP header on, seen at different places: the kernel routes
// its replies, xfw sends them back by the interface the packet came in on.
func sameReplyElsewhere(k, x sentReply) bool {
	return k.place != x.place && k.kind == x.kind && k.hasIP == x.hasIP && len(k.pkt) > 0 &&
		bytes.Equal(k.pkt, x.pkt)
}

// sameButOptions reports whether k (the kernel's) and x (xfw's) are the
// same IPv4 reply at the same place but for what IPv4 options change: the
// kernel echoes a packet's options in its reply (the header's length and
// checksum, the total length, so the room left for the quote) and quotes
// the packet with its timestamp or record-route option filled in (the
// quoted header's options and checksum, so the ICMP checksum); xfw does
// neither. The source and destination, TOS, TTL, protocol, ICMP type,
// code and rest of header, the quoted packet's other bytes and a TCP
// reset's header must be the same.
func sameButOptions(k, x sentReply) bool {
	if k.place != x.place || k.kind != x.kind || k.ipVersion() != 4 || x.ipVersion() != 4 {
		return false
	}
	kh, xh := int(k.pkt[0]&0xf)*4, int(x.pkt[0]&0xf)*4
	// TOS, flags and fragment offset, TTL, protocol, addresses (the
	// identification was normalized).
	for _, f := range [][2]int{{1, 2}, {6, ipv4ChecksumOff}, {ipv4SrcOff, ipv4AddrsEnd}} {
		if !bytes.Equal(k.pkt[f[0]:f[1]], x.pkt[f[0]:f[1]]) {
			return false
		}
	}
	kt, xt := k.pkt[kh:], x.pkt[xh:]
	if k.pkt[9] != nettest.ProtoICMP {
		return bytes.Equal(kt, xt)
	}
	if len(kt) < icmpHeaderLen || len(xt) < icmpHeaderLen ||
		!bytes.Equal(kt[:transportSumOff], xt[:transportSumOff]) || !bytes.Equal(kt[4:icmpHeaderLen], xt[4:icmpHeaderLen]) {
		return false
	}
	kq, xq := kt[icmpHeaderLen:], xt[icmpHeaderLen:]
	// The quote is cut where the reply reaches its limit: the kernel's
	// is shorter by what its echoed options take, no more.
	if len(kq) != len(xq) && len(kq)+(kh-xh) != len(xq) {
		return false
	}
	return sameQuoteButOptions(kq, xq)
}

// sameQuoteButOptions reports whether two quoted IPv4 packets are the same
// but for their options' bytes and header checksum, over the length both
// quote.
func sameQuoteButOptions(kq, xq []byte) bool {
	n := min(len(kq), len(xq))
	if n < ipv4HeaderLen || kq[0] != xq[0] || kq[0]>>4 != 4 {
		return bytes.Equal(kq[:n], xq[:n])
	}
	hl := min(int(kq[0]&0xf)*4, n)
	return bytes.Equal(kq[:ipv4ChecksumOff], xq[:ipv4ChecksumOff]) &&
		bytes.Equal(kq[ipv4ChecksumOff+2:ipv4HeaderLen], xq[ipv4ChecksumOff+2:ipv4HeaderLen]) &&
		bytes.Equal(kq[hl:n], xq[hl:n])
}

// xfwReplies are the replies only xfw sent, each paired with at most one
// of the kernel's.
type xfwReplies struct {
	sent []sentReply
	used []bool
}

// tallyXFWReplies collects xOnly's replies; it reports false when one of
// them is not a reply.
func tallyXFWReplies(xOnly []string) (xfwReplies, bool) {
	var r xfwReplies
	for _, o := range xOnly {
		m := replyRe.FindStringSubmatch(o)
		if m == nil {
			return r, false
		}
		r.sent = append(r.sent, parseReply(m))
		r.used = append(r.used, false)
	}
	return r, true
}

// take pairs k with the first unpaired reply of xfw's that same accepts,
// and reports whether there was one.
func (r *xfwReplies) take(k sentReply, same func(k, x sentReply) bool) bool {
	for i, x := range r.sent {
		if !r.used[i] && same(k, x) {
			r.used[i] = true
			return true
		}
	}
	return false
}

// replyTally counts the kernel's one-sided replies by the documented
// difference that explains each, with why's lines for its logged ones.
type replyTally struct {
	routed, optioned int
	why              []string
}

// matchKernelReplies explains each of the kernel's one-sided observations
// of probe p by one of xfw's (r), pairing pairedLogs of its LOG lines
// with xfw's; it reports false when one is not explained.
func matchKernelReplies(p Probe, kOnly []string, r xfwReplies, pairedLogs int) (replyTally, bool) {
	var t replyTally
	for _, o := range kOnly {
		if isLogOfReply(o) {
			// (Paired with xfw's own line by pairOptionLogs, if any.)
			if pairedLogs > 0 {
				pairedLogs--
				continue
			}
			// Otherwise only a reply that passes the kernel's chains
			// and not xfw's: xfw sent its own at once, without a
			// chain.
			if len(r.sent) == 0 {
				return t, false
			}
			t.why = append(t.why, "the kernel's reply passed its chains (logged)")
			continue
		}
		m := replyRe.FindStringSubmatch(o)
		if m == nil {
			return t, false
		}
		k := parseReply(m)
		switch {
		case r.take(k, sameReplyElsewhere):
			t.routed++
		// A packet fw sent with IPv4 options: xfw's OUTPUT replies
		// neither echo nor record them.
		case optionsNotEchoed(p) && r.take(k, sameButOptions):
			t.optioned++
		default:
			return t, false // a reply xfw did not send, or with other bytes
		}
	}
	return t, true
}
