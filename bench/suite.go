package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Rule counts of the scaling sweeps (issue #5: 0 … 100K 5-tuple rules).
var scalingSizes = []int{0, 50, 100, 500, 1000, 5000, 10000, 50000, 100000}

// quickSizes are the headline points of bench-quick.
var quickSizes = []int{1000, 10000, 100000}

// scalingFirewalls are compared in the scaling and DDoS sections.
var scalingFirewalls = []string{fwXFW, fwLegacy, fwIptNFT, fwNFT}

// report is everything a run measured (results/bench.json).
type report struct {
	Machine    machineInfo        `json:"machine"`
	Command    string             `json:"command"`
	Started    time.Time          `json:"started"`
	Seconds    float64            `json:"seconds"`
	Reps       int                `json:"reps"`
	WarmMs     int64              `json:"warm_ms"`
	WindowMs   int64              `json:"window_ms"`
	Generator  *genSection        `json:"generator,omitempty"`
	Forward    *throughputSection `json:"forward,omitempty"`
	Input      *throughputSection `json:"input,omitempty"`
	Sets       *throughputSection `json:"sets,omitempty"`
	DDoS       *throughputSection `json:"ddos,omitempty"`
	ProgRun    *progRunSection    `json:"progrun,omitempty"`
	Update     *updateSection     `json:"update,omitempty"`
	Conntrack  *ctSection         `json:"conntrack,omitempty"`
	RFPF       *rfpfSection       `json:"rfpf,omitempty"`
	SetLookup  *setLookupSection  `json:"setlookup,omitempty"`
	ClassBench *classBenchSection `json:"classbench,omitempty"`
	XDPDrop    *xdpDropSection    `json:"xdpdrop,omitempty"`
}

// runFull runs every selected section and writes the report.
func runFull(ctx context.Context, o *options) error {
	r, err := startFullRun(ctx, o)
	if err != nil {
		return err
	}
	if err := r.runGenerator(); err != nil {
		return err
	}
	if err := r.runRigSections(); err != nil {
		return err
	}
	if err := r.runOtherSections(); err != nil {
		return err
	}
	if err := r.save(); err != nil {
		return err
	}
	progress("done in %s: %s", time.Since(r.rep.Started).Round(time.Second), filepath.Join(o.out, "bench.md"))
	fmt.Print(headline(r.rep))
	return nil
}

// fullRun is the state of runFull: the report being written, the one
// already in -out (nil if none) and the firewalls compared.
type fullRun struct {
	ctx  context.Context
	o    *options
	rep  *report
	prev *report
	fws  map[string]*firewall
}

// startFullRun waits for the machine to be idle, describes it and reads
// the report already in -out.
func startFullRun(ctx context.Context, o *options) (*fullRun, error) {
	rep := &report{Command: "make bench", Started: time.Now(), Reps: o.reps,
		WarmMs: o.timing.Warm.Milliseconds(), WindowMs: o.timing.Window.Milliseconds()}
	waitIdle(o.waitIdle)
	var err error
	rep.Machine, err = describeMachine(o.xfwBin)
	if err != nil {
		return nil, err
	}
	progress("machine: %s, %d cores, kernel %s, %s memory", rep.Machine.CPU, rep.Machine.Cores, rep.Machine.Kernel, rep.Machine.Memory)
	o.runInfo = fmt.Sprintf("Measured by `%s`, started %s, xfw commit %s, load average %s at the start.",
		commandLine(), rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Machine.Versions["xfw commit"], rep.Machine.LoadAvg)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", o.out, err)
	}
	// A run of some sections only keeps the other sections of the
	// report already in -out (and its header: machine, command, start).
	prev, err := readPreviousReport(o.out, o.sections)
	if err != nil {
		return nil, err
	}
	return &fullRun{ctx: ctx, o: o, rep: rep, prev: prev, fws: firewalls(o.xfwBin)}, nil
}

