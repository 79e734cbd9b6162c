package nettest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Multicast listener reports. Every interface that comes up, and every
// address added to it, joins groups (the solicited-node group of each
// address; on fw the all-routers groups) and announces them in MLDv2
// reports to ff02::16, each change twice (the robustness variable, 2),
// the repetition a random time within the unsolicited report interval
// later (1 s by default). Those reports cross fw's PREROUTING (gen's and
// sink's) and OUTPUT (fw's own) and would be counted by broad rules of a
// test that started within that second. The topology sets the interval
// to one jiffy and returns only once every endpoint has sent its reports.
const (
	// mldIntervalMS is net.ipv6.conf.default.mldv2_unsolicited_report_interval
	// in every namespace (milliseconds; the kernel rounds up to a jiffy):
	// a report's repetition follows it at once.
	mldIntervalMS = "1"
	// mldQuiet is how long an endpoint's count of sent reports must stay
	// unchanged, once its last group is joined, for its reports to be
	// taken as sent (each repetition is one jiffy, at most 10 ms, away).
	mldQuiet = 100 * time.Millisecond
	// mldTimeout bounds the wait for an endpoint's reports.
	mldTimeout = 10 * time.Second
)

// solicitedNodeHex returns the solicited-node group of ep's link-local
// address as /proc/net/igmp6 prints it (32 hex digits).
func solicitedNodeHex(ep Endpoint) string {
	ll := ep.LinkLocal.As16()
	g := [16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: ll[13], 14: ll[14], 15: ll[15]}
	return hex.EncodeToString(g[:])
}

// joined reports whether /proc/net/igmp6 (of the calling thread's
// namespace) lists group (hex) on interface ifindex.
func joined(ifindex int, group string) (bool, error) {
	data, err := os.ReadFile("/proc/thread-self/net/igmp6")
	if err != nil {
		return false, err
	}
	want := strconv.Itoa(ifindex)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == want && f[2] == group {
			return true, nil
		}
	}
	return false, sc.Err()
}

// mldReportsSent returns the interface's Icmp6OutMLDv2Reports.
func mldReportsSent(ifname string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc/thread-self/net/dev_snmp6", ifname))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "Icmp6OutMLDv2Reports" {
			return strconv.ParseUint(f[1], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no Icmp6OutMLDv2Reports in /proc/net/dev_snmp6/%s", ifname)
}

// waitAllListenerReports waits for every endpoint's reports at once: each
// wait is mostly its quiet period (mldQuiet), which the endpoints, in
// namespaces of their own, can spend together.
func waitAllListenerReports(eps []Endpoint) error {
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = waitListenerReports(ep)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitListenerReports waits until ep has joined the solicited-node group
// of its link-local address (its last join: that address comes with the
// carrier), has sent at least the two reports of a change and has sent
// none for mldQuiet.
func waitListenerReports(ep Endpoint) error {
	group := solicitedNodeHex(ep)
	return InNamespace(ep.NS, func() error {
		deadline := time.Now().Add(mldTimeout)
		var last uint64
		var since time.Time
		for {
			ok, err := joined(ep.Ifindex, group)
			if err != nil {
				return fmt.Errorf("groups of %s in %s: %w", ep.Ifname, ep.NS, err)
			}
			n, err := mldReportsSent(ep.Ifname)
			if err != nil {
				return fmt.Errorf("reports of %s in %s: %w", ep.Ifname, ep.NS, err)
			}
			now := time.Now()
			if !ok || n != last || since.IsZero() {
				last, since = n, now
			} else if n >= 2 && now.Sub(since) >= mldQuiet {
				return nil
			}
			if now.After(deadline) {
				return fmt.Errorf("%s in %s: listener reports not over after %v (group %s joined: %v, %d sent)",
					ep.Ifname, ep.NS, mldTimeout, group, ok, n)
			}
			time.Sleep(pollInterval)
		}
	})
}
