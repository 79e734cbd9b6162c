package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The classbench section: the ClassBench filter sets (classbench.go) as
// FORWARD chains. For each set, xfw_xdp's cost per packet over a trace of
// distinct frames drawn from the rules (BPF_PROG_TEST_RUN), the per-rule
// counters of a trace sent once through iptables-legacy (the kernel, the
// oracle) and xfw against the reference classifier, and forwarding rates
// over the trace for no firewall, xfw with no rules, xfw, iptables-legacy,
// iptables-nft and nftables as a rule list and as a concatenated interval set.

// Defaults of the section's options.
const (
	cbDefaultDir   = "../shared/classbench"
	cbDefaultSets  = "acl1_1k,fw1_1k,ipc1_1k,acl1_10k,fw1_10k,ipc1_10k"
	cbDefaultTrace = 10000
	// seedClassBench seeds every trace.
	seedClassBench = 5
	// cbRepeat is how many times one test-run call runs each frame of the
	// trace: enough for the kernel's timer, few enough that the trace's
	// frames, not one frame, are what the caches see.
	cbRepeat = 16
	// cbSendChunk is how many frames one live-frames call sends when the
	// trace is sent once (each call ends with a grace period, which paces
	// the sending so fw's ring does not overflow).
	cbSendChunk = 32
)

// Names of the nftables variants of the section.
const (
	// cbXFWEmpty is xfw with an empty FORWARD chain, policy ACCEPT (the
	// reference of issue 22's target 2).
	cbXFWEmpty = "xfw, no rules"
	cbNFTList  = "nftables (rule list)"
	cbNFTSet   = "nftables (interval set)"
)

// cbSystem is one firewall of the section's forwarding rates.
type cbSystem struct {
	name string
	// load loads the rendered set into ns.
	load func(ctx context.Context, ns string, rules []cbRule, r cbRendered) error
	// counters reads the FORWARD rules' packet counters (nil: none).
	counters func(ctx context.Context, ns string) ([]uint64, error)
	// diag, if set, says how the firewall handled the trace sent once
	// (xfw: `xfw fastpath`, the packets that took the XDP fast path).
	diag func(ctx context.Context, ns string) (string, error)
}

// cbSystems returns the firewalls compared.
func cbSystems(xfwBin string) []*cbSystem {
	restore := func(argv ...string) func(context.Context, string, []cbRule, cbRendered) error {
		return func(ctx context.Context, ns string, _ []cbRule, r cbRendered) error {
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(r.Restore), argv...)
			return err
		}
	}
	nft := func(render func([]cbRule) string) func(context.Context, string, []cbRule, cbRendered) error {
		return func(ctx context.Context, ns string, rules []cbRule, _ cbRendered) error {
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(render(rules)), "nft", "-f", "/dev/stdin")
			return err
		}
	}
	counters := func(argv ...string) func(context.Context, string) ([]uint64, error) {
		return func(ctx context.Context, ns string) ([]uint64, error) {
			return iptablesCounters(ctx, ns, "FORWARD", argv...)
		}
	}
	fastPath := func(ctx context.Context, ns string) (string, error) {
		res, err := runIn(ctx, 0, ns, nil, xfwBin, "fastpath")
		return res.Stdout, err
	}
	return []*cbSystem{
		{name: fwNone, load: func(context.Context, string, []cbRule, cbRendered) error { return nil }},
		{name: cbXFWEmpty, load: func(ctx context.Context, ns string, _ []cbRule, _ cbRendered) error {
			empty := &ruleset{Chain: "FORWARD", Policy: "ACCEPT"}
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(empty.iptablesRestore(false)), xfwBin, "iptables-restore", "-w")
			return err
		}, diag: fastPath},
		{name: fwXFW, load: restore(xfwBin, "iptables-restore", "-w"), counters: counters(xfwBin, "iptables", "-w"), diag: fastPath},
		{name: fwLegacy, load: restore("iptables-legacy-restore", "-w"), counters: counters("iptables-legacy", "-w")},
		{name: fwIptNFT, load: restore("iptables-nft-restore", "-w"), counters: counters("iptables-nft", "-w")},
		{name: cbNFTList, load: nft(renderNft)},
		{name: cbNFTSet, load: nft(renderNftSet)},
	}
}