// save writes the report measured so far (merged into the previous one).
func (r *fullRun) save() error {
	r.rep.Seconds = time.Since(r.rep.Started).Seconds()
	if r.prev != nil {
		return writeReport(r.o.out, mergeReports(r.prev, r.rep, r.o.sections))
	}
	return writeReport(r.o.out, r.rep)
}

// pick returns the named firewalls.
func (r *fullRun) pick(names []string) []*firewall {
	var out []*firewall
	for _, n := range names {
		out = append(out, r.fws[n])
	}
	return out
}

// runGenerator measures the generator's capacity, which the forward and
// input sections compare against.
func (r *fullRun) runGenerator() error {
	if !r.o.sections[secForward] && !r.o.sections[secInput] {
		return nil
	}
	progress("== generator capacity (empty path)")
	var err error
	if r.rep.Generator, err = runGenCapacity(r.ctx, r.o, r.fws[fwNone]); err != nil {
		return err
	}
	return r.save()
}

// runRigSections runs the sections that share one set of rigs: scaling
// (forward, input) and rule update latency.
func (r *fullRun) runRigSections() error {
	if !r.o.sections[secForward] && !r.o.sections[secInput] && !r.o.sections[secUpdate] {
		return nil
	}
	rigs, err := newRigs(r.ctx, r.pick(scalingFirewalls))
	if err != nil {
		return err
	}
	defer closeRigs(rigs)
	for _, mode := range []string{secForward, secInput} {
		if !r.o.sections[mode] {
			continue
		}
		if err := r.runScalingSection(rigs, mode == secInput); err != nil {
			return err
		}
	}
	if r.o.sections[secUpdate] {
		progress("== rule update latency")
		if r.rep.Update, err = runUpdate(r.ctx, r.o, rigs, updateSizes); err != nil {
			return err
		}
		return r.save()
	}
	return nil
}

// runScalingSection sweeps the 5-tuple rule counts through FORWARD, or
// INPUT if input.
func (r *fullRun) runScalingSection(rigs []*rig, input bool) error {
	chain := "FORWARD"
	if input {
		chain = "INPUT"
	}
	progress("== scaling, %s", chain)
	sec, err := runScaling(r.ctx, r.o, rigs, scaleConfig{
		title:  "Scaling, " + chain,
		xLabel: "5-tuple rules",
		xs:     scalingSizes,
		input:  input,
		rulesets: func(x int) (*ruleset, []flow) {
			flows := fiveTupleFlows(max(x, 1), input)
			return fiveTupleRuleset(chain, flows[:x]), flows
		},
	})
	if err != nil {
		return err
	}
	if input {
		r.rep.Input = sec
	} else {
		r.rep.Forward = sec
	}
	return r.save()
}

// runOtherSections runs the sections with rigs of their own, in order,
// saving the report after each.
func (r *fullRun) runOtherSections() error {
	ctx, o := r.ctx, r.o
	sections := []struct {
		name, title string
		run         func() error
	}{
		{secSets, "set-friendly rulesets", func() (err error) {
			r.rep.Sets, err = runSets(ctx, o, r.fws)
			return err
		}},
		{secDDoS, "DDoS scenario", func() (err error) {
			r.rep.DDoS, err = runDDoS(ctx, o, r.pick(scalingFirewalls))
			return err
		}},
		{secConntrack, "connection tracking", func() (err error) {
			r.rep.Conntrack, err = runConntrack(ctx, o, r.pick(scalingFirewalls))
			return err
		}},
		{secRFPF, "RFPF configuration (allow, block and geo sets)", func() (err error) {
			r.rep.RFPF, err = runRFPF(ctx, o)
			return err
		}},
		{secSetLookup, "set lookups (BPF_PROG_TEST_RUN)", func() (err error) {
			r.rep.SetLookup, err = runSetLookup(ctx, o)
			return err
		}},
		{secXDPDrop, "flood drop rate per core", func() (err error) {
			r.rep.XDPDrop, err = runXDPDrop(ctx, o)
			return err
		}},
		{secClassBench, "ClassBench filter sets", func() (err error) {
			r.rep.ClassBench, err = runClassBench(ctx, o)
			return err
		}},
		{secProgRun, "data-plane cost (BPF_PROG_TEST_RUN)", func() (err error) {
			r.rep.ProgRun, err = runProgRun(ctx, o)
			return err
		}},
	}
	for _, sec := range sections {
		if !o.sections[sec.name] {
			continue
		}
		progress("== %s", sec.title)
		if err := sec.run(); err != nil {
			return err
		}
		if err := r.save(); err != nil {
			return err
		}
	}
	return nil
}

