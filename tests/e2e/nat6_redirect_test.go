package e2e

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// IPv6 REDIRECT in nat PREROUTING against the kernel: gen's connections
// and datagrams redirected to fw, whose gen-side interface has a second,
// newer global address: nf_nat_redirect_ipv6 takes the first usable
// address of the input device's list (the newest global one) for a
// global destination, the link-local one for a link-local destination.
// The servers are bound to the address the kernel picks, so another
// choice is refused; what clients and servers saw, the nat table's and
// filter INPUT's counters (the translated destination, --ctorigdst) and
// `conntrack -L -f ipv6`, compared with ip6tables-legacy's twin.

// nat6RedirectRuleset is TestNat6RedirectAgainstKernel's ruleset; X is
// the topology's index, FWIN fw's gen-side interface.
const nat6RedirectRuleset = natTableStart + `-A PREROUTING -i FWIN -d fd00:X:1::1/128 -p tcp -m tcp --dport 2300 -j REDIRECT --to-ports 7300
-A PREROUTING -i FWIN -d fd00:X:2::2/128 -p tcp -m tcp --dport 7301 -j REDIRECT
-A PREROUTING -i FWIN -p udp -m udp --dport 5300 -j REDIRECT --to-ports 7303
-A PREROUTING -i FWIN -d fe80::/10 -p tcp -m tcp --dport 2302 -j REDIRECT --to-ports 7302
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -d fd00:X:4::1/128 -p tcp -m tcp --dport 7300 -m conntrack --ctstate NEW,DNAT --ctorigdst fd00:X:1::1 --ctorigdstport 2300
-A INPUT -d fd00:X:4::1/128 -p tcp -m tcp --dport 7301 -m conntrack --ctstate NEW --ctorigdst fd00:X:2::2
-A INPUT -d fd00:X:4::1/128 -p udp -m udp --dport 7303 -m conntrack --ctorigdstport 5300
-A INPUT -d fe80::/10 -p tcp -m tcp --dport 7302 -m conntrack --ctstate NEW,DNAT
-A INPUT -d fd00:X:1::1/128 -p tcp -m tcp --dport 7300
COMMIT
`

// nat6RedirectSetup gives fw's gen-side interface a second global address,
// fd00:X:4::1/64, newer than its first: first in the device's list.
func nat6RedirectSetup(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	argv := []string{"ip", "-6", "addr", "add", nat6Addr(tp, 4, 1).String() + "/64", "dev", tp.FwIn.Ifname, "nodad"}
	if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v %+v", argv, err, res)
	}
	argv = []string{"ip", "-6", "route", "add", nat6Addr(tp, 4, 0).String() + "/64", "via", tp.FwIn.IPv6.String()}
	if res, err := nettest.Exec(tp.GenNS, argv...); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v %+v", argv, err, res)
	}
}

// redirect6TCP connects from gen to dst with a payload echoed by fw's
// server at srv and says what both ends saw.
func redirect6TCP(srv, dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		s := nettest.StartTCPServer(t, tp.FwNS, srv(tp), nettest.Echo())
		defer s.Close()
		a := nettest.TCPConnect(tp.GenNS, dst(tp), nettest.WithPayload([]byte("redirected6")),
			nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			for _, c := range s.WaitFinished(1, 2*time.Second) {
				from := nat6Name(tp, c.From.Addr().WithZone(""))
				if c.From.Addr().WithZone("") == tp.Gen.LinkLocal {
					from = "GEN-LL"
				}
				out += fmt.Sprintf("; server saw %s data %q", from, c.Data)
			}
		}
		return out
	}
}

// fwLinkLocal returns fw's gen-side link-local address, port, as gen
// reaches it (the zone gen's interface).
func fwLinkLocal(port uint16) func(tp *nettest.Topology) netip.AddrPort {
	return func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(tp.FwIn.LinkLocal.WithZone(indexZone(tp.Gen)), port)
	}
}

// indexZone is ep's interface as an IPv6 zone, by index. A zone by name
// is resolved through Go's process-wide cache of interface names, filled
// in whichever namespace last refreshed it (for a minute): there "eth0"
// may be the host's, whose index gen's namespace does not have, and the
// connection fails at once with ENETUNREACH.
func indexZone(ep nettest.Endpoint) string {
	return strconv.Itoa(ep.Ifindex)
}

// nat6RedirectSteps are TestNat6RedirectAgainstKernel's steps, in order.
var nat6RedirectSteps = []natStep{
	{"tcp to fw redirected to another port on the input device's newest address",
		redirect6TCP(nat6At(4, 1, 7300), nat6At(1, 1, 2300))},
	{"tcp to sink redirected to fw, the port kept", redirect6TCP(nat6At(4, 1, 7301), nat6At(2, 2, 7301))},
	{"udp redirected, a later datagram", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartUDPServer(t, tp.FwNS, nat6At(4, 1, 7303)(tp), nettest.Echo())
		defer srv.Close()
		out := ""
		for i := 0; i < 2; i++ {
			a := nettest.UDPSend(tp.GenNS, nat6At(1, 1, 5300)(tp), []byte("q"), nettest.ExpectReply(),
				nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv6, 40300)))
			out += fmt.Sprintf("datagram %d: %s reply %q; ", i, a.Outcome, a.Reply)
		}
		for _, d := range srv.Wait(2, 2*time.Second) {
			out += fmt.Sprintf("server saw %s:%d; ", nat6Name(tp, d.From.Addr()), d.From.Port())
		}
		return out
	}},
}

// nat6RedirectLinkLocal is TestNat6RedirectAgainstKernel's last step,
// after the connection tables' comparison (the twins' link-local
// addresses differ).
var nat6RedirectLinkLocal = natStep{"tcp to fw's link-local address redirected to its link-local address",
	redirect6TCP(func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(tp.FwIn.LinkLocal.WithZone(indexZone(tp.FwIn)), 7302)
	}, fwLinkLocal(2302))}

// TestNat6RedirectAgainstKernel runs nat6RedirectSteps through both twins
// and compares the outcomes, the counters and the connection tables.
func TestNat6RedirectAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		nat6RedirectSetup(t, tp)
		rules := strings.ReplaceAll(nat6RedirectRuleset, "fd00:X:", fmt.Sprintf("fd00:%d:", tp.Subnet))
		rules = strings.NewReplacer("FWIN", tp.FwIn.Ifname).Replace(rules)
		fw.restore(t, tp, 6, rules)
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, nat6RedirectSteps)
	compareNatConntrackFam(t, tw, 6, func(key string, port int) bool {
		return (key == "sport" || key == "dport") && port >= 32768
	}, 3)
	runNatSteps(t, tw, []natStep{nat6RedirectLinkLocal})
	compareNatCountersFam(t, tw, 6, 8)
}
