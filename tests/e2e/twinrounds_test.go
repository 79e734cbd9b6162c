package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Rounds of traffic through twins (newTwins), compared by rule counters:
// the tests of stateful matches send the same packets through the kernel's
// iptables and xfw, run the same commands between rounds, and compare each
// round's iptables-save -c.

// eachFamily runs fn as a subtest per family (4, 6) with the xfw binary,
// after the checks every twin test needs (root, iptables-legacy).
func eachFamily(t *testing.T, fn func(t *testing.T, bin string, fam int)) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) { fn(t, bin, fam) })
	}
}

// twinCommand is a command run in both twins between rounds: iptables
// with args, or iptables-restore of a ruleset (with restoreArgs, e.g.
// --noflush); then, when set, another command.
type twinCommand struct {
	args        []string
	restore     string
	restoreArgs []string
	then        *twinCommand
}

// run runs c (and what follows it) in fw's namespace, failing the test
// when a command fails.
func (c twinCommand) run(t *testing.T, tp *nettest.Topology, fw firewall, fam int) {
	t.Helper()
	if c.restore != "" {
		fw.restore(t, tp, fam, c.restore, c.restoreArgs...)
	} else {
		res, err := nettest.Exec(tp.FwNS, append(append(fw.cmd(fam, ""), "-w", "30"), c.args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: iptables %v: %v %v", fw.kind, c.args, err, res)
		}
	}
	if c.then != nil {
		c.then.run(t, tp, fw, fam)
	}
}

// twinRecorder collects one twin's rounds: the counters of each save.
type twinRecorder func(save string)

// rounds runs fn in both twins at once, fn calling record with the
// iptables-save -c output that ends each round, and returns the rounds'
// counters by kind ("kernel", "xfw").
func (tw *twins) rounds(t *testing.T, fn func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder)) map[string][]map[string]counter {
	var mu sync.Mutex
	out := map[string][]map[string]counter{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fn(kind, tp, fw, func(save string) {
			mu.Lock()
			defer mu.Unlock()
			out[kind] = append(out[kind], counters(t, save))
		})
	})
	return out
}

// compareRounds fails the test where a rule's (or policy's) packets in a
// round differ between the twins, ignoring the keys skip names, and
// returns the kernel's rounds.
func compareRounds(t *testing.T, results map[string][]map[string]counter, skip ...string) []map[string]counter {
	t.Helper()
	k, x := results["kernel"], results["xfw"]
	if len(k) != len(x) {
		t.Fatalf("rounds: kernel %d, xfw %d", len(k), len(x))
	}
	skipped := map[string]bool{}
	for _, key := range skip {
		skipped[key] = true
	}
	for i := range k {
		for key, kc := range k[i] {
			if skipped[key] {
				continue
			}
			if xc := x[i][key]; xc.packets != kc.packets {
				t.Errorf("round %d: %s: xfw %d packets, kernel %d", i+1, key, xc.packets, kc.packets)
			}
		}
	}
	return k
}

// nameHosts replaces the addresses of hosts 1 to n (host(h)) in text by
// "@Hh", the names rulesets of the tests give them: the twins' subnets
// differ. Higher hosts first, so that host 1 does not rename part of 10.
func nameHosts(text string, host func(byte) netip.Addr, n byte) string {
	for h := n; h >= 1; h-- {
		text = strings.ReplaceAll(text, host(h).String(), fmt.Sprintf("@H%d", h))
	}
	return text
}

// injectN sends frame from gen n times, a little apart (the kernel's and
// xfw's per-packet work is done before the next arrives).
func injectN(t *testing.T, tp *nettest.Topology, kind string, frame []byte, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := tp.InjectFromGen(frame); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
