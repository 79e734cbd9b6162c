// Package e2e holds xfw's namespace tests: real packets through veth pairs
// between network namespaces the tests create, checked against what arrived,
// the counters, the replies — and, wherever the kernel can say, against the
// kernel's own iptables running the same ruleset in a twin topology.
package e2e

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// xfwPath returns the xfw binary built by `make build`.
func xfwPath(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "bin", "xfw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("xfw binary missing (%v): run `make build` (make test does)", err)
	}
	return p
}

// firewall is what enforces a ruleset in a topology's fw namespace: xfw, or
// the kernel's iptables (the oracle).
type firewall struct {
	kind string // "xfw" or "kernel"
	bin  string // xfw binary
}

func (fw firewall) cmd(fam int, what string) []string {
	prefix := "iptables"
	if fam == 6 {
		prefix = "ip6tables"
	}
	if fw.kind == "xfw" {
		return []string{fw.bin, prefix + what}
	}
	return []string{prefix + "-legacy" + what}
}

// restore loads ruleset text into the topology's fw namespace.
func (fw firewall) restore(t testing.TB, topo *nettest.Topology, fam int, rules string, extra ...string) {
	t.Helper()
	res, err := fw.try(topo, fam, "-restore", rules, extra...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s restore failed (%v, exit %d): %s\nruleset:\n%s", fw.kind, err, res.ExitCode, res.Stderr, rules)
	}
}

// try runs a restore and returns its result without judging it.
func (fw firewall) try(topo *nettest.Topology, fam int, what, rules string, extra ...string) (*nettest.Result, error) {
	f, err := os.CreateTemp("", "xfw-rules-*.txt")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(rules); err != nil {
		return nil, err
	}
	f.Close()
	argv := append(fw.cmd(fam, what), extra...)
	// Wait for the lock (xfw's and the kernel's iptables'): other tests or
	// tools may be running commands at the same time. /run/xfw.lock is
	// the machine's, not the namespace's: an agent's refresh or a restore
	// of 10,000 rules elsewhere held it 10 to 15 s under load, past the
	// 10 s waited before.
	argv = append(argv, "-w", lockWait, f.Name())
	return nettest.Exec(topo.FwNS, argv...)
}

// lockWait is the -w the tests' xfw and iptables commands wait for the
// lock with: the machine's, which other test processes share (make test
// runs several at once; an agent's refresh or a big restore elsewhere held it 10 to
// 15 s under load). It is not what a test checks; nettest's Exec bound is
// above it.
const lockWait = "60"

// save returns iptables-save -c output of fw's namespace.
func (fw firewall) save(t testing.TB, topo *nettest.Topology, fam int) string {
	t.Helper()
	argv := append(fw.cmd(fam, "-save"), "-c")
	if fw.kind == "kernel" {
		argv = append(argv, "-t", "filter")
	}
	res, err := nettest.Exec(topo.FwNS, argv...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s save failed (%v): %s", fw.kind, err, res.Stderr)
	}
	return res.Stdout
}

// stop removes xfw from the namespace (the kernel firewall needs nothing:
// its namespace dies with the topology).
func (fw firewall) stop(t testing.TB, topo *nettest.Topology) {
	if fw.kind != "xfw" {
		return
	}
	if res, err := nettest.Exec(topo.FwNS, fw.bin, "stop"); err != nil || res.ExitCode != 0 {
		t.Errorf("xfw stop: %v %s", err, res.Stderr)
	}
}

var counterLine = regexp.MustCompile(`^\[(\d+):(\d+)\] -A (\S+) (.*)$`)
var policyLine = regexp.MustCompile(`^:(\S+) (\S+) \[(\d+):(\d+)\]$`)

// counter is a packet/byte pair read from iptables-save -c.
type counter struct{ packets, bytes uint64 }

// counters parses iptables-save -c output: per "CHAIN RULE-TEXT" (the n-th
// duplicate gets "#n" appended) and per ":CHAIN" for policies.
func counters(t testing.TB, save string) map[string]counter {
	t.Helper()
	out := map[string]counter{}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		line := sc.Text()
		if m := counterLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.ParseUint(m[1], 10, 64)
			b, _ := strconv.ParseUint(m[2], 10, 64)
			key := m[3] + " " + m[4]
			seen[key]++
			if seen[key] > 1 {
				key = fmt.Sprintf("%s#%d", key, seen[key])
			}
			out[key] = counter{p, b}
		} else if m := policyLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.ParseUint(m[3], 10, 64)
			b, _ := strconv.ParseUint(m[4], 10, 64)
			out[":"+m[1]] = counter{p, b}
		}
	}
	return out
}

// requireTools fails (never skips) when a tool the tests rely on is missing.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (scripts/deps.sh installs it): %v", tool, err)
		}
	}
}

// twins are two topologies built alike, fw running the kernel's iptables
// in one ("kernel") and xfw in the other ("xfw"), for tests that send the
// same packets through both and compare.
type twins struct {
	tps map[string]*nettest.Topology
	fws map[string]firewall
}

// newTwins builds the twin topologies (static neighbours: no address
// resolution traffic) and removes xfw from its namespace at the end.
func newTwins(t *testing.T, bin string) *twins {
	t.Helper()
	tw := &twins{
		tps: map[string]*nettest.Topology{
			"kernel": nettest.New(t, nettest.WithStaticNeighbors()),
			"xfw":    nettest.New(t, nettest.WithStaticNeighbors()),
		},
		fws: map[string]firewall{"kernel": {kind: "kernel"}, "xfw": {kind: "xfw", bin: bin}},
	}
	t.Cleanup(func() { tw.fws["xfw"].stop(t, tw.tps["xfw"]) })
	return tw
}

// each runs fn for both firewalls at once and waits for both.
func (tw *twins) each(fn func(kind string, tp *nettest.Topology, fw firewall)) {
	var wg sync.WaitGroup
	for kind, tp := range tw.tps {
		wg.Add(1)
		go func(kind string, tp *nettest.Topology) {
			defer wg.Done()
			fn(kind, tp, tw.fws[kind])
		}(kind, tp)
	}
	wg.Wait()
}

// collect runs fn for both firewalls at once, as each, and returns what
// it returned for each firewall's kind.
func (tw *twins) collect(fn func(kind string, tp *nettest.Topology, fw firewall) string) map[string]string {
	got := map[string]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		r := fn(kind, tp, fw)
		mu.Lock()
		got[kind] = r
		mu.Unlock()
	})
	return got
}

// lockFile and unlockFile hold xfw's lock file like a running command does.
func lockFile(f *os.File) error   { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// drainFw returns once fw has taken in every frame gen and sink sent into
// it so far (nettest's Topology.Drain): the barrier before reading
// counters, where a sleep would only make a late frame unlikely.
func drainFw(t testing.TB, tp *nettest.Topology) {
	t.Helper()
	if err := tp.Drain(); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// drainTwins is drainFw for both twins.
func drainTwins(t testing.TB, tw *twins) {
	t.Helper()
	for _, tp := range tw.tps {
		drainFw(t, tp)
	}
}

// genHost returns host h of gen's subnet, as the rate and recent tests
// send from it: gen's address with its last byte 0x40+h (addresses no
// interface holds, one per key a test needs).
func genHost(gen netip.Addr, h byte) netip.Addr {
	b := gen.AsSlice()
	b[len(b)-1] = 0x40 + h
	a, _ := netip.AddrFromSlice(b)
	return a
}