// cbSetResult is one filter set's measurements.
type cbSetResult struct {
	Set string `json:"set"`
	// Rules is the set's rule count (without its default rule:
	// DefaultDropped), Chain the rendered FORWARD chain's, Omitted the
	// rules left out (they match nothing).
	DefaultDropped bool `json:"default_dropped"`
	Rules          int  `json:"rules"`
	Chain          int  `json:"chain"`
	Omitted        int  `json:"omitted"`
	// Trace is the number of distinct packets; SkippedRules the rules no
	// forwardable packet could be drawn in; MeanFirstMatch the mean
	// position (1-based) of the packets' first matching rule.
	Trace          int     `json:"trace"`
	SkippedRules   int     `json:"skipped_rules"`
	MeanFirstMatch float64 `json:"mean_first_match"`
	// Ns is xfw_xdp's mean duration per packet over the trace (one value
	// per pass over it); Steps and Lookups the instruction proxy's means.
	Ns stats `json:"ns"`
	// NsOnce is the same with each frame run once per call: the caches
	// hold what the previous frames left, not this frame's own data.
	NsOnce        stats   `json:"ns_once"`
	Steps         float64 `json:"steps"`
	Lookups       float64 `json:"lookups"`
	XlatedInsns   int     `json:"xlated_insns"`
	VerifiedInsns int     `json:"verified_insns"`
	// NoMatch is one TCP packet matching no rule (dropped by the
	// policy), if MissFound.
	NoMatch   progRunCase `json:"no_match"`
	MissFound bool        `json:"miss_found"`
	// CountersChecked: after the test runs every rule's counter was the
	// reference classifier's count times the runs of each frame.
	CountersChecked bool    `json:"counters_checked"`
	CompileSecs     float64 `json:"compile_seconds"`
	ProgRunError    string  `json:"progrun_error,omitempty"`
	// Checks are the trace sent once through each firewall: what arrived
	// and, for iptables' counters, whether each rule counted the packets
	// the reference classifier gives it.
	Checks []string `json:"checks"`
	// Diag is each firewall's own account of the trace sent once (xfw:
	// its fast path counters).
	Diag map[string]string `json:"diag,omitempty"`
	// Forward are the forwarding rates, one point per firewall (X: rules).
	Forward []seriesPoint `json:"forward"`
}

// classBenchSection is the section's result.
type classBenchSection struct {
	Dir string `json:"dir"`
	// Run says which run measured the section (command, start, commit).
	Run string `json:"run,omitempty"`
	// Error says why nothing was measured (no filter sets).
	Error string        `json:"error,omitempty"`
	Sets  []cbSetResult `json:"sets"`
	Notes []string      `json:"notes"`
}

// runClassBench measures every selected filter set.
func runClassBench(ctx context.Context, o *options) (*classBenchSection, error) {
	sec := &classBenchSection{Dir: o.cbDir, Run: o.runInfo, Notes: cbNotes(o)}
	if _, err := os.Stat(o.cbDir); err != nil {
		// The sets are not part of the repository: a run without them
		// says so and goes on with the other sections.
		sec.Error = fmt.Sprintf("no ClassBench filter sets (-classbench-dir): %v", err)
		progress("classbench: %s", sec.Error)
		return sec, nil
	}
	for _, name := range o.cbSets {
		res, err := runClassBenchSet(ctx, o, name)
		if err != nil {
			return nil, err
		}
		sec.Sets = append(sec.Sets, *res)
	}
	return sec, nil
}

