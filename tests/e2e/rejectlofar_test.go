package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies to packets fw sends itself through lo with another
// host's source address (sink's), against the kernel. fw's raw socket
// sends a datagram and a SYN from sink's address to fw's own in0 address;
// INPUT on lo REJECTs them. The kernel routes each reply (an ICMP error, a
// reset) to sink as a locally generated packet: it passes raw, mangle and
// filter OUTPUT with output device out0, and mangle POSTROUTING, RELATED
// to the offending packet's connection when tracking (nat's chains, which
// see a connection's first packet only, do not see it), and no FORWARD,
// unmarked (fw's packets are marked); when OUTPUT drops it, sink receives
// nothing, not even fw's neighbour resolution (fw's neighbour entry for
// sink is removed before each round). xfw's was routed out of out0 at
// once from lo's XDP hook, passing no chain (bpf/reject_send.h: now
// handed to lo's TCX ingress, which judges it in OUTPUT with output
// device out0, then sends it out of out0). Every rule's counter and what
// sink receives are compared, without and with connection tracking.

// The ports of fw's packets: REJECTed in INPUT on lo (UDP, TCP); each
// round adds its index so that no round meets an earlier connection.
const (
	rejectLoFarUDP = 7310
	rejectLoFarTCP = 7320
)

// rejectLoFarMark is the mark of fw's packets (SO_MARK).
const rejectLoFarMark = 0x2a

// etherTypeARP, arpOpOff (the ARP operation's offset in an Ethernet
// frame), arpRequest, icmp6NeighborSolicit and icmp6NeighborAdvert tell
// fw's neighbour resolution at sink.
const (
	etherTypeARP         = 0x0806
	arpOpOff             = 20
	arpRequest           = 1
	icmp6NeighborSolicit = 135
	icmp6NeighborAdvert  = 136
)

// icmp6LinkChatter reports whether f is ICMPv6 the stacks send on their
// own, whatever the rules: neighbour discovery and multicast listener
// messages (MLD 130-132, MLDv2 reports 143, which an interface repeats
// after joining a group, later than the topology's wait on a loaded
// machine: seen once in make test, a 150-byte report from fw's out0).
func icmp6LinkChatter(f nettest.Captured) bool {
	if f.Protocol != unix.IPPROTO_ICMPV6 {
		return false
	}
	switch f.ICMPType {
	case icmp6NeighborSolicit, icmp6NeighborAdvert, 130, 131, 132, 143:
		return true
	}
	return false
}

// rejectLoFarRound is one round: with connection tracking rules (the nat
// table and a RELATED match), and with OUTPUT dropping the replies.
type rejectLoFarRound struct {
	ct, drop bool
}

func (r rejectLoFarRound) String() string {
	return fmt.Sprintf("conntrack %v, replies dropped in OUTPUT %v", r.ct, r.drop)
}

// rejectLoFarRules is a round's ruleset; ICMP-type stands for the
// family's ICMP protocol and type option.
func rejectLoFarRules(r rejectLoFarRound, i int) string {
	reply := []string{"-p ICMP-type port-unreachable", "-p tcp --tcp-flags RST RST"}
	var rules []string
	add := func(chains, suffix string) {
		for _, c := range strings.Fields(chains) {
			for _, m := range reply {
				rules = append(rules, "-A "+c+" "+m+suffix)
			}
		}
	}
	rules = append(rules, "*raw")
	add("PREROUTING OUTPUT", "")
	rules = append(rules, "COMMIT", "*mangle")
	add("PREROUTING INPUT FORWARD OUTPUT POSTROUTING", "")
	add("OUTPUT POSTROUTING", " -o out0")
	rules = append(rules, "COMMIT")
	if r.ct {
		rules = append(rules, "*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]",
			":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]")
		add("OUTPUT POSTROUTING", "")
		rules = append(rules, "COMMIT")
	}
	rules = append(rules, "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]")
	add("INPUT FORWARD OUTPUT", "")
	add("OUTPUT", " -o out0")
	// fw's packets carry a mark (SO_MARK); the kernel's replies do not
	// (fwmark_reflect off).
	add("OUTPUT", fmt.Sprintf(" -m mark --mark %#x", rejectLoFarMark))
	if r.ct {
		add("OUTPUT", " -m conntrack --ctstate RELATED")
	}
	if r.drop {
		add("OUTPUT", " -o out0 -j DROP")
	}
	rules = append(rules,
		fmt.Sprintf("-A INPUT -i lo -p udp --dport %d -j REJECT", rejectLoFarUDP+i),
		fmt.Sprintf("-A INPUT -i lo -p tcp --dport %d -j REJECT --reject-with tcp-reset", rejectLoFarTCP+i),
		"COMMIT")
	return strings.Join(rules, "\n") + "\n"
}

