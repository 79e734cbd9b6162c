package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m recent in OUTPUT records the TTL as recent_mt takes it: one higher
// for a packet with an output device and no socket (REJECT's reset,
// nf_send_reset's; IPv6's reset to a closed port), as it is for a packet
// with one (icmp_send's ICMP socket, IPv4's reset to a closed port from
// the TCP control socket, a listener's SYN-ACK). gen
// makes fw send each; the TTL of each list's entry is compared between
// /proc/net/xt_recent in the kernel's twin and `xfw recent` in xfw's,
// and with what recent_mt gives.

// recentNoSockRules are TestRecentNoSocketTTLAgainstKernel's rules (IPv4
// spelling; ICMP becomes ipv6-icmp for IPv6).
const recentNoSockRules = `*filter
-A INPUT -p tcp -m tcp --dport 8009 -j REJECT --reject-with tcp-reset
-A INPUT -p udp -m udp --dport 8010 -j REJECT
-A OUTPUT -p tcp -m tcp --sport 8009 -m recent --set --name rejrstFAM --mask MASK --rdest
-A OUTPUT -p icmp -m recent --set --name rejicmpFAM --mask MASK --rdest
-A OUTPUT -p tcp -m tcp --sport 8011 -m recent --set --name stackrstFAM --mask MASK --rdest
-A OUTPUT -p tcp -m tcp --sport 8012 -m recent --set --name synackFAM --mask MASK --rdest
COMMIT
`

// recentTTLField finds an entry's address and TTL in a line of a recent
// list's listing.
var recentTTLField = regexp.MustCompile(`^src=(\S+) ttl: (\d+)`)

// recentEntryTTL returns the TTL of addr's entry in a recent list's
// listing (lists are shared by the families, and fw's own ICMPv6, MLD
// reports, have entries of their own), or "".
func recentEntryTTL(text string, addr netip.Addr) string {
	for _, line := range strings.Split(text, "\n") {
		m := recentTTLField.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if a, err := netip.ParseAddr(m[1]); err == nil && a == addr {
			return m[2]
		}
	}
	return ""
}

// TestRecentNoSocketTTLAgainstKernel checks the TTL -m recent records in
// OUTPUT for packets with and without a socket, in both families.
func TestRecentNoSocketTTLAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	// The default TTL (hop limit) of fw's packets; REJECT's reset is
	// recorded one higher.
	for _, fam := range []int{4, 6} {
		// IPv6's TCP control socket is not the reset's owner
		// (tcp_v6_send_response), IPv4's is (ip_send_unicast_reply).
		want := map[string]string{"rejrst": "65", "rejicmp": "64", "stackrst": "64", "synack": "64"}
		if fam == 6 {
			want["stackrst"] = "65"
		}
		// Lists of their own per family: a list is shared by both, with
		// the mask of the rule that created it.
		rules := strings.NewReplacer("MASK", "255.255.255.255", "FAM", "4").Replace(recentNoSockRules)
		if fam == 6 {
			rules = strings.NewReplacer("MASK", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "FAM", "6",
				"-p icmp", "-p ipv6-icmp").Replace(recentNoSockRules)
		}
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, fam, rules)
		})
		if t.Failed() {
			return
		}
		got := map[string]map[string]string{}
		for kind, tp := range tw.tps {
			fwAddr, genAddr := tp.FwIn.IPv4, tp.Gen.IPv4
			if fam == 6 {
				fwAddr, genAddr = tp.FwIn.IPv6, tp.Gen.IPv6
			}
			srv := nettest.StartTCPServer(t, tp.FwNS, netip.AddrPortFrom(fwAddr, 8012))
			for _, port := range []uint16{8009, 8011, 8012} {
				nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(fwAddr, port))
			}
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(fwAddr, 8010), []byte("x"))
			time.Sleep(typeSettle)
			srv.Close()
			got[kind] = map[string]string{}
			for list := range want {
				text, ok := recentFiles{fw: tw.fws[kind], tp: tp}.read(t, fmt.Sprint(list, fam))
				ttl := recentEntryTTL(text, genAddr)
				if !ok || ttl == "" {
					ttl = fmt.Sprintf("no entry (%q)", strings.TrimSpace(text))
				}
				got[kind][list] = ttl
			}
		}
		for list, ttl := range want {
			if got["kernel"][list] != ttl {
				t.Errorf("IPv%d list %s: the kernel's TTL %s, want %s (fix the test)", fam, list, got["kernel"][list], ttl)
			}
			if got["xfw"][list] != got["kernel"][list] {
				t.Errorf("IPv%d list %s: TTL xfw %s, kernel %s", fam, list, got["xfw"][list], got["kernel"][list])
			}
		}
	}
}
