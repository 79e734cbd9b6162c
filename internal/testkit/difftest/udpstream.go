package difftest

import (
	"net/netip"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file keeps a run's steps away from the moment a UDP conversation
// becomes a stream. The kernel marks a UDP connection that has seen a
// reply ASSURED with its first packet more than 2 s after the
// connection's first (nf_conntrack_udp_packet's stream_ts, a constant,
// not a sysctl), and xfw does the same. A conversation's packet sent at
// about that moment could cross it on one side and not on the other (each
// side's clock started at its own copy of the first packet), and a rule
// matching --ctstatus ASSURED then counted it on one side only. With such
// a rule in the ruleset, a step that continues a UDP flow waits while it
// would fall within udpStreamMargin of the flow's moment.

const (
	// udpStreamDelay is the kernel's UDP stream delay (2 s).
	udpStreamDelay = 2 * time.Second
	// udpStreamMargin is how far from a flow's udpStreamDelay its later
	// packets are sent: more than the two sides' delays in taking in
	// the flow's first packet and a later one can differ by on a loaded
	// machine.
	udpStreamMargin = 500 * time.Millisecond
)

// udpFlow is a UDP flow by its two ends, the lower one first (both
// directions of a conversation are one flow).
type udpFlow struct{ lo, hi netip.AddrPort }

// udpFlowOf returns the UDP flow of a conversation's probe (Step > 0), by
// its first frame as written (answers and translations keep it one flow).
func udpFlowOf(p Probe) (udpFlow, bool) {
	if p.Step == 0 || len(p.Frames) == 0 {
		return udpFlow{}, false
	}
	parse := nettest.Parse
	if p.From == FromFw {
		parse = nettest.ParseIP
	}
	pkt, err := parse(p.Frames[0])
	if err != nil || pkt.Protocol != nettest.ProtoUDP || pkt.Fragment {
		return udpFlow{}, false
	}
	a := netip.AddrPortFrom(pkt.Src, pkt.SrcPort)
	b := netip.AddrPortFrom(pkt.Dst, pkt.DstPort)
	if b.Compare(a) < 0 {
		a, b = b, a
	}
	return udpFlow{a, b}, true
}

// udpStreamGuard remembers when each UDP flow's first packet was sent.
type udpStreamGuard struct {
	// on: the ruleset matches ASSURED (--ctstatus, any case).
	on bool
	// first holds the start and end of the batch that sent a flow's
	// first packet.
	first map[udpFlow][2]time.Time
}

// newUDPStreamGuard returns the guard for a run of ruleset.
func newUDPStreamGuard(ruleset string) *udpStreamGuard {
	return &udpStreamGuard{
		on:    strings.Contains(strings.ToUpper(ruleset), "ASSURED"),
		first: map[udpFlow][2]time.Time{},
	}
}

// wait returns once no UDP flow that batch continues is within
// udpStreamMargin of its stream delay (sleeping past the delay).
func (g *udpStreamGuard) wait(batch []Probe) {
	if !g.on {
		return
	}
	for {
		now := time.Now()
		at := g.resumeAt(batch, now)
		if !at.After(now) {
			return
		}
		time.Sleep(at.Sub(now))
	}
}

// resumeAt returns when batch may be sent at the earliest, from now: now,
// or the end of the window around the stream delay of a flow batch
// continues that now falls in.
func (g *udpStreamGuard) resumeAt(batch []Probe, now time.Time) time.Time {
	at := now
	for _, p := range batch {
		f, ok := udpFlowOf(p)
		if !ok {
			continue
		}
		sent, seen := g.first[f]
		if !seen {
			continue
		}
		lo := sent[0].Add(udpStreamDelay - udpStreamMargin)
		hi := sent[1].Add(udpStreamDelay + udpStreamMargin)
		if now.After(lo) && now.Before(hi) && hi.After(at) {
			at = hi
		}
	}
	return at
}

// sent records the flows batch, sent between start and end, began.
func (g *udpStreamGuard) sent(batch []Probe, start, end time.Time) {
	if !g.on {
		return
	}
	for _, p := range batch {
		if f, ok := udpFlowOf(p); ok {
			if _, seen := g.first[f]; !seen {
				g.first[f] = [2]time.Time{start, end}
			}
		}
	}
}