// runQuick measures the headline points only and prints the ratios.
func runQuick(ctx context.Context, o *options) error {
	o.reps = 3
	o.timing = timing{Warm: 300 * time.Millisecond, Window: 500 * time.Millisecond}
	fmt.Fprintln(os.Stderr, "xfwbench -quick: xfw vs iptables-nft, FORWARD at 1K/10K/100K rules and appending to 10K rules (about 40 s)…")
	quiet = true
	fws := firewalls(o.xfwBin)
	rigs, err := newRigs(ctx, []*firewall{fws[fwXFW], fws[fwIptNFT]})
	if err != nil {
		return err
	}
	defer closeRigs(rigs)
	rep := &report{Command: "make bench-quick"}
	rep.Forward, err = runScaling(ctx, o, rigs, quickForward("Scaling, FORWARD"))
	if err != nil {
		return err
	}
	if rep.Update, err = runUpdate(ctx, o, rigs, []int{10000}); err != nil {
		return err
	}
	fmt.Print(headline(rep))
	return nil
}

// quickForward is the FORWARD sweep of -quick (and -fastpath): 5-tuple
// rules at the -quick-sizes counts.
func quickForward(title string) scaleConfig {
	return scaleConfig{
		title: title, xLabel: "5-tuple rules", xs: quickSizes,
		rulesets: func(x int) (*ruleset, []flow) {
			flows := fiveTupleFlows(max(x, 1), false)
			return fiveTupleRuleset("FORWARD", flows[:x]), flows
		},
	}
}

// genSection reports what the traffic generator reaches (issue item 8).
type genSection struct {
	// Raw: gen → fw's ingress interface, where an XDP program counts and
	// drops every frame: the most the generator can deliver to fw.
	Raw seriesPoint `json:"raw"`
	// EmptyPath: gen → fw (no firewall, forwarding) → sink.
	EmptyPath seriesPoint `json:"empty_path"`
	// EmptyInput: gen → fw's local UDP socket, no firewall.
	EmptyInput seriesPoint `json:"empty_input"`
}

