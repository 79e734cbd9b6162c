package difftest

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file counts the frames a run may have lost in queues (a run that
// lost any is inconclusive).

// linkDrops returns the sum of the drop counters of the topology's four
// veth ends (queue overflows lose probes: a run with any is retried).
func linkDrops(tp *nettest.Topology) (uint64, error) {
	var total uint64
	for _, ep := range []nettest.Endpoint{tp.Gen, tp.FwIn, tp.FwOut, tp.Sink} {
		err := nettest.InNamespace(ep.NS, func() error {
			l, err := netlink.LinkByName(ep.Ifname)
			if err != nil {
				return err
			}
			if st := l.Attrs().Statistics; st != nil {
				total += st.TxDropped
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("statistics of %s in %s: %w", ep.Ifname, ep.NS, err)
		}
	}
	return total, nil
}

// softnetDrops returns the packets dropped because a CPU's backlog was
// full (/proc/net/softnet_stat, second column, summed over CPUs).
func softnetDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, fmt.Errorf("read softnet_stat: %w", err)
	}
	var total uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 16, 32)
		if err == nil {
			total += v
		}
	}
	return total, nil
}
