package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// BenchmarkCmdLatency measures one `iptables -w -A` command's wall time,
// exec to exit, in fw's namespace holding 0 or 10,000 FORWARD rules, alone
// or beside a Docker host's nat table (the sub-benchmarks ending in
// /nat): xfw in its own process, xfw served by the agent (asked by xfw
// itself, and by the C client xfw-cmd the alternatives link to),
// iptables-nft and iptables-legacy, in one run. Each sub-benchmark runs
// b.N commands (-benchtime 30x for 30) and reports the median, minimum
// and maximum in ms:
//
//	go test -run '^$' -bench CmdLatency -benchtime 30x ./tests/e2e/
func BenchmarkCmdLatency(b *testing.B) {
	nettest.RequireRoot(b)
	bin := xfwPath(b)
	client := cmdClientPath(b, bin)
	for _, nat := range []bool{false, true} {
		for _, n := range []int{0, 10000} {
			benchCmdLatency(b, bin, client, n, nat)
		}
	}
}

// benchDockerNat is a Docker host's nat table (one published port) for
// BenchmarkCmdLatency.
const benchDockerNat = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:DOCKER - [0:0]\n" +
	"-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER\n" +
	"-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n" +
	"-A DOCKER -i docker0 -j RETURN\n-A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80\nCOMMIT\n"

// benchCmdLatency is BenchmarkCmdLatency's sub-benchmarks for n rules,
// with the nat table or without.
func benchCmdLatency(b *testing.B, bin, client string, n int, nat bool) {
	rules, suffix := benchRuleset(n), ""
	if nat {
		rules, suffix = benchDockerNat+rules, "/nat"
	}
	for _, kind := range []string{"xfw", "xfw-agent", "xfw-cmd", "iptables-nft", "iptables-legacy"} {
		b.Run(fmt.Sprintf("%s/rules=%d%s", kind, n, suffix), func(b *testing.B) {
			tp := nettest.New(b)
			argv := []string{bin, "iptables"}
			mode := "XFW_CMDSERVER=off"
			restore := []string{bin, "iptables-restore", "-w"}
			switch kind {
			case "xfw-agent":
				mode = "XFW_CMDSERVER=only"
			case "xfw-cmd":
				argv, mode = []string{client, "iptables"}, "XFW_CMDSERVER=only"
			case "iptables-nft", "iptables-legacy":
				argv = []string{kind}
				restore = []string{kind + "-restore"}
			}
			if strings.HasPrefix(kind, "xfw") {
				b.Cleanup(func() { nettest.Exec(tp.FwNS, bin, "stop") })
			}
			if res, err := nettest.ExecStdin(time.Minute, tp.FwNS, rules, restore...); err != nil {
				b.Fatalf("load %d rules: %v %s", n, err, res.Stderr)
			}
			if kind == "xfw-agent" || kind == "xfw-cmd" {
				startAgent(b, bin, tp)
			}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				// A 5-tuple rule like the ruleset's, from a source
				// outside its range. The command is started from a
				// thread in fw's namespace (not through `ip netns
				// exec`, which adds its own 1–2 ms to every command).
				cmd := exec.Command(argv[0], append(argv[1:], "-w", "-A", "FORWARD",
					"-s", fmt.Sprintf("10.99.%d.%d/32", i/250, i%250+1), "-d", "10.2.0.1/32", "-p", "udp", "-m", "udp",
					"--sport", fmt.Sprint(1000+i), "--dport", "53", "-j", "ACCEPT")...)
				cmd.Env = append(os.Environ(), mode)
				var out []byte
				var took time.Duration
				err := nettest.InNamespace(tp.FwNS, func() error {
					start := time.Now()
					var err error
					out, err = cmd.CombinedOutput()
					took = time.Since(start)
					return err
				})
				times = append(times, took)
				if err != nil {
					b.Fatalf("append %d: %v %s", i, err, out)
				}
			}
			b.StopTimer()
			// The commands ran in fw's namespace: its FORWARD has them.
			list := append(slices.Clone(argv), "-w", "-S", "FORWARD")
			if strings.HasPrefix(kind, "xfw") {
				list = []string{bin, "iptables", "-w", "-S", "FORWARD"}
			}
			if res, err := nettest.Exec(tp.FwNS, list...); err != nil || strings.Count(res.Stdout, "-s 10.99.") != b.N {
				b.Fatalf("fw's FORWARD lacks the %d appended rules: %v", b.N, err)
			}
			slices.Sort(times)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(times[len(times)/2]), "median-ms")
			b.ReportMetric(ms(times[0]), "min-ms")
			b.ReportMetric(ms(times[len(times)-1]), "max-ms")
		})
	}
}

// benchRuleset returns a restore input of n 5-tuple FORWARD rules.
func benchRuleset(n int) string {
	var sb strings.Builder
	sb.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := range n {
		fmt.Fprintf(&sb, "-A FORWARD -s 10.1.%d.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT\n",
			i/250, i%250+1, 1024+i%60000)
	}
	sb.WriteString("COMMIT\n")
	return sb.String()
}
