package difftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// RunOptions tune how a Run sends its probes.
type RunOptions struct {
	// Batch is how many probes are sent before a pause (0: defaultBatch).
	Batch int
	// Pause is the pause between batches (0: defaultPause).
	Pause time.Duration
}

// Pacing: bursts longer than a veth ring (256 frames with XDP) or a CPU's
// backlog would lose frames; a lossy run is detected and retried slower.
const (
	defaultBatch = 24
	defaultPause = 3 * time.Millisecond
	// quietGap is how long nothing may happen before a run is over.
	quietGap = 300 * time.Millisecond
	// minSettle is the least time waited after the last probe.
	minSettle = 200 * time.Millisecond
	// maxSettle bounds the wait for stragglers.
	maxSettle = 10 * time.Second
	// settlePoll is how often the wait looks at the observers.
	settlePoll = 5 * time.Millisecond
	// maxLossRetries bounds the retries of a run that lost frames.
	maxLossRetries = 3
)

// DiffKind classifies a Difference.
type DiffKind string

const (
	// DiffRestore: one firewall accepted the ruleset, the other refused it.
	DiffRestore DiffKind = "restore"
	// DiffProbe: a probe was treated differently.
	DiffProbe DiffKind = "probe"
	// DiffCounters: a rule's or policy's counters differ after the run.
	DiffCounters DiffKind = "counters"
	// DiffSave: iptables-save prints the ruleset differently.
	DiffSave DiffKind = "save"
)

// Difference is one way the two firewalls disagreed.
type Difference struct {
	Kind DiffKind
	// Probe is the probe's index in the corpus (DiffProbe), else -1.
	Probe int
	// Kernel and XFW are what each side showed: observations of the probe,
	// counters, or messages.
	Kernel, XFW []string
	// Subject names the rule or policy (DiffCounters, DiffSave).
	Subject string
}

// String describes the difference.
func (d Difference) String() string {
	var b strings.Builder
	switch d.Kind {
	case DiffProbe:
		fmt.Fprintf(&b, "probe #%d treated differently", d.Probe)
	case DiffCounters:
		fmt.Fprintf(&b, "counters of %s", d.Subject)
	case DiffSave:
		fmt.Fprintf(&b, "saved rule %s", d.Subject)
	default:
		b.WriteString("ruleset loading")
	}
	for i, side := range [][]string{d.Kernel, d.XFW} {
		fmt.Fprintf(&b, "\n  %s:", sideNames[i])
		if len(side) == 0 {
			b.WriteString(" (nothing)")
		}
		for _, o := range side {
			fmt.Fprintf(&b, "\n    %s", o)
		}
	}
	return b.String()
}

// Result is what one Run found.
type Result struct {
	// Probes is how many probes were sent to each side.
	Probes int
	// Rejected is set when both firewalls refused the ruleset (nothing
	// else was compared).
	Rejected string
	// Differences lists every disagreement.
	Differences []Difference
	// Lossy says why the run is inconclusive (frames lost in queues on a
	// busy machine), or is empty.
	Lossy string
	// Saves are both sides' iptables-save -c output after the run.
	Saves [2]string
	// Observed counts the observations attributed to probes, per side.
	Observed [2]int
}

// Run loads ruleset into both firewalls, sends the corpus through both
// topologies and compares. A run that lost frames is retried slower a few
// times; the error is for failures of the machinery, not differences.
func (s *Session) Run(ctx context.Context, ruleset string, c *Corpus, opts RunOptions) (*Result, error) {
	if opts.Batch <= 0 {
		opts.Batch = defaultBatch
	}
	if opts.Pause <= 0 {
		opts.Pause = defaultPause
	}
	var res *Result
	var err error
	for try := 0; try <= maxLossRetries; try++ {
		res, err = s.runOnce(ctx, ruleset, c, opts)
		if err != nil || res.Lossy == "" {
			return res, err
		}
		s.cfg.Logf("run lost frames (%s); again, slower", res.Lossy)
		opts.Batch = max(opts.Batch/2, 1)
		opts.Pause *= 2
	}
	return res, nil
}

