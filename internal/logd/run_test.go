package logd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// lineSink collects the lines Run writes.
type lineSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
}

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	for {
		l, err := s.buf.ReadString('\n')
		if err != nil {
			s.buf.WriteString(l) // an incomplete line: keep it
			break
		}
		s.lines = append(s.lines, strings.TrimSuffix(l, "\n"))
	}
	return len(p), nil
}

// withPrefix returns the lines that start with prefix.
func (s *lineSink) withPrefix(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// waitPrefix waits until n lines start with prefix.
func (s *lineSink) waitPrefix(prefix string, n int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		got := s.withPrefix(prefix)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(kmsgPoll)
	}
}

// runLogLevel is the level of the test's LOG rules (info), not the default.
const runLogLevel = 6

// hostMatch matches address a alone (any address when a is invalid).
func hostMatch(a netip.Addr) ir.AddrMatch {
	if !a.IsValid() {
		return ir.AddrMatch{}
	}
	ones := bytes.Repeat([]byte{0xff}, a.BitLen()/8)
	mask, _ := netip.AddrFromSlice(ones)
	return ir.AddrMatch{Set: true, Addr: a, Mask: mask}
}

// logRule returns a LOG rule restricted to src and dst (either may be
// invalid for "any").
func logRule(src, dst netip.Addr, prefix string, flags uint8) *ir.Rule {
	return &ir.Rule{
		Src: hostMatch(src), Dst: hostMatch(dst),
		Target: ir.Target{Kind: ir.TargetLog, Log: &ir.LogOptions{
			Level: runLogLevel, LevelSet: true, Prefix: prefix, Flags: flags,
		}},
	}
}

// loadXfw compiles and applies a ruleset of LOG rules (chain → rules) for
// fam in the calling thread's namespace.
func loadXfw(fam ir.Family, chains map[string][]*ir.Rule) error {
	rs := ir.NewRuleset(fam)
	for name, rules := range chains {
		rs.Chain(name).Rules = rules
	}
	ifs, err := dataplane.CompilerInterfaces()
	if err != nil {
		return err
	}
	g, err := compiler.Compile(rs, compiler.Options{Interfaces: ifs})
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	srcs := make([]dataplane.CounterSource, g.NumCounters())
	for i := range srcs {
		srcs[i].From = -1
	}
	return dataplane.Apply(fam, &dataplane.Update{Gen: g, Saved: []byte("# logd test\n"), Counters: srcs}, dataplane.AttachOptions{})
}

// ringID returns the ID of the running LOG ring of the calling thread's
// namespace.
func ringID() (ebpf.MapID, error) {
	m, err := dataplane.LogRing()
	if err != nil {
		return 0, err
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return 0, err
	}
	id, _ := info.ID()
	return id, nil
}

