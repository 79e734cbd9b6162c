package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ICMP redirects against the kernel: fw routes a far destination back out
// of gen's side (via a router address on gen's subnet, which gen owns),
// so the kernel sends gen a redirect before the FORWARD hook, whatever
// FORWARD then decides. Bursts of crafted packets from gen, in rounds:
// FORWARD accepts (the packets come back to gen, the next hop), FORWARD
// drops (nothing comes back; the redirects all the same), and for IPv4
// send_redirects off (no redirect). The redirects gen receives and the
// FORWARD counters are compared between the twins (counts over a burst,
// within the kernel's per-peer rate limits, never timing).

// redirectBurst is how many packets a round sends back to back: within
// IPv4's first redirect's quiet time (20 ms) and IPv6's burst of 6.
const redirectBurst = 3

// redirectSettle is how long a round waits for the last frames to arrive.
const redirectSettle = 500 * time.Millisecond

// redirectSetup gives gen the router address (IPv4 .3, IPv6 fe80::3) and
// fw the far destination's route through it, with a static neighbour.
// It returns the far destination and the router address.
func redirectSetup(t *testing.T, tp *nettest.Topology, fam int) (far, router netip.Addr) {
	t.Helper()
	mac := tp.Gen.MAC.String()
	if fam == 6 {
		far = netip.MustParseAddr(fmt.Sprintf("fd00:%x:9::9", tp.Subnet))
		router = netip.MustParseAddr("fe80::3")
		nettest.MustExec(t, tp.GenNS, "ip", "-6", "addr", "add", "fe80::3/64", "dev", nettest.GenIfname, "nodad")
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "neigh", "replace", "fe80::3", "lladdr", mac, "dev", nettest.FwInIfname, "nud", "permanent")
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", far.String()+"/128", "via", "fe80::3", "dev", nettest.FwInIfname)
		return far, router
	}
	far = netip.MustParseAddr(fmt.Sprintf("10.%d.9.9", tp.Subnet))
	router = netip.MustParseAddr(fmt.Sprintf("10.%d.1.3", tp.Subnet))
	nettest.MustExec(t, tp.GenNS, "ip", "addr", "add", router.String()+"/24", "dev", nettest.GenIfname)
	nettest.MustExec(t, tp.FwNS, "ip", "neigh", "replace", router.String(), "lladdr", mac, "dev", nettest.FwInIfname, "nud", "permanent")
	nettest.MustExec(t, tp.FwNS, "ip", "route", "add", far.String()+"/32", "via", router.String(), "dev", nettest.FwInIfname)
	return far, router
}

// redirectSeen is what gen received in one round.
type redirectSeen struct {
	redirects int // ICMP redirects (type 5) / ICMPv6 redirects (137) from fw
	forwarded int // the burst's packets fw forwarded back to gen
}

// redirectRound injects a burst of UDP packets from gen to far (port
// dport) and counts what comes back to gen.
func redirectRound(t *testing.T, tp *nettest.Topology, fam int, far netip.Addr, dport uint16) redirectSeen {
	t.Helper()
	src := tp.Gen.IPv4
	if fam == 6 {
		src = tp.Gen.IPv6
	}
	var seen redirectSeen
	redirectType := uint8(5)
	if fam == 6 {
		redirectType = 137
	}
	c := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam
	})
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	frames := make([][]byte, redirectBurst)
	for i := range frames {
		frames[i] = eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(src, uint16(5000+i)), netip.AddrPortFrom(far, dport), []byte("hairpin")))
	}
	if err := nettest.Inject(tp.GenNS, nettest.GenIfname, frames...); err != nil {
		t.Fatalf("inject: %v", err)
	}
	time.Sleep(redirectSettle)
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	for _, f := range c.Stop() {
		switch {
		case f.Protocol == nettest.ProtoICMP || f.Protocol == nettest.ProtoICMPv6:
			if f.ICMPType == redirectType {
				seen.redirects++
			}
		case f.Protocol == nettest.ProtoUDP && f.Dst == far && f.DstPort == dport:
			seen.forwarded++
		}
	}
	return seen
}

// TestRedirectAgainstKernel compares the redirects of hairpin traffic that
// FORWARD accepts or drops (redirect.h).
func TestRedirectAgainstKernel(t *testing.T) {
	twinsPerFamily(t, redirectAgainstKernel)
}

// twinsPerFamily runs fn in a subtest per family, each with new twins.
func twinsPerFamily(t *testing.T, fn func(t *testing.T, tw *twins, fam int)) {
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) { fn(t, newTwins(t, bin), fam) })
	}
}

func redirectAgainstKernel(t *testing.T, tw *twins, fam int) {
	type round struct {
		name          string
		dport         uint16
		noRedirects   bool // send_redirects turned off first (IPv4)
		wantForwarded int
	}
	rounds := []round{
		{name: "accepted", dport: 7001, wantForwarded: redirectBurst},
		{name: "dropped", dport: 7002},
	}
	if fam == 4 {
		rounds = append(rounds, round{name: "send_redirects off", dport: 7002, noRedirects: true})
	}
	var mu sync.Mutex // guards seen and saves
	seen := map[string][]redirectSeen{}
	saves := map[string]string{} // far address as "FAR"
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		far, _ := redirectSetup(t, tp, fam)
		fw.restore(t, tp, fam, fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
			"-A FORWARD -d %s -p udp --dport 7001 -j ACCEPT\n-A FORWARD -d %s -j DROP\nCOMMIT\n", far, far))
		for _, r := range rounds {
			if r.noRedirects {
				for _, dev := range []string{"all", nettest.FwInIfname} {
					nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.conf."+dev+".send_redirects=0")
				}
			}
			got := redirectRound(t, tp, fam, far, r.dport)
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			mu.Unlock()
		}
		save := strings.ReplaceAll(fw.save(t, tp, fam), far.String(), "FAR")
		mu.Lock()
		saves[kind] = save
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	for i, r := range rounds {
		k, x := seen["kernel"][i], seen["xfw"][i]
		t.Logf("%s: kernel %+v, xfw %+v", r.name, k, x)
		if k != x {
			t.Errorf("%s: kernel saw %+v, xfw %+v", r.name, k, x)
		}
		if k.forwarded != r.wantForwarded {
			t.Errorf("%s: the kernel forwarded %d packets, want %d", r.name, k.forwarded, r.wantForwarded)
		}
		if wantSome := !r.noRedirects; (k.redirects > 0) != wantSome {
			t.Errorf("%s: the kernel sent %d redirects (want some: %v)", r.name, k.redirects, wantSome)
		}
	}
	kc, xc := counters(t, saves["kernel"]), counters(t, saves["xfw"])
	for key, c := range kc {
		if key[0] != ':' && xc[key] != c {
			t.Errorf("counter %q: kernel %v, xfw %v", key, c, xc[key])
		}
	}
}