// runOnce is one attempt of Run.
func (s *Session) runOnce(ctx context.Context, ruleset string, c *Corpus, opts RunOptions) (*Result, error) {
	res := &Result{Probes: len(c.Probes)}
	if loaded, err := s.loadBoth(ruleset, res); err != nil {
		return nil, err
	} else if !loaded {
		return res, nil
	}
	probes, byMarker := s.markProbes(c)
	baseline, err := s.readLossBaseline()
	if err != nil {
		return nil, err
	}
	if err := s.sendProbes(ctx, c, probes, opts, newUDPStreamGuard(ruleset)); err != nil {
		return nil, err
	}
	if res.Lossy, err = s.lossSince(baseline); err != nil {
		return nil, err
	}

	// Counters.
	var saveErr [2]error
	parallel(func(i int) { res.Saves[i], saveErr[i] = s.save(s.sides[i]) })
	if err := errors.Join(saveErr[:]...); err != nil {
		return nil, err
	}
	if res.Lossy != "" {
		return res, nil
	}

	s.compareObservations(c, byMarker, res)
	return res, nil
}

// loadBoth loads ruleset into both sides and readies them for a run:
// xfw's LOG reader started, IPv6's announcements let pass and counted out,
// the connection tables flushed (Config.Conntrack). It reports false, with
// res saying why, when either side refused the ruleset: the run ends there.
func (s *Session) loadBoth(ruleset string, res *Result) (bool, error) {
	var reports fwReports
	if s.cfg.Family == ir.IPv6 {
		var err error
		if reports, err = readFwReports(s.sides[sideXFW].topo); err != nil {
			return false, err
		}
	}
	wasNAT := s.nat
	s.nat = HasNATTable(ruleset)
	s.randomPorts = natRandomPorts(ruleset)
	if wasNAT && !s.nat {
		// iptables-restore replaces only the tables its text has.
		var clearErr [2]error
		parallel(func(i int) { clearErr[i] = s.clearNAT(s.sides[i]) })
		if err := errors.Join(clearErr[:]...); err != nil {
			return false, err
		}
	}
	if strings.Contains(ruleset, "-m hashlimit") {
		// hashlimit's tables outlive a restore that names them again
		// (entries and all, on both sides): an empty filter table drops
		// them, so that every run, a retry or a reduction too, starts
		// with full buckets on both sides (rulegen_rate.go).
		var resetErr [2]error
		parallel(func(i int) { resetErr[i] = s.restoreText(s.sides[i], "*filter\nCOMMIT\n") })
		if err := errors.Join(resetErr[:]...); err != nil {
			return false, fmt.Errorf("drop the hashlimit tables: %w", err)
		}
	}
	var loadErr [2]error
	parallel(func(i int) { loadErr[i] = s.restore(s.sides[i], ruleset) })
	switch {
	case loadErr[0] != nil && loadErr[1] != nil:
		res.Rejected = fmt.Sprintf("kernel: %v\nxfw: %v", loadErr[0], loadErr[1])
		return false, nil
	case loadErr[0] != nil || loadErr[1] != nil:
		d := Difference{Kind: DiffRestore, Probe: -1, Kernel: []string{"loaded"}, XFW: []string{"loaded"}}
		if loadErr[0] != nil {
			d.Kernel = []string{loadErr[0].Error()}
		}
		if loadErr[1] != nil {
			d.XFW = []string{loadErr[1].Error()}
		}
		res.Differences = append(res.Differences, d)
		return false, nil
	}
	if err := s.startLog(s.sides[sideXFW]); err != nil {
		return false, err
	}
	if s.cfg.Family == ir.IPv6 {
		// Attaching XDP through netlink announces a device change, and
		// fw re-sends its multicast listener reports through OUTPUT: a
		// known, documented side effect of loading xfw (docs/differences.md).
		// Let them pass, then count from zero on both sides.
		if err := waitAnnouncements(s.sides[sideXFW].topo, reports); err != nil {
			return false, err
		}
		var zeroErr [2]error
		parallel(func(i int) { zeroErr[i] = s.zero(s.sides[i]) })
		if err := errors.Join(zeroErr[:]...); err != nil {
			return false, err
		}
	}

	if s.cfg.Conntrack || s.nat {
		// Every run starts with empty connection tables: what an
		// earlier run (or the announcements above) left would make
		// its probes' fate depend on the order of the runs (and, with
		// NAT, which translation a connection keeps).
		var flushErr [2]error
		parallel(func(i int) { flushErr[i] = s.flushConntrack(s.sides[i]) })
		if err := errors.Join(flushErr[:]...); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sendProbes sends the marked probes of c through both sides; udp keeps
// the steps away from the UDP conversations' stream delay.
func (s *Session) sendProbes(ctx context.Context, c *Corpus, probes []markedProbe, opts RunOptions, udp *udpStreamGuard) error {
	v6 := s.cfg.Family == ir.IPv6
	// Send, both sides at once, in paced batches, step by step (Probe.Step:
	// the packets of conversations, each step once the one before has
	// settled); within a step first what gen and sink send, then, once
	// that has settled, what fw sends. (The kernel's REJECT in OUTPUT runs
	// in the sender's context and holds the ICMP socket; an ICMP error due
	// at that moment in a softirq on the same CPU is then not sent at all.
	// Kept apart, both sides send them all.)
	for _, step := range steps(c) {
		for phase := 0; phase < 2; phase++ {
			var batch []Probe
			for k := range probes {
				if c.Probes[k].Step == step && (c.Probes[k].From == FromFw) == (phase == 1) {
					batch = append(batch, c.Probes[k])
				}
			}
			udp.wait(batch)
			start := time.Now()
			var sendErr [2]error
			sent := 0
			parallel(func(i int) {
				sd := s.sides[i]
				n := 0
				for k := range probes {
					if c.Probes[k].Step != step || (c.Probes[k].From == FromFw) != (phase == 1) {
						continue
					}
					if ctx.Err() != nil {
						sendErr[i] = ctx.Err()
						return
					}
					frames := probes[k].frames
					if c.Probes[k].Answer {
						frames = s.answerFrames(sd, c, probes, k)
					}
					for _, f := range frames {
						// OUTPUT: the kernel's EPERM for an OUTPUT drop is
						// not compared (docs/differences.md), nor any other
						// send error: packets on the wire are.
						_ = sd.send(c.Probes[k].From, f, v6)
					}
					if n++; n%opts.Batch == 0 {
						time.Sleep(opts.Pause)
					}
				}
				if i == 0 {
					sent = n
				}
			})
			if err := errors.Join(sendErr[:]...); err != nil {
				return err
			}
			udp.sent(batch, start, time.Now())
			if sent > 0 || step == 0 {
				s.settle()
			}
		}
	}
	return nil
}

// compareObservations attributes both sides' observations to the probes
// of c (by marker and addresses) and adds to res every probe and counter
// the sides disagree on.
func (s *Session) compareObservations(c *Corpus, byMarker map[uint32]int, res *Result) {
	// Attribute and compare.
	var obs [2][][]string
	for i, sd := range s.sides {
		events, _ := sd.log.snapshot()
		if s.cfg.Debug != nil {
			for _, e := range events {
				s.cfg.Debug("%s saw %s (candidates %+v)", sd.name, e.describe(relAnswer), e.cands)
			}
		}
		obs[i] = make([][]string, len(c.Probes))
		for _, e := range events {
			if pi, rel, ok := s.attribute(e, c, byMarker); ok {
				e = maskRandomPorts(e, rel, c.Probes[pi], s.randomPorts)
				obs[i][pi] = append(obs[i][pi], e.describe(rel))
				res.Observed[i]++
			}
		}
	}
	for pi := range c.Probes {
		k, x := obs[0][pi], obs[1][pi]
		sort.Strings(k)
		sort.Strings(x)
		if !equalStrings(k, x) {
			res.Differences = append(res.Differences, Difference{Kind: DiffProbe, Probe: pi, Kernel: k, XFW: x})
		}
	}
	res.Differences = append(res.Differences, compareSaves(res.Saves[0], res.Saves[1])...)
}

// steps returns the steps of a corpus's probes in order, 0 always first.
func steps(c *Corpus) []int {
	seen := map[int]bool{0: true}
	out := []int{0}
	for _, p := range c.Probes {
		if !seen[p.Step] {
			seen[p.Step] = true
			out = append(out, p.Step)
		}
	}
	sort.Ints(out)
	return out
}

// settle waits until both sides have been quiet for quietGap (at least
// minSettle, at most maxSettle).
func (s *Session) settle() {
	sent := time.Now()
	for {
		time.Sleep(settlePoll)
		last := sent
		for _, sd := range s.sides {
			if t := sd.log.lastAt(); t.After(last) {
				last = t
			}
		}
		now := time.Now()
		if now.Sub(sent) >= minSettle && now.Sub(last) >= quietGap || now.Sub(sent) > maxSettle {
			return
		}
	}
}

// parallel runs fn(0) and fn(1) at once.
func parallel(fn func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}

// equalStrings reports whether a and b are equal.
func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// saveLine is one counted line of iptables-save -c output.
type saveLine struct {
	// subject is ":CHAIN" for a policy, else the rule without counters.
	subject string
	counter string
}

var (
	saveRuleRe   = regexp.MustCompile(`^\[(\d+:\d+)\] (-A .*)$`)
	savePolicyRe = regexp.MustCompile(`^:(\S+) (\S+) \[(\d+:\d+)\]$`)
)

// fullRangeRe matches what xfw's iptables-save prints and iptables 1.8.9's
// leaves out although the kernel's rule has it (the rule still never
// matches there): an inverted full port range of the tcp, udp, sctp or
// dccp match (a deliberate deviation, internal/iptables writePorts), an
// inverted full 32-bit range of -m rt, -m frag, -m ah and -m esp (the same
// deviation: writeRT, writeFrag, writeAH6, writeSPIs) and an inverted
// interface wildcard "! -i +" / "! -o +". Not a difference in filtering
// (docs/differences.md).
var fullRangeRe = regexp.MustCompile(` ! --(sport|dport) 0:65535| ! --(rt-segsleft|fragid|ahspi|espspi) 0:4294967295| ! -[io] \+`)

// icmpAnyRe matches type 255 with a code, which means any type to the
// kernel: xfw's iptables-save prints it as later iptables releases do,
// 1.8.9 prints "any" (internal/iptables writeICMP: a deliberate deviation).
var icmpAnyRe = regexp.MustCompile(`--icmp-type 255/\d+`)

// asSaved189 rewrites a rule as xfw prints it into what iptables 1.8.9
// prints for the same kernel rule, where xfw deliberately deviates.
func asSaved189(rule string) string {
	return icmpAnyRe.ReplaceAllString(fullRangeRe.ReplaceAllString(rule, ""), "--icmp-type any")
}

// parseSave returns the counted lines of iptables-save -c output, in order.
func parseSave(text string) []saveLine {
	var out []saveLine
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := saveRuleRe.FindStringSubmatch(line); m != nil {
			out = append(out, saveLine{subject: m[2], counter: m[1]})
		} else if m := savePolicyRe.FindStringSubmatch(line); m != nil && m[2] != "-" {
			out = append(out, saveLine{subject: fmt.Sprintf(":%s %s", m[1], m[2]), counter: m[3]})
		}
	}
	return out
}

// compareSaves compares two iptables-save -c outputs line by line: the
// rules' text, then every counter.
func compareSaves(kernel, xfw string) []Difference {
	k, x := parseSave(kernel), parseSave(xfw)
	var out []Difference
	if len(k) != len(x) {
		return []Difference{{Kind: DiffSave, Probe: -1, Subject: "count",
			Kernel: []string{fmt.Sprintf("%d rules and policies", len(k))}, XFW: []string{fmt.Sprintf("%d rules and policies", len(x))}}}
	}
	for i := range k {
		if k[i].subject != x[i].subject && k[i].subject != asSaved189(x[i].subject) {
			out = append(out, Difference{Kind: DiffSave, Probe: -1, Subject: fmt.Sprintf("#%d", i+1),
				Kernel: []string{k[i].subject}, XFW: []string{x[i].subject}})
			continue
		}
		if k[i].counter != x[i].counter {
			out = append(out, Difference{Kind: DiffCounters, Probe: -1, Subject: k[i].subject,
				Kernel: []string{"[" + k[i].counter + "]"}, XFW: []string{"[" + x[i].counter + "]"}})
		}
	}
	return out
}
