package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// chainRuleset exercises the three built-in chains, user chains, jump,
// goto, RETURN, LOG-free non-terminal rules and policies. %…% are expanded
// per topology.
const chainRuleset = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:in-tcp - [0:0]
:fwd-udp - [0:0]
:fwd-deep - [0:0]
:out-block - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp -j in-tcp
-A INPUT -p udp -m udp --dport 7001
-A in-tcp -p tcp -m tcp --dport 7000 -j ACCEPT
-A in-tcp -p tcp -m tcp --dport 7002 -j RETURN
-A in-tcp -p tcp -j REJECT --reject-with tcp-reset
-A FORWARD -p udp -j fwd-udp
-A FORWARD -p udp -m udp --dport 8002 -j ACCEPT
-A fwd-udp -p udp -m udp --dport 8000 -j ACCEPT
-A fwd-udp -p udp -m udp --dport 8001 -g fwd-deep
-A fwd-udp -p udp -m udp --dport 8002 -j RETURN
-A fwd-udp -p udp -m udp --dport 8003 -j DROP
-A fwd-deep -p udp -m udp --sport 9000 -j ACCEPT
-A fwd-deep -j RETURN
-A OUTPUT -p udp -j out-block
-A out-block -p udp -m udp --dport 8100 -j DROP
COMMIT
`

// scenario is traffic whose fate both firewalls must agree on.
type scenario struct {
	name string
	run  func(t *testing.T, tp *nettest.Topology, fam int) string
}

func addrs(tp *nettest.Topology, fam int) (fwIn, sink netip.Addr) {
	if fam == 6 {
		return tp.FwIn.IPv6, tp.Sink.IPv6
	}
	return tp.FwIn.IPv4, tp.Sink.IPv4
}

func chainScenarios() []scenario {
	tcpTo := func(port uint16) func(*testing.T, *nettest.Topology, int) string {
		return func(t *testing.T, tp *nettest.Topology, fam int) string {
			fwIn, _ := addrs(tp, fam)
			// Below the kernel's initial SYN retransmission timeout (1 s):
			// a dropped SYN is sent once in both twins, however loaded.
			a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(fwIn, port), nettest.WithTimeout(700*time.Millisecond))
			return string(a.Outcome)
		}
	}
	udpThrough := func(sport, dport uint16) func(*testing.T, *nettest.Topology, int) string {
		return func(t *testing.T, tp *nettest.Topology, fam int) string {
			_, sink := addrs(tp, fam)
			srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, dport))
			defer srv.Close()
			src := tp.Gen.IPv4
			if fam == 6 {
				src = tp.Gen.IPv6
			}
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, dport), []byte("hello"), nettest.WithSource(netip.AddrPortFrom(src, sport)))
			if len(srv.Wait(1, arrivalWait)) > 0 {
				return "arrived"
			}
			return "lost"
		}
	}
	return []scenario{
		{"ping fw (INPUT accept)", func(t *testing.T, tp *nettest.Topology, fam int) string {
			fwIn, _ := addrs(tp, fam)
			return string(nettest.Ping(tp.GenNS, fwIn, nettest.WithTimeout(time.Second)).Outcome)
		}},
		{"tcp fw:7000 (user chain accept)", tcpTo(7000)},
		{"tcp fw:7001 (user chain reject tcp-reset)", tcpTo(7001)},
		{"tcp fw:7002 (RETURN then policy drop)", tcpTo(7002)},
		{"udp through :8000 (jump, accept)", udpThrough(5555, 8000)},
		{"udp through :8001 sport 9000 (goto, accept)", udpThrough(9000, 8001)},
		{"udp through :8001 sport 9001 (goto, RETURN skips the caller's rest: policy)", udpThrough(9001, 8001)},
		{"udp through :8002 (RETURN, accept in FORWARD)", udpThrough(5555, 8002)},
		{"udp through :8003 (drop)", udpThrough(5555, 8003)},
		{"udp through :8004 (fall through, policy drop)", udpThrough(5555, 8004)},
		{"udp from fw :8100 (OUTPUT drop)", func(t *testing.T, tp *nettest.Topology, fam int) string {
			_, sink := addrs(tp, fam)
			srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 8100))
			defer srv.Close()
			// The socket error differs by design (EPERM vs silent drop,
			// docs/differences.md): compare the wire.
			nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(sink, 8100), []byte("x"))
			if len(srv.Wait(1, arrivalWait)) > 0 {
				return "arrived"
			}
			return "lost"
		}},
		{"udp from fw :8101 (OUTPUT accept)", func(t *testing.T, tp *nettest.Topology, fam int) string {
			_, sink := addrs(tp, fam)
			srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 8101))
			defer srv.Close()
			nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(sink, 8101), []byte("x"))
			if len(srv.Wait(1, arrivalWait)) > 0 {
				return "arrived"
			}
			return "lost"
		}},
	}
}

// TestChainsAgainstKernel runs real sockets through all three chains and
// user chains (jump, goto, RETURN, policies) under xfw and under the kernel's
// iptables, both families, and requires the same outcomes and the same
// counters for every rule and policy.
func TestChainsAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		fam := fam
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			kernel := nettest.New(t, nettest.WithStaticNeighbors())
			xfw := nettest.New(t, nettest.WithStaticNeighbors())
			rules := chainRuleset
			if fam == 6 {
				rules = strings.ReplaceAll(rules, "-p icmp -m icmp --icmp-type 8", "-p ipv6-icmp -m icmp6 --icmpv6-type 128")
				rules = strings.ReplaceAll(rules, "--reject-with tcp-reset", "--reject-with tcp-reset")
			} else {
				rules = strings.ReplaceAll(rules, "-A INPUT -p ipv6-icmp -j ACCEPT\n", "")
			}
			fws := []struct {
				fw firewall
				tp *nettest.Topology
			}{{firewall{kind: "kernel"}, kernel}, {firewall{kind: "xfw", bin: bin}, xfw}}
			for _, f := range fws {
				f.fw.restore(t, f.tp, fam, rules)
			}
			t.Cleanup(func() { fws[1].fw.stop(t, xfw) })
			// Servers in fw for the INPUT ports.
			for _, f := range fws {
				fwIn, _ := addrs(f.tp, fam)
				for _, port := range []uint16{7000, 7001, 7002} {
					srv := nettest.StartTCPServer(t, f.tp.FwNS, netip.AddrPortFrom(fwIn, port))
					t.Cleanup(func() { srv.Close() })
				}
			}
			for _, sc := range chainScenarios() {
				k := sc.run(t, kernel, fam)
				x := sc.run(t, xfw, fam)
				if k != x {
					t.Errorf("%s: kernel %s, xfw %s", sc.name, k, x)
				}
			}
			ks, xs := counters(t, fws[0].fw.save(t, kernel, fam)), counters(t, fws[1].fw.save(t, xfw, fam))
			for k, kv := range ks {
				if strings.HasPrefix(k, ":") && k != ":FORWARD" {
					// INPUT/OUTPUT policies also count neighbour
					// discovery and stray local traffic, whose timing
					// differs between the two topologies.
					continue
				}
				if strings.Contains(k, "ipv6-icmp") || strings.Contains(k, "-i lo") {
					continue // neighbour discovery and loopback chatter
				}
				if xv, ok := xs[k]; !ok || xv.packets != kv.packets {
					t.Errorf("counter %q: kernel %d packets, xfw %v", k, kv.packets, xs[k])
				}
			}
			if t.Failed() {
				t.Logf("kernel:\n%s\nxfw:\n%s", fws[0].fw.save(t, kernel, fam), fws[1].fw.save(t, xfw, fam))
			}
		})
	}
}

// TestAtomicSwaps streams UDP through fw while the ruleset is replaced 1,000
// times by rulesets that all accept the stream and all drop a second
// stream: no accepted packet may be lost and no dropped one may pass.
func TestAtomicSwaps(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	swaps := 1000
	if testing.Short() {
		swaps = 100
	}
	rulesets := make([]string, 2)
	for i := range rulesets {
		var b strings.Builder
		b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
		// Different filler rules per version, so every swap changes the
		// generation's layout.
		for k := 0; k < 50+i*37; k++ {
			fmt.Fprintf(&b, "-A FORWARD -s 192.0.2.%d/32 -p tcp -m tcp --dport %d -j ACCEPT\n", k%250, 1000+k)
		}
		b.WriteString("-A FORWARD -p udp -m udp --dport 6000 -j ACCEPT\n")
		b.WriteString("-A FORWARD -p udp -m udp --dport 6001 -j DROP\n")
		b.WriteString("COMMIT\n")
		rulesets[i] = b.String()
	}
	files := make([]string, 2)
	for i, r := range rulesets {
		f, err := os.CreateTemp("", "xfw-swap-*.txt")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(r)
		f.Close()
		files[i] = f.Name()
		defer os.Remove(f.Name())
	}
	fw.restore(t, tp, 4, rulesets[0])

	sink := tp.Sink.IPv4
	// The sink's own (kernel) netfilter counts what arrives: exact, and
	// unbounded unlike a recording server. Only inside sink's namespace.
	for _, port := range []string{"6000", "6001"} {
		nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-A", "INPUT", "-p", "udp", "--dport", port)
	}
	arrived := func(port string) int64 {
		out := nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-L", "INPUT", "-v", "-x", "-n")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "dpt:"+port) {
				var n int64
				fmt.Sscan(strings.Fields(l)[0], &n)
				return n
			}
		}
		t.Fatalf("no counting rule for %s in\n%s", port, out)
		return 0
	}

	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent.Add(1)
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, 6000), []byte("keep"), nettest.WithTimeout(time.Second))
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, 6001), []byte("drop"), nettest.WithTimeout(time.Second))
		}
	}()
	start := time.Now()
	for i := 0; i < swaps; i++ {
		res, err := nettest.Exec(tp.FwNS, bin, "iptables-restore", "-w", lockWait, files[(i+1)%2])
		if err != nil || res.ExitCode != 0 {
			close(stop)
			wg.Wait()
			t.Fatalf("swap %d: %v %s", i, err, res.Stderr)
		}
	}
	close(stop)
	wg.Wait()
	total := sent.Load()
	// The last datagrams through fw and counted in sink's INPUT.
	drainFw(t, tp)
	t.Logf("%d swaps in %v while %d datagrams per stream crossed fw", swaps, time.Since(start), total)
	if got := arrived("6000"); got != total {
		t.Errorf("accepted stream: %d of %d datagrams arrived", got, total)
	}
	if got := arrived("6001"); got != 0 {
		t.Errorf("dropped stream: %d datagrams passed", got)
	}
}

// TestHundredThousandRules loads 100,000 5-tuple FORWARD rules and checks
// that packets for the first, a middle and the last rule pass (and are
// counted on that rule) while a packet matching none hits the DROP policy.
func TestHundredThousandRules(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	const n = 100_000
	src := tp.Gen.IPv4
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := 0; i < n; i++ {
		// Distinct 5-tuples: the sport encodes the rule number.
		fmt.Fprintf(&b, "-A FORWARD -s %s/32 -d %s/32 -p udp -m udp --sport %d --dport %d -j ACCEPT\n",
			src, tp.Sink.IPv4, 1024+i%60000, 2000+i/60000)
	}
	b.WriteString("COMMIT\n")
	start := time.Now()
	fw.restore(t, tp, 4, b.String())
	t.Logf("restored %d rules in %v", n, time.Since(start))
	srv := map[uint16]*nettest.UDPServer{}
	for _, dp := range []uint16{2000, 2001, 2999} {
		srv[dp] = nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, dp))
	}
	send := func(i int) (sport, dport uint16) {
		sport, dport = uint16(1024+i%60000), uint16(2000+i/60000)
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, dport), []byte("x"), nettest.WithSource(netip.AddrPortFrom(src, sport)))
		return
	}
	for _, i := range []int{0, 4095, 4096, 59_999, 60_000, n - 1} {
		sport, dport := send(i)
		if _, ok := srv[dport].WaitFor(func(d nettest.Datagram) bool { return d.From.Port() == sport }, arrivalWait); !ok {
			t.Errorf("rule %d: packet (sport %d dport %d) did not pass", i, sport, dport)
		}
	}
	// No rule has sport 1023.
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 2000), []byte("x"), nettest.WithSource(netip.AddrPortFrom(src, 1023)))
	if _, ok := srv[2000].WaitFor(func(d nettest.Datagram) bool { return d.From.Port() == 1023 }, arrivalWait); ok {
		t.Errorf("a packet matching no rule passed the DROP policy")
	}
	c := counters(t, fw.save(t, tp, 4))
	last := fmt.Sprintf("FORWARD -s %s/32 -d %s/32 -p udp -m udp --sport %d --dport %d -j ACCEPT", src, tp.Sink.IPv4, 1024+(n-1)%60000, 2000+(n-1)/60000)
	if c[last].packets != 1 {
		t.Errorf("last rule counted %d packets, want 1", c[last].packets)
	}
	if c[":FORWARD"].packets != 1 {
		t.Errorf("FORWARD policy counted %d packets, want 1", c[":FORWARD"].packets)
	}
}

// TestNamespacesIndependent loads different rulesets into two namespaces and
// checks that each filters by its own.
func TestNamespacesIndependent(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	a := nettest.New(t, nettest.WithStaticNeighbors())
	b := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, a); fw.stop(t, b) })
	fw.restore(t, a, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -m udp --dport 7100 -j DROP\nCOMMIT\n")
	fw.restore(t, b, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -m udp --dport 7200 -j DROP\nCOMMIT\n")
	try := func(tp *nettest.Topology, port uint16) bool {
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port))
		defer srv.Close()
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("x"))
		return len(srv.Wait(1, arrivalWait)) > 0
	}
	if try(a, 7100) || !try(a, 7200) {
		t.Errorf("namespace A does not filter by its own ruleset")
	}
	if !try(b, 7100) || try(b, 7200) {
		t.Errorf("namespace B does not filter by its own ruleset")
	}
	if sa, sb := fw.save(t, a, 4), fw.save(t, b, 4); !strings.Contains(sa, "7100") || strings.Contains(sa, "7200") || !strings.Contains(sb, "7200") {
		t.Errorf("saved rulesets mixed up:\n%s\n%s", sa, sb)
	}
}

// TestBadInputKeepsRuleset checks that a ruleset with a bad line fails as
// iptables-restore fails (message, exit status) and leaves the running
// ruleset and its filtering untouched.
func TestBadInputKeepsRuleset(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy-restore")
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	kernelTp := nettest.New(t)
	x := firewall{kind: "xfw", bin: bin}
	k := firewall{kind: "kernel"}
	t.Cleanup(func() { x.stop(t, tp) })
	good := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -m udp --dport 7300 -j DROP\nCOMMIT\n"
	x.restore(t, tp, 4, good)
	before := x.save(t, tp, 4)
	bad := []string{
		"*filter\n:INPUT ACCEPT [0:0]\n-A FORWARD -p udp --dport 7301 -j DROP\n-A FORWARD -p tcp --bogus 1 -j DROP\nCOMMIT\n",
		"*filter\n-A FORWARD -s 10.0.0.0/33 -j DROP\nCOMMIT\n",
		"*filter\n-A FORWARD -j nowhere\nCOMMIT\n",
		"*filter\n-A FORWARD -p tcp --dport 70000 -j DROP\nCOMMIT\n",
		"*filter\n-A FORWARD -p udp -j REJECT --reject-with tcp-reset\nCOMMIT\n",
		"*filter\n-N a\n-N b\n-A a -j b\n-A b -j a\n-A FORWARD -j a\nCOMMIT\n",
		"*filter\n-A FORWARD -j DROP\n",
		"*filter\n-A OUTPUT -m mac --mac-source 00:11:22:33:44:55 -j DROP\nCOMMIT\n",
		"*filter\n-P web DROP\nCOMMIT\n",
	}
	for _, in := range bad {
		// A failing command is what we want here: Exec's error for a
		// non-zero exit is expected, a missing result is not.
		xr, err := x.try(tp, 4, "-restore", in)
		if xr == nil {
			t.Fatal(err)
		}
		kr, err := k.try(kernelTp, 4, "-restore", in)
		if kr == nil {
			t.Fatal(err)
		}
		if kr.ExitCode == 0 {
			t.Errorf("the kernel's iptables-restore accepts this (fix the test):\n%s", in)
			continue
		}
		if xr.ExitCode != kr.ExitCode {
			t.Errorf("exit status %d (%s), iptables-restore %d (%s), for:\n%s", xr.ExitCode, xr.Stderr, kr.ExitCode, kr.Stderr, in)
		}
		// The line iptables-restore names must be the same.
		if kl, xl := failedLine(kr.Stderr), failedLine(xr.Stderr); kl != xl {
			t.Errorf("iptables-restore says %q, xfw says %q, for:\n%s", kr.Stderr, xr.Stderr, in)
		}
		if after := x.save(t, tp, 4); stripComments(after) != stripComments(before) {
			t.Errorf("running ruleset changed by a failed restore:\n%s", after)
		}
	}
	// A NAT rule xfw cannot apply (DNAT of DCCP, whose checksum the
	// kernel leaves wrong) is refused, with a message, and changes
	// nothing.
	xr, _ := x.try(tp, 4, "-restore", "*nat\n-A PREROUTING -p dccp -j DNAT --to-destination 10.0.0.1\nCOMMIT\n")
	if xr == nil || xr.ExitCode == 0 || !strings.Contains(xr.Stderr, "not supported by xfw") {
		t.Errorf("a nat table was not refused clearly: %+v", xr)
	}
	if after := x.save(t, tp, 4); stripComments(after) != stripComments(before) {
		t.Errorf("running ruleset changed by a refused table:\n%s", after)
	}
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7300))
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7300), []byte("x"))
	if len(srv.Wait(1, arrivalWait)) > 0 {
		t.Errorf("the running ruleset stopped filtering after failed restores")
	}
}

// failedLine extracts "line N" from an iptables-restore error.
func failedLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if i := strings.Index(l, "line "); i >= 0 && (strings.Contains(l, "failed") || strings.Contains(l, "Error occurred")) {
			return strings.TrimSpace(l[i:])
		}
	}
	return ""
}

func stripComments(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
