package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// BenchmarkCmdLatency measures one `iptables -w -A` command's wall time,
// exec to exit, in fw's namespace holding 0 or 10,000 FORWARD rules: xfw
// in its own process, xfw served by the agent, and iptables-nft, in one
// run. Each sub-benchmark runs b.N commands (-benchtime 30x for 30) and
// reports the median, minimum and maximum in ms:
//
//	go test -run '^$' -bench CmdLatency -benchtime 30x ./tests/e2e/
func BenchmarkCmdLatency(b *testing.B) {
	nettest.RequireRoot(b)
	bin := xfwPath(b)
	for _, n := range []int{0, 10000} {
		rules := benchRuleset(n)
		for _, kind := range []string{"xfw", "xfw-agent", "iptables-nft"} {
			b.Run(fmt.Sprintf("%s/rules=%d", kind, n), func(b *testing.B) {
				tp := nettest.New(b)
				argv := []string{"env", "XFW_CMDSERVER=off", bin, "iptables"}
				restore := []string{bin, "iptables-restore", "-w"}
				switch kind {
				case "xfw-agent":
					argv[1] = "XFW_CMDSERVER=only"
				case "iptables-nft":
					argv = []string{"iptables-nft"}
					restore = []string{"iptables-nft-restore"}
				}
				if kind != "iptables-nft" {
					b.Cleanup(func() { nettest.Exec(tp.FwNS, bin, "stop") })
				}
				if res, err := nettest.ExecStdin(time.Minute, tp.FwNS, rules, restore...); err != nil {
					b.Fatalf("load %d rules: %v %s", n, err, res.Stderr)
				}
				if kind == "xfw-agent" {
					startAgent(b, bin, tp)
				}
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					// A 5-tuple rule like the ruleset's, from a source
					// outside its range.
					cmd := exec.Command("ip", append([]string{"netns", "exec", tp.FwNS}, append(argv, "-w", "-A", "FORWARD",
						"-s", fmt.Sprintf("10.99.%d.%d/32", i/250, i%250+1), "-d", "10.2.0.1/32", "-p", "udp", "-m", "udp",
						"--sport", fmt.Sprint(1000+i), "--dport", "53", "-j", "ACCEPT")...)...)
					start := time.Now()
					out, err := cmd.CombinedOutput()
					times = append(times, time.Since(start))
					if err != nil {
						b.Fatalf("append %d: %v %s", i, err, out)
					}
				}
				b.StopTimer()
				slices.Sort(times)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(times[len(times)/2]), "median-ms")
				b.ReportMetric(ms(times[0]), "min-ms")
				b.ReportMetric(ms(times[len(times)-1]), "max-ms")
			})
		}
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
