package difftest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Attaching xfw's XDP programs through netlink announces a device change,
// and fw re-sends its IPv6 multicast listener reports on the device, which
// pass OUTPUT (docs/differences.md): a report and its repetition, one
// unsolicited report interval apart, which the topology sets to one jiffy
// (nettest). A run lets them pass, then zeroes both sides' counters; it
// waits for the reports themselves, not for a fixed time.
const (
	// announceRepeats is how many reports a device change sends on each
	// device (the robustness variable).
	announceRepeats = 2
	// announceQuiet is how long fw must send no report for its reports
	// to be over (each repetition is a jiffy, at most 10 ms, away), and
	// how long a load that attached nothing is watched for reports.
	announceQuiet = 150 * time.Millisecond
	// announceTimeout bounds the wait.
	announceTimeout = 10 * time.Second
	// announcePoll is how often the wait looks.
	announcePoll = 5 * time.Millisecond
)

// fwReports is what fw had sent of listener reports, per device, and
// whether xfw's XDP program was attached to its gen-side device.
type fwReports struct {
	sent     map[string]uint64
	attached bool
}

// readFwReports reads fw's listener report counts and XDP attachment.
func readFwReports(tp *nettest.Topology) (fwReports, error) {
	r := fwReports{}
	err := nettest.InNamespace(tp.FwNS, func() error {
		var err error
		if r.sent, err = reportsSent(); err != nil {
			return err
		}
		l, err := netlink.LinkByName(nettest.FwInIfname)
		if err != nil {
			return err
		}
		r.attached = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("listener reports in %s: %w", tp.FwNS, err)
	}
	return r, nil
}

// reportsSent returns, per device of the calling thread's namespace, its
// listener reports sent and its multicast packets sent ("DEV FIELD" keys):
// a report OUTPUT drops is not counted as sent, but its multicast packet
// is, before the device's egress hook.
func reportsSent() (map[string]uint64, error) {
	dir := "/proc/thread-self/net/dev_snmp6"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sent := map[string]uint64{}
	for _, e := range entries {
		if err := readSnmp6(filepath.Join(dir, e.Name()), e.Name(), sent); err != nil {
			return nil, err
		}
	}
	return sent, nil
}

// snmp6Fields are the dev_snmp6 counters reportsSent reads.
var snmp6Fields = []string{"Icmp6OutMLDv2Reports", mcastField}

// mcastField counts a device's multicast packets sent.
const mcastField = "Ip6OutMcastPkts"

// readSnmp6 adds a device's snmp6Fields from its dev_snmp6 file to into.
func readSnmp6(path, dev string, into map[string]uint64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && slices.Contains(snmp6Fields, f[0]) {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			into[dev+" "+f[0]] = n
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if found != len(snmp6Fields) {
		return fmt.Errorf("%s lacks one of %v", path, snmp6Fields)
	}
	return nil
}

// waitAnnouncements returns once the listener reports fw sent since
// before are over: when xfw's load attached its programs, once each of
// fw's two devices has sent its reports and fw then sent none for
// announceQuiet; else once fw sent none for announceQuiet.
func waitAnnouncements(tp *nettest.Topology, before fwReports) error {
	start := time.Now()
	last, lastChange := before.sent, start
	for {
		cur, err := readFwReports(tp)
		if err != nil {
			return err
		}
		now := time.Now()
		if !maps.Equal(cur.sent, last) {
			last, lastChange = cur.sent, now
		}
		done := now.Sub(lastChange) >= announceQuiet
		if cur.attached && !before.attached {
			for _, dev := range []string{nettest.FwInIfname, nettest.FwOutIfname} {
				if key := dev + " " + mcastField; cur.sent[key] < before.sent[key]+announceRepeats {
					done = false
				}
			}
		}
		if done {
			return nil
		}
		if now.Sub(start) > announceTimeout {
			return fmt.Errorf("fw's listener reports after loading xfw not over after %v (before %v, attached %v; now %v, attached %v)",
				announceTimeout, before.sent, before.attached, cur.sent, cur.attached)
		}
		time.Sleep(announcePoll)
	}
}

// The fresh topologies of a session are quiet before it is used: the
// listener reports of their devices and addresses (repeated a jiffy later,
// nettest) and any other traffic the observers see.
const (
	// setupQuiet is how long neither side may send a listener report nor
	// an observer see a frame.
	setupQuiet = 300 * time.Millisecond
	// setupMaxWait bounds the wait; the session is used then anyway, as
	// it was after a fixed pause of that length before.
	setupMaxWait = 2500 * time.Millisecond
	// setupPoll is how often the wait looks.
	setupPoll = 10 * time.Millisecond
)

// waitSetupQuiet returns once every namespace of both sides has sent no
// listener report, and no observer has seen anything, for setupQuiet
// (at most setupMaxWait after it was called).
func (s *Session) waitSetupQuiet(ctx context.Context) error {
	start := time.Now()
	var last map[string]uint64
	lastChange := start
	for {
		cur := map[string]uint64{}
		for _, sd := range s.sides {
			for _, ns := range sd.topo.Namespaces() {
				err := nettest.InNamespace(ns, func() error {
					sent, err := reportsSent()
					for dev, n := range sent {
						cur[ns+"/"+dev] = n
					}
					return err
				})
				if err != nil {
					return fmt.Errorf("listener reports in %s: %w", ns, err)
				}
			}
		}
		now := time.Now()
		if !maps.Equal(cur, last) {
			last, lastChange = cur, now
		}
		for _, sd := range s.sides {
			if t := sd.log.lastAt(); t.After(lastChange) {
				lastChange = t
			}
		}
		if now.Sub(lastChange) >= setupQuiet || now.Sub(start) >= setupMaxWait {
			return nil
		}
		select {
		case <-time.After(setupPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
