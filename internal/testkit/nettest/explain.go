package nettest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// This file gathers what can lose or delay a reply between the namespaces
// of a topology, for the log of a test whose expected reply did not come:
// the ICMP rate limits, address resolution and the queues frames wait in.

// ExplainLoss describes, for a test's failure message, the counters that
// tell why a reply awaited from fw may have been lost or late: fw's ICMP
// counters (IcmpOutRateLimitGlobal and IcmpOutRateLimitHost count the
// errors the kernel's rate limits suppressed), fw's and gen's neighbour
// entries with their probes (`ip -s -s neigh`: an entry resolving, or
// resolved late, after a MAC change flushed it), the drops of the four
// veth ends and the frames dropped by full CPU backlogs since boot
// (/proc/net/softnet_stat). Failures to read a counter are reported in
// the text: the description is for a log and never fails the test itself.
func (topo *Topology) ExplainLoss() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fw's ICMP counters (nstat): %s\n", icmpCounters(topo.FwNS))
	for _, ns := range []string{topo.FwNS, topo.GenNS, topo.SinkNS} {
		fmt.Fprintf(&b, "neighbours in %s (ip -s -s neigh):\n%s\n", ns, commandOutput(ns, "ip", "-s", "-s", "neigh", "show"))
	}
	for _, ep := range []Endpoint{topo.Gen, topo.FwIn, topo.FwOut, topo.Sink} {
		fmt.Fprintf(&b, "%s/%s: %s\n", ep.NS, ep.Ifname, linkDropCounters(ep))
	}
	fmt.Fprintf(&b, "frames dropped by full CPU backlogs since boot: %s\n", backlogDrops())
	return b.String()
}

// icmpCounters returns the ICMP counters nstat reports non-zero in ns
// (absolute values; -s leaves nstat's shared history file alone).
func icmpCounters(ns string) string {
	res, err := Exec(ns, "nstat", "-a", "-s", "-z")
	if err != nil {
		return fmt.Sprintf("(nstat: %v)", err)
	}
	var kept []string
	for _, line := range strings.Split(res.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.Contains(f[0], "Icmp") || f[1] == "0" {
			continue
		}
		kept = append(kept, f[0]+"="+f[1])
	}
	return strings.Join(kept, " ")
}

// commandOutput runs argv in ns and returns its output, or why not.
func commandOutput(ns string, argv ...string) string {
	res, err := Exec(ns, argv...)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return strings.TrimRight(res.Stdout, "\n")
}

// linkDropCounters returns the receive and transmit drop counters of ep's
// interface (a veth counts there the frames its peer's queue refused).
func linkDropCounters(ep Endpoint) string {
	var out string
	for _, c := range []string{"rx_dropped", "tx_dropped"} {
		res, err := Exec(ep.NS, "cat", "/sys/class/net/"+ep.Ifname+"/statistics/"+c)
		if err != nil {
			out += fmt.Sprintf(" %s=(%v)", c, err)
			continue
		}
		out += fmt.Sprintf(" %s=%s", c, strings.TrimSpace(res.Stdout))
	}
	return strings.TrimSpace(out)
}

// backlogDrops sums /proc/net/softnet_stat's second column over the CPUs.
func backlogDrops() string {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	var total uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 16, 32); err == nil {
			total += v
		}
	}
	return strconv.FormatUint(total, 10)
}