// runGenCapacity measures the generator against an empty path.
func runGenCapacity(ctx context.Context, o *options, none *firewall) (*genSection, error) {
	rigs, err := newRigs(ctx, []*firewall{none})
	if err != nil {
		return nil, err
	}
	defer closeRigs(rigs)
	r := rigs[0]
	sec := &genSection{}
	fwdFlows := fiveTupleFlows(1000, false)
	if err := r.gen.setFlows(fwdFlows); err != nil {
		return nil, err
	}
	// Empty forwarding path.
	sec.EmptyPath = seriesPoint{Firewall: "no firewall, FORWARD"}
	for i := 0; i < o.reps; i++ {
		p, err := measure(r.topo, r.gen, r.topo.sinkPackets, o.timing, nil)
		if err != nil {
			return nil, err
		}
		sec.EmptyPath.Points = append(sec.EmptyPath.Points, p)
	}
	sec.EmptyPath.finish()
	// Empty INPUT path.
	h, err := startHelper(r.topo.FwNS, fwCPU, "udpsink", "-port", fmt.Sprint(inputPort), "-max", "10m")
	if err != nil {
		return nil, err
	}
	if err := r.gen.setFlows(fiveTupleFlows(1000, true)); err != nil {
		h.stop()
		return nil, err
	}
	sec.EmptyInput = seriesPoint{Firewall: "no firewall, INPUT"}
	for i := 0; i < o.reps; i++ {
		p, err := measure(r.topo, r.gen, udpDelivered(r.topo.FwNS), o.timing, []int{h.pid()})
		if err != nil {
			h.stop()
			return nil, err
		}
		sec.EmptyInput.Points = append(sec.EmptyInput.Points, p)
	}
	h.stop()
	sec.EmptyInput.finish()
	// Raw: count and drop at fw's ingress.
	prog, count, err := newSinkProgram()
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	defer count.Close()
	var l link.Link
	if err := nettest.InNamespace(r.topo.FwNS, func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: fwInIfindex, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		return nil, fmt.Errorf("attach counting XDP to fw's ingress: %w", err)
	}
	defer l.Close()
	sec.Raw = seriesPoint{Firewall: "generator → XDP drop at fw ingress"}
	for i := 0; i < o.reps; i++ {
		p, err := measure(r.topo, r.gen, func() (uint64, error) { return sumPerCPU(count) }, o.timing, nil)
		if err != nil {
			return nil, err
		}
		sec.Raw.Points = append(sec.Raw.Points, p)
	}
	sec.Raw.finish()
	progress("generator: offers %s pps (%.0f ns CPU/frame); delivers %s pps to an XDP drop at fw; empty FORWARD path %s pps, empty INPUT path %s pps",
		humanRate(sec.Raw.GenPPS.Median), sec.Raw.Points[0].GenNsPerFrame, humanRate(sec.Raw.PPS.Median),
		humanRate(sec.EmptyPath.PPS.Median), humanRate(sec.EmptyInput.PPS.Median))
	return sec, nil
}

// waitIdle waits (up to limit) until the CPUs are mostly idle, so other
// work on the machine does not disturb the measurements; it goes on after
// limit with a warning (the report's other_busy columns show the load).
func waitIdle(limit time.Duration) {
	const (
		idleBusy = 0.15 // at most this fraction of the machine busy
		sample   = 2 * time.Second
	)
	deadline := time.Now().Add(limit)
	for {
		b0, t0, err0 := machineBusy()
		time.Sleep(sample)
		b1, t1, err1 := machineBusy()
		if err0 != nil || err1 != nil || t1 <= t0 {
			return
		}
		busy := (b1 - b0) / (t1 - t0)
		if busy <= idleBusy {
			return
		}
		if time.Now().After(deadline) {
			progress("warning: the machine is %.0f%% busy with other work; measuring anyway", 100*busy)
			return
		}
		progress("the machine is %.0f%% busy with other work; waiting for it to calm down", 100*busy)
	}
}

// machineBusy sums busy and total time over every CPU.
func machineBusy() (busy, total float64, err error) {
	for _, cpu := range []int{genCPU, fwCPU} {
		b, t, err := cpuTimes(cpu)
		if err != nil {
			return 0, 0, err
		}
		busy += b
		total += t
	}
	return busy, total, nil
}