// TestRejectLoopbackForeignSourceAgainstKernel compares REJECT replies to
// packets fw sent itself through lo from sink's address (see above).
func TestRejectLoopbackForeignSourceAgainstKernel(t *testing.T) {
	twinsPerFamily(t, rejectLoFarAgainstKernel)
}

func rejectLoFarAgainstKernel(t *testing.T, tw *twins, fam int) {
	icmp := "icmp -m icmp --icmp-type"
	if fam == 6 {
		icmp = "ipv6-icmp -m icmp6 --icmpv6-type"
	}
	// Untracked first: the kernel's tracking stays on once a ruleset
	// used it.
	rounds := []rejectLoFarRound{{}, {drop: true}, {ct: true}, {ct: true, drop: true}}
	var mu sync.Mutex // guards seen and saves
	seen, saves := map[string][]string{}, map[string][]map[string]counter{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		for i, r := range rounds {
			fw.restore(t, tp, fam, strings.ReplaceAll(rejectLoFarRules(r, i), "ICMP-type", icmp))
			// fw resolves sink's address for each round's replies:
			// only for replies OUTPUT lets through.
			_, _, sink := familyAddrs(tp, fam)
			_, _ = nettest.Exec(tp.FwNS, "ip", "neigh", "del", sink.String(), "dev", nettest.FwOutIfname)
			got := rejectLoFarSend(t, tp, fam, i)
			c := rejectLoFarCounters(t, tp, fw, fam, r.ct)
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			saves[kind] = append(saves[kind], c)
			mu.Unlock()
		}
	})
	if t.Failed() {
		return
	}
	for i, r := range rounds {
		k, x := seen["kernel"][i], seen["xfw"][i]
		t.Logf("%v: sink received: kernel %q; xfw %q", r, k, x)
		resolve := "arp, by out0;"
		if fam == 6 {
			resolve = "neighbour solicitation from fw's out0 link-local address, by out0,"
		}
		wants := []string{resolve, "port-unreachable from fw's in0 address, by out0,", "; reset from fw's in0 address, by out0,"}
		if r.drop {
			wants = []string{"nothing"}
		}
		for _, w := range wants {
			if !strings.Contains(k, w) || strings.Count(k, ";") != len(wants)-1 {
				t.Errorf("%v: sink received %q with the kernel, want %q (fix the test)", r, k, strings.Join(wants, " … "))
			}
		}
		if k != x {
			t.Errorf("%v: sink received %q with the kernel, %q with xfw", r, k, x)
		}
		kc, xc := saves["kernel"][i], saves["xfw"][i]
		for key, c := range kc {
			if key[0] != ':' && !strings.Contains(key, " :") && xc[key] != c {
				t.Errorf("%v: counter %q: kernel %v, xfw %v", r, key, c, xc[key])
			}
		}
		// The oracle's own check of the chains the replies pass (one
		// ICMP error, one reset): each counting rule of raw, mangle
		// and filter OUTPUT (with and without -o out0) and of mangle
		// POSTROUTING counts each once, the RELATED one too; the mark
		// rule, nat's, FORWARD's, PREROUTING's and INPUT's none; when
		// OUTPUT drops them, POSTROUTING none either.
		post := uint64(1)
		if r.drop {
			post = 0
		}
		out := uint64(5) // raw, mangle, mangle -o, filter, filter -o
		if r.ct {
			out++
		}
		chains := map[string]uint64{"PREROUTING": 0, "INPUT": 0, "FORWARD": 0, "OUTPUT": out, "POSTROUTING": 2 * post}
		for chain, n := range chains {
			for _, reply := range []string{"icmp", "RST RST"} {
				if c := rejectLoCount(kc, chain, reply); c != n {
					t.Errorf("%v: the kernel's %s rules for %q counted %d packets, want %d (fix the test)", r, chain, reply, c, n)
				}
			}
		}
	}
}