// TestRunMatchesKernel runs xfw with LOG rules beside the same
// iptables-legacy rules, sends the packets of the kernel comparison through
// fw, and checks that Run prints, for every packet, the kernel's line. It
// also replaces the data plane (the ring is kept), stops and starts it (a
// new ring: Run must follow), writes to /dev/kmsg and stops Run.
//
// Each family is loaded alone: dataplane.Apply cannot yet add a family
// beside another one whose maps grew (their specs keep one entry).
func TestRunMatchesKernel(t *testing.T) {
	topo := nettest.New(t, nettest.WithBase("xfwlogr"), nettest.WithStaticNeighbors())
	enableNetnsLogging(t)
	env := &oracleEnv{topo: topo}
	fw := topo.FwNS
	tail, err := openKmsgTail()
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()

	tag := make([]byte, 3)
	if _, err := rand.Read(tag); err != nil {
		t.Fatal(err)
	}
	// xfw's and the kernel's prefixes have the same length.
	px := func(chain string) string { return fmt.Sprintf("xr%sx-%s ", hex.EncodeToString(tag), chain[:3]) }
	pk := func(chain string) string { return fmt.Sprintf("xr%sk-%s ", hex.EncodeToString(tag), chain[:3]) }
	chains := []string{ir.ChainInput, ir.ChainForward, ir.ChainOutput}
	const flags = flagsAll
	gen := map[ir.Family]netip.Addr{ir.IPv4: topo.Gen.IPv4, ir.IPv6: topo.Gen.IPv6}
	xfwRules := func(fam ir.Family, tag string) map[string][]*ir.Rule {
		return map[string][]*ir.Rule{
			ir.ChainInput:   {logRule(gen[fam], netip.Addr{}, px(ir.ChainInput)+tag, flags)},
			ir.ChainForward: {logRule(gen[fam], netip.Addr{}, px(ir.ChainForward)+tag, flags)},
			ir.ChainOutput:  {logRule(netip.Addr{}, gen[fam], px(ir.ChainOutput)+tag, flags)},
		}
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		for _, chain := range chains {
			dir := "-s"
			if chain == ir.ChainOutput {
				dir = "-d"
			}
			rule := []string{ipt(fam), "-A", chain, dir, gen[fam].String(), "-j", "LOG", "--log-prefix", pk(chain), "--log-level", fmt.Sprint(runLogLevel)}
			nettest.MustExec(t, fw, append(rule, logOptions(flags)...)...)
		}
	}
	inFw := func(fn func() error) {
		t.Helper()
		if err := nettest.InNamespace(fw, fn); err != nil {
			t.Fatal(err)
		}
	}
	inFw(func() error { return loadXfw(ir.IPv4, xfwRules(ir.IPv4, "")) })
	t.Cleanup(func() { _ = nettest.InNamespace(fw, dataplane.Stop) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &lineSink{}
	done := make(chan error, 1)
	go func() {
		done <- nettest.InNamespace(fw, func() error { return Run(ctx, sink, false) })
	}()

	// compare sends the packets of fam's scenarios (except those whose line
	// holds the kernel's clock, loopback and VLANs, which have no rule
	// here) and compares Run's lines, whose prefix ends with tag, with the
	// kernel's, chain by chain, in order.
	compare := func(fam ir.Family, tag string) {
		t.Helper()
		for _, sc := range scenarios(env) {
			if sc.fam != fam || sc.timestamps || strings.Contains(sc.name, "/lo-") || strings.Contains(sc.name, "vlan") {
				continue
			}
			sc.send(t, env)
		}
		kernel := collectKmsg(t, tail)
		for _, chain := range chains {
			var want []string
			for _, l := range kernel {
				if strings.HasPrefix(l, pk(chain)) {
					want = append(want, l[len(pk(chain)):])
				}
			}
			if len(want) == 0 {
				t.Errorf("%s %s: the kernel logged nothing", fam, chain)
			}
			p := px(chain) + tag
			got := sink.waitPrefix(p, len(want), 5*time.Second)
			if len(got) != len(want) {
				t.Errorf("%s %s: Run printed %d lines, the kernel %d", fam, chain, len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				if g := got[i][len(p):]; g != want[i] {
					t.Errorf("%s %s line %d: Run differs from the kernel\n got: %q\nwant: %q", fam, chain, i, g, want[i])
				}
			}
			t.Logf("%s %s: %d lines compared", fam, chain, min(len(got), len(want)))
		}
	}
	ringOf := func() ebpf.MapID {
		t.Helper()
		var id ebpf.MapID
		inFw(func() (err error) { id, err = ringID(); return err })
		return id
	}

	// IPv4; then a new generation, which keeps the ring.
	compare(ir.IPv4, "")
	id1 := ringOf()
	if err := nettest.InNamespace(fw, func() error { return loadXfw(ir.IPv4, xfwRules(ir.IPv4, "g2 ")) }); err != nil {
		// Not Run's business: report it and go on with a restart.
		t.Logf("dataplane.Apply cannot replace the running generation, the kept-ring case is not exercised: %v", err)
	} else {
		if id2 := ringOf(); id2 != id1 {
			t.Errorf("replacing the data plane changed the ring (%d → %d)", id1, id2)
		}
		compare(ir.IPv4, "g2 ")
	}

	// xfw stopped and started again (IPv6 this time): a new ring.
	inFw(dataplane.Stop)
	inFw(func() error { return loadXfw(ir.IPv6, xfwRules(ir.IPv6, "g3 ")) })
	if id3 := ringOf(); id3 == id1 {
		t.Errorf("restarting the data plane kept the ring %d", id3)
	}
	compare(ir.IPv6, "g3 ")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(3 * ringPollInterval):
		t.Fatal("Run did not return after its context was cancelled")
	}

	// /dev/kmsg, with the rule's level.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	sink2 := &lineSink{}
	done2 := make(chan error, 1)
	go func() {
		done2 <- nettest.InNamespace(fw, func() error { return Run(ctx2, sink2, true) })
	}()
	time.Sleep(100 * time.Millisecond) // Run opens the ring
	nettest.Ping(topo.GenNS, topo.FwIn.IPv6)
	prefix := px(ir.ChainInput) + "g3 "
	rec, err := tail.waitLine(prefix, kernelLineTimeout)
	if err != nil {
		t.Fatalf("kmsg: %v", err)
	}
	if rec.level != runLogLevel {
		t.Errorf("kmsg level %d, want %d", rec.level, runLogLevel)
	}
	if got := sink2.waitPrefix(prefix, 1, time.Second); len(got) == 0 || got[0] != rec.text {
		t.Errorf("kmsg line %q, Run's output %q", rec.text, got)
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Errorf("Run with kmsg: %v", err)
	}
}

// kmsgQuiet is how long collectKmsg waits for more kernel log lines.
const kmsgQuiet = 500 * time.Millisecond

// collectKmsg returns the texts of the kernel log records until none came
// for kmsgQuiet.
func collectKmsg(t *testing.T, tail *kmsgTail) []string {
	t.Helper()
	var out []string
	last := time.Now()
	for time.Since(last) < kmsgQuiet {
		r, ok, err := tail.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(kmsgPoll)
			continue
		}
		out = append(out, r.text)
		last = time.Now()
	}
	return out
}