// runClassBenchSet measures one filter set.
func runClassBenchSet(ctx context.Context, o *options, name string) (*cbSetResult, error) {
	f, err := os.Open(filepath.Join(o.cbDir, name))
	if err != nil {
		return nil, fmt.Errorf("classbench: %w", err)
	}
	rules, err := parseClassBench(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("classbench %s: %w", name, err)
	}
	rules, dropped := cbWithoutDefault(rules)
	rendered := renderIptables(rules)
	trace, skipped := cbTrace(rules, o.cbTrace, seedClassBench)
	if len(trace) == 0 {
		return nil, fmt.Errorf("classbench %s: no packet could be drawn", name)
	}
	res := &cbSetResult{Set: name, Rules: len(rules), Chain: len(rendered.RuleOf), Omitted: rendered.Omitted,
		Trace: len(trace), SkippedRules: skipped, DefaultDropped: dropped}
	sum := 0
	for _, p := range trace {
		sum += p.Rule + 1
	}
	res.MeanFirstMatch = float64(sum) / float64(len(trace))
	progress("classbench %s: %d rules (%d chain rules, %d omitted), trace of %d packets (%d rules skipped), mean first match at rule %.0f",
		name, len(rules), res.Chain, res.Omitted, len(trace), skipped, res.MeanFirstMatch)
	if err := cbProgRun(ctx, o, res, rules, rendered, trace); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		res.ProgRunError = err.Error()
	}
	progress("classbench %s: xfw_xdp %.0f ns/packet (%.0f–%.0f), each frame once %.0f ns (%.0f–%.0f), %.1f steps, %.1f lookups; no match %.0f ns %s", name,
		res.Ns.Median, res.Ns.Min, res.Ns.Max, res.NsOnce.Median, res.NsOnce.Min, res.NsOnce.Max, res.Steps, res.Lookups, res.NoMatch.Ns.Median, res.ProgRunError)
	if o.cbProgRunOnly {
		return res, ctx.Err()
	}
	if err := cbForward(ctx, o, res, rules, rendered, trace); err != nil {
		return nil, err
	}
	return res, ctx.Err()
}

// cbFlows returns the trace as the generator's flows.
func cbFlows(trace []cbTraced) []flow {
	out := make([]flow, len(trace))
	for i, t := range trace {
		out[i] = flow{Src: t.Pkt.Src, Dst: t.Pkt.Dst, Sport: t.Pkt.Sport, Dport: t.Pkt.Dport, Proto: t.Pkt.Proto}
	}
	return out
}

// cbCompilerPacket is the compiler's view of a trace packet on FORWARD.
func cbCompilerPacket(p cbPacket) *compiler.Packet {
	cp := compilerPacket(flow{Src: p.Src, Dst: p.Dst, Sport: p.Sport, Dport: p.Dport}, frameLen-14)
	cp.Proto = uint32(p.Proto)
	switch p.Proto {
	case protoTCP:
		cp.TCPFlags = uint32(tcpACK[1])
	case protoUDP:
	default:
		cp.Sport, cp.Dport = compiler.ValNone, compiler.ValNone
		if p.Proto == protoICMP {
			cp.ICMP = uint32(p.Sport) // type << 8 | code
		}
	}
	return cp
}

