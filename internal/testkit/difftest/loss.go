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

// lossBaseline is what the loss counters said before a run's probes.
type lossBaseline struct {
	drops   [2]uint64 // linkDrops per side
	softnet uint64    // softnetDrops
	raw     [2]uint32 // fw's raw sockets' drops per side
	kmsg    int       // kmsgReader overruns
}

// readLossBaseline reads the loss counters before a run (resetting the
// captures' counts) and empties both sides' event logs.
func (s *Session) readLossBaseline() (lossBaseline, error) {
	var b lossBaseline
	for i, sd := range s.sides {
		d, err := linkDrops(sd.topo)
		if err != nil {
			return b, err
		}
		b.drops[i] = d
		for _, cp := range sd.caps {
			if _, err := cp.Dropped(); err != nil { // resets the count
				return b, err
			}
		}
	}
	softnet, err := softnetDrops()
	if err != nil {
		return b, err
	}
	b.softnet = softnet
	for i, sd := range s.sides {
		for _, r := range sd.raws {
			b.raw[i] += r.dropped()
		}
		sd.log.reset()
	}
	b.kmsg = s.kmsg.overruns()
	return b, nil
}

// lossSince says what a run lost since baseline b ("": nothing).
func (s *Session) lossSince(b lossBaseline) (string, error) {
	var lossy []string
	for i, sd := range s.sides {
		d, err := linkDrops(sd.topo)
		if err != nil {
			return "", err
		}
		if d != b.drops[i] {
			lossy = append(lossy, fmt.Sprintf("%s: %d frames dropped by veth queues", sd.name, d-b.drops[i]))
		}
		for _, cp := range sd.caps {
			n, err := cp.Dropped()
			if err != nil {
				return "", err
			}
			if n > 0 {
				lossy = append(lossy, fmt.Sprintf("%s: capture at %s dropped %d frames", sd.name, cp.NS, n))
			}
		}
		var rd uint32
		for _, r := range sd.raws {
			rd += r.dropped()
		}
		if rd != b.raw[i] {
			lossy = append(lossy, fmt.Sprintf("%s: fw's raw sockets dropped %d packets", sd.name, rd-b.raw[i]))
		}
	}
	if softnet1, err := softnetDrops(); err == nil && softnet1 != b.softnet {
		lossy = append(lossy, fmt.Sprintf("%d packets dropped by full CPU backlogs", softnet1-b.softnet))
	}
	if k := s.kmsg.overruns(); k != b.kmsg {
		lossy = append(lossy, "kernel log records overwritten before they were read")
	}
	return strings.Join(lossy, "; "), nil
}