// rejectLoFarCounters returns fw's counters of the raw, mangle, filter
// and (with ct) nat tables, each key prefixed with its table.
func rejectLoFarCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int, ct bool) map[string]counter {
	t.Helper()
	tables := []string{"raw", "mangle", "filter"}
	if ct {
		tables = append(tables, "nat")
	}
	all := map[string]counter{}
	for _, table := range tables {
		argv := append(fw.cmd(fam, "-save"), "-c", "-t", table)
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s save -t %s failed (%v): %s", fw.kind, table, err, res.Stderr)
		}
		for key, c := range counters(t, res.Stdout) {
			all[table+" "+key] = c
		}
	}
	return all
}

// rejectLoFarSend sends, through fw's raw socket, round i's datagram and
// SYN from sink's address to fw's in0 address and describes what sink
// receives: each reply's kind, source, sending device, TTL (hop limit)
// and length, in order, or "nothing".
func rejectLoFarSend(t *testing.T, tp *nettest.Topology, fam, i int) string {
	t.Helper()
	_, fw, sink := familyAddrs(tp, fam)
	// What fw sends sink: the replies, and its neighbour resolution
	// (ARP requests, neighbour solicitations), not its answers to sink's
	// own (ARP replies, neighbour advertisements), which come when sink
	// checks its entry for fw, whatever OUTPUT does.
	c := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(f nettest.Captured) bool {
		if f.Outgoing {
			return false
		}
		if f.EtherType == etherTypeARP {
			return fam == 4 && len(f.Raw) >= arpOpOff+2 && binary.BigEndian.Uint16(f.Raw[arpOpOff:]) == arpRequest
		}
		return f.IPVersion == fam && !(f.Protocol == unix.IPPROTO_ICMPV6 && f.ICMPType == icmp6NeighborAdvert)
	})
	pkts := [][]byte{
		nettest.UDPPacket(netip.AddrPortFrom(sink, uint16(5310+i)), netip.AddrPortFrom(fw, uint16(rejectLoFarUDP+i)), []byte("from sink's address")),
		nettest.TCPPacket(netip.AddrPortFrom(sink, uint16(5320+i)), netip.AddrPortFrom(fw, uint16(rejectLoFarTCP+i)), nettest.TCPSyn, 1, nil),
	}
	err := nettest.InNamespace(tp.FwNS, func() error {
		for _, pkt := range pkts {
			if err := sendRawIP(fw, pkt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send from fw: %v", err)
	}
	time.Sleep(rejectOutSettle)
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	var got []string
	for _, f := range c.Stop() {
		kind := "other"
		switch {
		case f.EtherType == etherTypeARP:
			kind = "arp"
		case f.IsICMPUnreachable():
			kind = "port-unreachable"
		case f.IsTCPReset():
			kind = "reset"
		case f.Protocol == unix.IPPROTO_ICMPV6 && f.ICMPType == icmp6NeighborSolicit:
			kind = "neighbour solicitation"
		}
		from := f.Src.String()
		switch f.Src {
		case fw:
			from = "fw's in0 address"
		case tp.FwOut.LinkLocal:
			from = "fw's out0 link-local address"
		}
		by := f.SrcMAC.String()
		if by == tp.FwOut.MAC.String() {
			by = "out0"
		}
		if kind == "arp" {
			got = append(got, "arp, by "+by)
			continue
		}
		got = append(got, fmt.Sprintf("%s from %s, by %s, ttl %d, %d bytes", kind, from, by, f.TTL, len(f.Raw)))
	}
	if len(got) == 0 {
		return "nothing"
	}
	return strings.Join(got, "; ")
}

// sendRawIP sends the IP packet pkt (its own header, either family) to
// dst through a raw socket (IPPROTO_RAW: the sender writes the header),
// marked rejectLoFarMark.
func sendRawIP(dst netip.Addr, pkt []byte) error {
	af := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: dst.As16()}
	if dst.Is4() {
		af, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: dst.As4()}
	}
	fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, rejectLoFarMark); err != nil {
		return fmt.Errorf("SO_MARK: %w", err)
	}
	return unix.Sendto(fd, pkt, 0, sa)
}