// cbProgRun loads the set with the dataplane package into a fresh fw
// namespace (fast path off: see fastPathOff) and times xfw_xdp over the
// trace's frames, checking each verdict against the reference classifier
// and Generation.Classify.
func cbProgRun(ctx context.Context, o *options, res *cbSetResult, rules []cbRule, r cbRendered, trace []cbTraced) error {
	defer fastPathOff()()
	t, err := newTopology(ctx, "classbench")
	if err != nil {
		return err
	}
	defer t.Close()
	// Every trace destination is routed to sink: without a route the FIB
	// lookup fails and xfw_xdp leaves the packet to the stack before
	// FORWARD's classification.
	if err := mustIn(ctx, t.FwNS, "ip", "route", "add", "default", "via", sinkAddr.String()); err != nil {
		return err
	}
	// extraRuns bounds the runs of calls a signal interrupted (the
	// kernel does not say how many it made before returning EINTR).
	var extraRuns uint64
	err = nettest.InNamespace(t.FwNS, func() error {
		var row progRunRow
		gen, err := applyTextInProcess(r.Restore, &row)
		if err != nil {
			return err
		}
		res.CompileSecs = row.CompileSeconds
		prog, err := attachedXDP(t.FwIn)
		if err != nil {
			return err
		}
		defer prog.Close()
		res.XlatedInsns, _, res.VerifiedInsns = progSizes(prog)
		frames := make([][]byte, len(trace))
		var steps, lookups int
		for i, tp := range trace {
			frames[i] = flowFrame(t, cbFlows(trace[i : i+1])[0])
			p := cbCompilerPacket(tp.Pkt)
			cost, entry := lbvsCostOf(gen, p, compiler.ChainForward)
			if want := gen.Classify(p, compiler.ChainForward).Entry; want != entry {
				return fmt.Errorf("cost replica disagrees with Classify on %+v: entry %d, want %d", tp.Pkt, entry, want)
			}
			if (entry < 0) != (tp.Rule < 0) {
				return fmt.Errorf("Classify on %+v: entry %d, reference classifier rule %d", tp.Pkt, entry, tp.Rule)
			}
			steps += cost.Steps
			lookups += cost.Lookups
		}
		res.Steps = float64(steps) / float64(len(trace))
		res.Lookups = float64(lookups) / float64(len(trace))
		if err := pinSelf(fwCPU); err != nil {
			return err
		}
		var means, once []float64
		for pass := 0; pass < o.reps; pass++ {
			m, x, err := cbPass(prog, frames, trace, cbRepeat)
			if err != nil {
				return err
			}
			m1, x1, err := cbPass(prog, frames, trace, 1)
			if err != nil {
				return err
			}
			extraRuns += x + x1
			means, once = append(means, m), append(once, m1)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		res.Ns, res.NsOnce = summarize(means), summarize(once)
		// Every trace packet is accepted: one that no rule matches must
		// be dropped (policy DROP), after a walk of the whole chain.
		miss, ok := cbMiss(rules)
		if !ok {
			return nil
		}
		res.MissFound = true
		res.NoMatch, err = timeFrame(prog, flowFrame(t, cbFlows([]cbTraced{{Pkt: miss}})[0]), o.reps)
		if err != nil {
			return err
		}
		if res.NoMatch.Retval != xdpDrop {
			return fmt.Errorf("xfw_xdp returned %d on %+v, which no rule matches (want %d)", res.NoMatch.Retval, miss, xdpDrop)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Each run of a frame counts on its rule: the counters must be the
	// reference classifier's counts times the runs of each frame.
	got, err := iptablesCounters(ctx, t.FwNS, "FORWARD", o.xfwBin, "iptables", "-w")
	if err != nil {
		return fmt.Errorf("read counters after the test runs: %w", err)
	}
	want := cbExpectedCounts(r, trace)
	if len(got) != len(want) {
		return fmt.Errorf("%d rule counters after the test runs, want %d", len(got), len(want))
	}
	runs := uint64(o.reps) * (cbRepeat + 1)
	var over uint64
	for j := range want {
		if got[j] < want[j]*runs {
			return fmt.Errorf("after the test runs chain rule %d counted %d, want %d (%d trace packets × %d runs)", j+1, got[j], want[j]*runs, want[j], runs)
		}
		if want[j] == 0 && got[j] != 0 {
			return fmt.Errorf("after the test runs chain rule %d counted %d, want 0", j+1, got[j])
		}
		over += got[j] - want[j]*runs
	}
	if over > extraRuns {
		return fmt.Errorf("after the test runs the rules counted %d runs more than the trace's, of at most %d interrupted", over, extraRuns)
	}
	res.CountersChecked = true
	return nil
}

// cbMiss returns a TCP packet no rule matches (false: none found).
func cbMiss(rules []cbRule) (cbPacket, bool) {
	rng := rand.New(rand.NewSource(seedClassBench))
	all := netip.MustParsePrefix("0.0.0.0/0")
	const tries = 10000 // random packets tried
	for i := 0; i < tries; i++ {
		p := cbPacket{Src: randomInPrefix(rng, all), Dst: randomInPrefix(rng, all),
			Proto: protoTCP, Sport: uint16(rng.Intn(65536)), Dport: uint16(rng.Intn(65536))}
		if forwardable(p.Src) && forwardable(p.Dst) && cbClassify(rules, p) < 0 {
			return p, true
		}
	}
	return cbPacket{}, false
}

// cbPass runs each frame repeat times and returns the mean duration of
// one run over the trace; a frame whose verdict is not the reference
// classifier's is an error.
func cbPass(prog *ebpf.Program, frames [][]byte, trace []cbTraced, repeat uint32) (float64, uint64, error) {
	md := &xdpMD{IngressIfindex: fwInIfindex}
	var total float64
	var extra uint64 // runs an interrupted call may have made
	for i, fr := range frames {
		md.DataEnd = uint32(len(fr))
		var ret, ns uint32
		var err error
		for {
			ret, ns, err = progRun(prog, fr, md, repeat, 0, 0)
			if !errors.Is(err, errInterrupted) {
				break
			}
			extra += uint64(repeat)
		}
		if err != nil {
			return 0, 0, err
		}
		if dropped := ret == xdpDrop; dropped != (trace[i].Rule < 0) {
			return 0, 0, fmt.Errorf("xfw_xdp returned %d on %+v, reference classifier rule %d", ret, trace[i].Pkt, trace[i].Rule)
		}
		total += float64(ns)
	}
	return total / float64(len(frames)), extra, nil
}

// cbForward loads the set into every firewall's rig, sends the trace once
// through each (checking what arrived and the rules' counters), then
// measures the forwarding rates over the trace, rotating the order every
// repetition.
func cbForward(ctx context.Context, o *options, res *cbSetResult, rules []cbRule, r cbRendered, trace []cbTraced) error {
	systems := cbSystems(o.xfwBin)
	var fws []*firewall
	for _, s := range systems {
		fws = append(fws, &firewall{Name: s.name})
	}
	rigs, err := newRigs(ctx, fws)
	if err != nil {
		return err
	}
	defer closeRigs(rigs)
	flows := cbFlows(trace)
	points := make([]seriesPoint, len(systems))
	var active []int
	for i, s := range systems {
		points[i] = seriesPoint{Firewall: s.name, X: res.Rules}
		rg := rigs[i]
		err := func() error {
			// Every trace destination is routed to sink.
			if err := mustIn(ctx, rg.topo.FwNS, "ip", "route", "add", "default", "via", sinkAddr.String()); err != nil {
				return err
			}
			start := time.Now()
			if err := s.load(ctx, rg.topo.FwNS, rules, r); err != nil {
				return fmt.Errorf("load: %w", err)
			}
			points[i].LoadSeconds = time.Since(start).Seconds()
			if err := rg.gen.setFlows(flows); err != nil {
				return err
			}
			check, err := cbCheck(ctx, rg, s, r, trace)
			if err != nil {
				return err
			}
			res.Checks = append(res.Checks, s.name+": "+check)
			if s.diag != nil {
				d, err := s.diag(ctx, rg.topo.FwNS)
				if err != nil {
					return err
				}
				if res.Diag == nil {
					res.Diag = map[string]string{}
				}
				res.Diag[s.name] = d
				progress("classbench %s: %s after the trace:\n%s", res.Set, s.name, d)
			}
			progress("classbench %s: %s: loaded in %.2f s; %s", res.Set, s.name, points[i].LoadSeconds, check)
			return nil
		}()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			points[i].Error = firstLine(err.Error())
			progress("classbench %s: %s: %s", res.Set, s.name, points[i].Error)
			continue
		}
		active = append(active, i)
	}
	for rep := 0; rep < o.reps; rep++ {
		for k := range active {
			i := active[(k+rep)%len(active)]
			p, err := measure(rigs[i].topo, rigs[i].gen, rigs[i].topo.sinkPackets, o.timing, nil)
			if err != nil {
				return fmt.Errorf("classbench %s %s: %w", res.Set, systems[i].name, err)
			}
			points[i].Points = append(points[i].Points, p)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for _, i := range active {
		points[i].finish()
		progress("classbench %s: %-24s %10s pps (%s–%s), %4.0f ns/pkt fw CPU", res.Set, systems[i].name,
			humanRate(points[i].PPS.Median), humanRate(points[i].PPS.Min), humanRate(points[i].PPS.Max), points[i].NsPerPkt.Median)
	}
	res.Forward = points
	return nil
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// cbCheck sends each trace packet once through rg's firewall and compares
// what sink received (every trace packet is accepted) and the rules'
// counters with the reference classifier's first matches.
func cbCheck(ctx context.Context, rg *rig, s *cbSystem, r cbRendered, trace []cbTraced) (string, error) {
	var before []uint64
	if s.counters != nil {
		var err error
		if before, err = s.counters(ctx, rg.topo.FwNS); err != nil {
			return "", err
		}
	}
	rx := ifaceRxPackets(rg.topo.FwNS, rg.topo.FwIn)
	sink0, err := rg.topo.sinkPackets()
	if err != nil {
		return "", err
	}
	rx0, err := rx()
	if err != nil {
		return "", err
	}
	if err := rg.gen.sendOnce(len(trace), cbSendChunk); err != nil {
		return "", err
	}
	time.Sleep(200 * time.Millisecond) // the last frames cross fw
	sink1, err := rg.topo.sinkPackets()
	if err != nil {
		return "", err
	}
	rx1, err := rx()
	if err != nil {
		return "", err
	}
	// fw's ingress counts what its receive path took from the ring (not
	// what a full ring lost before it).
	msg := fmt.Sprintf("%d of %d trace packets forwarded (fw received %d)", sink1-sink0, len(trace), rx1-rx0)
	if s.counters == nil {
		return msg, nil
	}
	after, err := s.counters(ctx, rg.topo.FwNS)
	if err != nil {
		return "", err
	}
	if len(after) != len(r.RuleOf) || len(before) != len(after) {
		return "", fmt.Errorf("%d rule counters, want %d", len(after), len(r.RuleOf))
	}
	want := cbExpectedCounts(r, trace)
	bad := 0
	var first string
	for j := range after {
		if got := after[j] - before[j]; got != want[j] {
			if bad == 0 {
				first = fmt.Sprintf(" (first: chain rule %d counted %d, want %d)", j+1, got, want[j])
			}
			bad++
		}
	}
	if bad == 0 {
		return msg + fmt.Sprintf("; all %d rule counters as the reference classifier", len(after)), nil
	}
	return msg + fmt.Sprintf("; %d of %d rule counters differ from the reference classifier%s", bad, len(after), first), nil
}

// cbExpectedCounts returns how many trace packets each chain rule should
// count: those whose first match is its ClassBench rule, of its protocol
// when the rule was split into a tcp and a udp rule.
func cbExpectedCounts(r cbRendered, trace []cbTraced) []uint64 {
	out := make([]uint64, len(r.RuleOf))
	first := map[int]int{} // ClassBench rule → its first chain rule
	for j := len(r.RuleOf) - 1; j >= 0; j-- {
		first[r.RuleOf[j]] = j
	}
	for _, t := range trace {
		j, ok := first[t.Rule]
		if !ok {
			continue
		}
		for ; j < len(r.RuleOf) && r.RuleOf[j] == t.Rule; j++ {
			if p := r.Proto[j]; p == 0 || p == t.Pkt.Proto {
				out[j]++
				break
			}
		}
	}
	return out
}

// sendOnce sends n frames, the generator's flows from the first, once each,
// chunk frames per live-frames call.
func (g *generator) sendOnce(n, chunk int) error {
	if err := g.state.Put(uint32(0), [2]uint64{0, uint64(g.n)}); err != nil {
		return fmt.Errorf("generator: rewind: %w", err)
	}
	return nettest.InNamespace(g.t.GenNS, func() error {
		if err := pinSelf(genCPU); err != nil {
			return err
		}
		md := &xdpMD{DataEnd: uint32(len(g.frame)), IngressIfindex: genIfindex}
		for sent := 0; sent < n; {
			k := min(chunk, n-sent)
			_, _, err := progRun(g.prog, g.frame, md, uint32(k), bpfFTestXDPLiveFrames, uint32(k))
			if errors.Is(err, errInterrupted) {
				return fmt.Errorf("generator: interrupted after %d frames", sent)
			}
			if err != nil {
				return fmt.Errorf("generator: %w", err)
			}
			sent += k
		}
		return nil
	})
}

// cbNotes describes the section.
func cbNotes(o *options) []string {
	return []string{
		fmt.Sprintf("Filter sets: ClassBench (Taylor & Turner) acl, fw and ipc families from %s. The set's last rule, its default rule matching every packet, is left out (kept, everything would be accepted, no packet could miss, and an nftables set of the accepted packets would hold it alone); each other rule becomes `-A FORWARD -s SRC -d DST [-p PROTO [-m PROTO --sport LO:HI --dport LO:HI]] -j ACCEPT` in file order, policy DROP; the TCP-flags column is ignored; a rule of any protocol with port ranges becomes a tcp and a udp rule; a rule of a protocol without ports (ICMP, GRE, …) with a port range matches nothing and is left out (fw2 has such rules).", o.cbDir),
		fmt.Sprintf("Trace: %d distinct packets, each at a random point (seeded) of a randomly chosen rule: addresses inside its prefixes, ports inside its ranges, a rule of any protocol gives TCP, UDP or ICMP echo requests; its expected rule is the first that matches it (reference classifier), which need not be the rule it was drawn in. Packets the kernel would not forward (0/8, 127/8, multicast, 255.255.255.255) and the bench's own networks (10.1/16, 10.100/16, 10.128/9) are drawn again; a rule with none after 32 draws is skipped. TCP segments carry ACK (a connection picked up mid-stream).", o.cbTrace),
		fmt.Sprintf("ns/packet: BPF_PROG_TEST_RUN of the attached xfw_xdp (loaded with the dataplane package, fast path off: see progrun), each frame of the trace run %d times per call (after its first run the frame's own entries are in the caches), and each run once per call (the duration then also holds one read of the kernel clock per run: this one errs high); mean over the trace, median [min–max] of %d passes. steps/lookups: the instruction proxy of the progrun section, mean over the trace; no match: a TCP packet no rule matches, if one of 10,000 random ones is (the whole chain walked, dropped by the policy), timed as the progrun section times one frame; each frame's verdict is checked against the reference classifier and compiler.Generation.Classify, and after the runs each rule's counter must be the number of trace packets whose first match it is times the runs of each frame (so every run was classified by FORWARD).", cbRepeat, o.reps),
		"Check: before measuring, the trace is sent once (live frames, 32 per call) through each loaded firewall; sink must receive every packet, and each iptables rule's packet counter must equal the number of trace packets whose first match it is (iptables-legacy is the kernel's answer; xfw must agree).",
		"Forwarding: gen (CPU 0) cycles through the trace's packets at full speed; fw forwards on CPU 1 (xfw with its XDP fast path on; \"xfw, no rules\": an empty FORWARD chain, policy ACCEPT, the reference of issue 22's target 2). pps: what sink received, median [min–max] of the repetitions (order rotated); fw CPU ns/pkt: fw's receive path CPU time per forwarded packet.",
		"nftables (rule list): one rule per iptables rule, written as nft users do (`ip saddr P ip daddr P tcp sport A-B tcp dport C-D accept`). nftables (interval set): sets of type `ipv4_addr . ipv4_addr . inet_proto . inet_service . inet_service` with `flags interval` holding every rule (those inside another left out: the accepted packets are the same), and one rule `ip saddr . ip daddr . meta l4proto . th sport . th dport @aclN accept` per set (every rule accepts, so order does not matter); the kernel refuses an element whose lowest or highest corner lies inside an element added before it, so partially overlapping elements go to a further set, each to the first that takes it (1–2 sets for these files).",
	}
}

// writeClassBench renders the section.
func writeClassBench(b *strings.Builder, s *classBenchSection, plot string) {
	b.WriteString("## ClassBench filter sets (FORWARD)\n\n")
	if s.Error != "" {
		fmt.Fprintf(b, "Not measured: %s.\n\n", s.Error)
		return
	}
	if s.Run != "" {
		fmt.Fprintf(b, "%s\n\n", s.Run)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if plot != "" {
		fmt.Fprintf(b, "\n![ClassBench forwarding](%s)\n", plot)
	}
	fmt.Fprintf(b, "\n| set | rules (chain) | trace | mean first match | xfw_xdp ns/packet, ×%d [min–max] | ×1 [min–max] | steps / lookups | no match: ns [min–max] | verified insns | compile (s) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", cbRepeat)
	for _, r := range s.Sets {
		if r.ProgRunError != "" {
			fmt.Fprintf(b, "| %s | %d (%d) | %d | %.0f | error: %s | | | | | |\n", r.Set, r.Rules, r.Chain, r.Trace, r.MeanFirstMatch, r.ProgRunError)
			continue
		}
		miss := "none found"
		if r.MissFound {
			miss = fmt.Sprintf("%.0f [%.0f–%.0f]", r.NoMatch.Ns.Median, r.NoMatch.Ns.Min, r.NoMatch.Ns.Max)
		}
		fmt.Fprintf(b, "| %s | %d (%d) | %d | %.0f | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %.1f / %.1f | %s | %d | %.2f |\n", r.Set, r.Rules, r.Chain, r.Trace,
			r.MeanFirstMatch, r.Ns.Median, r.Ns.Min, r.Ns.Max, r.NsOnce.Median, r.NsOnce.Min, r.NsOnce.Max, r.Steps, r.Lookups,
			miss, r.VerifiedInsns, r.CompileSecs)
	}
	if len(s.Sets) == 0 {
		return
	}
	names := []string{}
	for _, p := range s.Sets[0].Forward {
		names = append(names, p.Firewall)
	}
	b.WriteString("\nForwarding rate over the trace, pps (fw CPU ns/packet):\n\n| set |")
	for _, n := range names {
		fmt.Fprintf(b, " %s |", n)
	}
	b.WriteString(" xfw / no firewall | xfw / xfw, no rules |\n|---|")
	for range names {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|\n")
	for _, r := range s.Sets {
		fmt.Fprintf(b, "| %s |", r.Set)
		var none, empty, xfw float64
		for _, p := range r.Forward {
			if p.Error != "" {
				fmt.Fprintf(b, " %s |", p.Error)
				continue
			}
			fmt.Fprintf(b, " %s [%s–%s] (%.0f) |", humanRate(p.PPS.Median), humanRate(p.PPS.Min), humanRate(p.PPS.Max), p.NsPerPkt.Median)
			switch p.Firewall {
			case fwNone:
				none = p.PPS.Median
			case cbXFWEmpty:
				empty = p.PPS.Median
			case fwXFW:
				xfw = p.PPS.Median
			}
		}
		fmt.Fprintf(b, " %.2f | %.2f |\n", safeRatio(xfw, none), safeRatio(xfw, empty))
	}
	b.WriteString("\nChecks (the trace sent once):\n\n")
	for _, r := range s.Sets {
		for _, c := range r.Checks {
			fmt.Fprintf(b, "- %s: %s\n", r.Set, c)
		}
	}
	b.WriteString("\n")
}