// headline renders the headline ratios (xfw vs iptables-nft).
func headline(rep *report) string {
	var b strings.Builder
	b.WriteString("\nHeadline (median of repetitions):\n")
	if s := rep.Forward; s != nil {
		for _, x := range quickSizes {
			a, r := s.get(fwXFW, x), s.get(refFirewall, x)
			if a == nil || r == nil || a.Error != "" || r.Error != "" || r.PPS.Median == 0 {
				continue
			}
			fmt.Fprintf(&b, "  FORWARD %5s rules: xfw %10s pps, iptables-nft %10s pps: %5.1fx  (fw CPU/pkt %5.2fx)\n",
				humanCount(x), humanRate(a.PPS.Median), humanRate(r.PPS.Median), a.PPS.Median/r.PPS.Median,
				safeRatio(r.NsPerPkt.Median, a.NsPerPkt.Median))
		}
	}
	if s := rep.Input; s != nil {
		for _, x := range quickSizes {
			a, r := s.get(fwXFW, x), s.get(refFirewall, x)
			if a == nil || r == nil || a.Error != "" || r.Error != "" || r.PPS.Median == 0 {
				continue
			}
			fmt.Fprintf(&b, "  INPUT   %5s rules: xfw %10s pps, iptables-nft %10s pps: %5.1fx\n",
				humanCount(x), humanRate(a.PPS.Median), humanRate(r.PPS.Median), a.PPS.Median/r.PPS.Median)
		}
	}
	if u := rep.Update; u != nil {
		for _, part := range []struct {
			what string
			ps   []latencyPoint
		}{{"append 1 rule to 10K rules", u.Append}, {"restore 10K rules        ", u.Restore}} {
			a, r := getLatency(part.ps, fwXFW, 10000), getLatency(part.ps, refFirewall, 10000)
			if a == nil || r == nil || a.Seconds.N == 0 || r.Seconds.N == 0 {
				continue
			}
			fmt.Fprintf(&b, "  %s: xfw %9s, iptables-nft %9s: xfw takes %.1fx the time\n", part.what,
				humanDuration(a.Seconds.Median), humanDuration(r.Seconds.Median), safeRatio(a.Seconds.Median, r.Seconds.Median))
			if s := getLatency(part.ps, fwXFWAgent, 10000); s != nil && s.Seconds.N > 0 {
				fmt.Fprintf(&b, "  %s: xfw's agent %9s: %.1fx iptables-nft's time\n", part.what,
					humanDuration(s.Seconds.Median), safeRatio(s.Seconds.Median, r.Seconds.Median))
			}
		}
	}
	return b.String()
}

// safeRatio returns a/b, or 0 when b is 0.
func safeRatio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// commandLine returns how this run was started, for the report.
func commandLine() string {
	args := append([]string{"xfwbench"}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// readPreviousReport returns the report in dir when this run measures only
// some sections (nil when it measures them all or there is none).
func readPreviousReport(dir string, sections map[string]bool) (*report, error) {
	all := true
	for _, s := range allSections {
		all = all && sections[s]
	}
	if all {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, jsonFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read previous report: %w", err)
	}
	var prev report
	if err := json.Unmarshal(b, &prev); err != nil {
		return nil, fmt.Errorf("decode previous report %s: %w", filepath.Join(dir, jsonFile), err)
	}
	return &prev, nil
}

// mergeReports returns prev with the sections this run selected replaced
// by rep's (a selected section rep has not measured yet stays prev's).
// The header (machine, command, start, repetitions) stays prev's; the
// conntrack section records its own command and start.
func mergeReports(prev, rep *report, sections map[string]bool) *report {
	out := *prev
	take := func(sec string, measured bool) bool { return sections[sec] && measured }
	if (take(secForward, true) || take(secInput, true)) && rep.Generator != nil {
		out.Generator = rep.Generator
	}
	if take(secForward, rep.Forward != nil) {
		out.Forward = rep.Forward
	}
	if take(secInput, rep.Input != nil) {
		out.Input = rep.Input
	}
	if take(secSets, rep.Sets != nil) {
		out.Sets = rep.Sets
	}
	if take(secDDoS, rep.DDoS != nil) {
		out.DDoS = rep.DDoS
	}
	if take(secProgRun, rep.ProgRun != nil) {
		out.ProgRun = rep.ProgRun
	}
	if take(secUpdate, rep.Update != nil) {
		out.Update = rep.Update
	}
	if take(secConntrack, rep.Conntrack != nil) {
		out.Conntrack = rep.Conntrack
	}
	if take(secRFPF, rep.RFPF != nil) {
		out.RFPF = rep.RFPF
	}
	if take(secSetLookup, rep.SetLookup != nil) {
		out.SetLookup = rep.SetLookup
	}
	if take(secXDPDrop, rep.XDPDrop != nil) {
		out.XDPDrop = rep.XDPDrop
	}
	if take(secClassBench, rep.ClassBench != nil) {
		out.ClassBench = rep.ClassBench
	}
	return &out
}
