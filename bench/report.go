package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Output files under -out.
const (
	jsonFile     = "bench.json"
	markdownFile = "bench.md"
)

// Plot files drawn by bench/plot.py from bench.json.
const (
	plotForward = "forward.png"
	plotInput   = "input.png"
	plotSets    = "sets.png"
	plotDDoS    = "ddos.png"
	plotProgRun = "progrun.png"
	plotUpdate  = "update.png"
	// plotClassBench: the classbench section's rates and costs.
	plotClassBench = "classbench.png"
	// Connection tracking section.
	plotCtConns    = "ct-conns.png"
	plotCtDDoS     = "ct-ddos.png"
	plotCtSynFlood = "ct-synflood.png"
)

// writeReport writes bench.json and bench.md.
func writeReport(dir string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, jsonFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	md := renderMarkdown(rep, "")
	if err := os.WriteFile(filepath.Join(dir, markdownFile), []byte(md), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// renderMarkdown renders the full report; imgDir prefixes the plots' paths.
func renderMarkdown(rep *report, imgDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# xfw benchmarks\n\nProduced by `%s` on %s in %.0f s. ", rep.Command, rep.Started.Format("2006-01-02 15:04 MST"), rep.Seconds)
	fmt.Fprintf(&b, "Every point is the median of %d repetitions (min–max in parentheses); the firewalls alternate within each repetition. ", rep.Reps)
	fmt.Fprintf(&b, "A repetition sends traffic for %d ms before a %d ms measurement window.\n\n", rep.WarmMs, rep.WindowMs)
	writeMachine(&b, rep.Machine)
	b.WriteString(methodText)
	if g := rep.Generator; g != nil {
		writeGenerator(&b, g)
	}
	for _, s := range []struct {
		sec  *throughputSection
		plot string
		unit string
	}{
		{rep.Forward, plotForward, "pps"},
		{rep.Input, plotInput, "pps"},
		{rep.Sets, plotSets, "pps"},
		{rep.DDoS, plotDDoS, "req/s"},
	} {
		if s.sec != nil {
			writeThroughput(&b, s.sec, s.unit, imgDir+s.plot)
			writeSetUpdates(&b, s.sec)
		}
	}
	if p := rep.ProgRun; p != nil {
		writeProgRun(&b, p, imgDir+plotProgRun)
	}
	if u := rep.Update; u != nil {
		writeUpdate(&b, u, imgDir+plotUpdate)
	}
	if c := rep.Conntrack; c != nil {
		writeConntrack(&b, c, imgDir, "##", "###")
	}
	if r := rep.RFPF; r != nil {
		writeRFPF(&b, r)
	}
	if s := rep.SetLookup; s != nil {
		writeSetLookup(&b, s)
	}
	if s := rep.XDPDrop; s != nil {
		writeXDPDrop(&b, s)
	}
	if s := rep.ClassBench; s != nil {
		writeClassBench(&b, s, imgDir+plotClassBench)
	}
	return b.String()
}

// methodText explains how the throughput numbers are obtained.
const methodText = `## Method

- Topology per firewall: three fresh namespaces gen — fw — sink joined by
  veth pairs. fw's ingress veth has GRO on (a NAPI instance, as XDP would
  give it) in threaded mode, pinned to CPU 1: fw's whole receive, filter and
  forward path runs there. The generator runs on CPU 0.
- Generator: an XDP program run with BPF_PROG_TEST_RUN in live-frames mode
  (BPF_F_TEST_XDP_LIVE_FRAMES, as xdp-trafficgen) writes the next flow of a
  table into each 64-byte UDP frame and returns XDP_TX: the kernel sends it
  out of gen's veth to fw. Two threads share CPU 0 (each call ends with an
  RCU grace period of about 20 ms without CPU use).
- Sink: an XDP program on sink's veth counts and drops. INPUT traffic goes to
  a UDP socket in fw (recvmmsg, pinned to CPU 1) and is counted as fw's
  Udp InDatagrams.
- Traffic cycles round-robin over one flow per rule, so it spreads uniformly
  over all rules and none falls to the policy.
- "fw CPU ns/pkt" is the CPU time of fw's NAPI thread (plus the local UDP
  receiver for INPUT) per delivered packet: it does not depend on how much
  of CPU 1 other processes took, unlike pps. "other busy" is the share of
  CPU 1 used by anything else during the window (other work on the
  machine): high values mark disturbed points.
- Ratios are to iptables-nft (Debian 12's default iptables).

`

func writeMachine(b *strings.Builder, m machineInfo) {
	b.WriteString("## Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(b, "| CPU | %s (%d cores%s) |\n", m.CPU, m.Cores, ifNotEmpty(", ", m.Virtual))
	fmt.Fprintf(b, "| Kernel | %s |\n| Memory | %s |\n| Load average at start | %s |\n", m.Kernel, m.Memory, m.LoadAvg)
	for _, k := range []string{"xfw", "xfw commit", "iptables-legacy", "iptables-nft", "nft", "ipset", "go"} {
		if v, ok := m.Versions[k]; ok {
			fmt.Fprintf(b, "| %s | %s |\n", k, v)
		}
	}
	b.WriteString("\n")
}

func ifNotEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func writeGenerator(b *strings.Builder, g *genSection) {
	b.WriteString("## Traffic generator\n\n")
	b.WriteString("| path | offered (pps) | delivered (pps) | generator CPU ns/frame | fw CPU ns/pkt |\n|---|---|---|---|---|\n")
	for _, p := range []seriesPoint{g.Raw, g.EmptyPath, g.EmptyInput} {
		ns := 0.0
		if len(p.Points) > 0 {
			for _, q := range p.Points {
				ns += q.GenNsPerFrame
			}
			ns /= float64(len(p.Points))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.0f |\n", p.Firewall, humanRate(p.GenPPS.Median), cellRate(&p), ns, p.NsPerPkt.Median)
	}
	b.WriteString("\nThe generator is not the bottleneck when a firewall's delivered rate is well below " +
		"what it delivers to an XDP drop at fw's ingress; the fw CPU ns/pkt columns hold in any case.\n\n")
}

// writeSetUpdates renders the single add/del latencies of a section's
// points that have them (the sets section), per x and firewall.
func writeSetUpdates(b *strings.Builder, s *throughputSection) {
	var fws []string
	for _, f := range s.Firewalls {
		for _, x := range s.Xs {
			if p := s.get(f, x); p != nil && p.SetUpdateSeconds != nil && p.SetUpdateSeconds.N > 0 {
				fws = append(fws, f)
				break
			}
		}
	}
	if len(fws) == 0 {
		return
	}
	fmt.Fprintf(b, "single add or delete of one set member, wall time of the command (median (min–max))\n\n| %s |", s.XLabel)
	writeFirewallColumns(b, fws)
	for _, x := range s.Xs {
		fmt.Fprintf(b, "| %s |", xLabel(s, x))
		for _, f := range fws {
			p := s.get(f, x)
			if p == nil || p.SetUpdateSeconds == nil || p.SetUpdateSeconds.N == 0 {
				b.WriteString(" – |")
				continue
			}
			u := p.SetUpdateSeconds
			fmt.Fprintf(b, " %s (%s–%s) |", humanDuration(u.Median), humanDuration(u.Min), humanDuration(u.Max))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// cellRate renders a rate point: median (min–max).
func cellRate(p *seriesPoint) string {
	if p == nil {
		return "–"
	}
	if p.Error != "" {
		return "n/a"
	}
	if p.PPS.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", humanRate(p.PPS.Median), humanRate(p.PPS.Min), humanRate(p.PPS.Max))
}

func writeThroughput(b *strings.Builder, s *throughputSection, unit, plot string) {
	fmt.Fprintf(b, "## %s\n\n", s.Title)
	for _, n := range s.Notes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
	fmt.Fprintf(b, "![%s](%s)\n\n", s.Title, plot)
	fmt.Fprintf(b, "%s (%s; ×: ratio to %s)\n\n| %s |", unit, "median (min–max)", refFirewall, s.XLabel)
	writeFirewallColumns(b, s.Firewalls)
	for _, x := range s.Xs {
		fmt.Fprintf(b, "| %s |", xLabel(s, x))
		ref := s.get(refFirewall, x)
		for _, f := range s.Firewalls {
			p := s.get(f, x)
			cell := cellRate(p)
			if p != nil && p.Error == "" && ref != nil && ref.Error == "" && ref.PPS.Median > 0 && f != refFirewall {
				cell += fmt.Sprintf(" ×%.2f", p.PPS.Median/ref.PPS.Median)
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	offered := strings.Contains(s.XLabel, "pps")
	if offered {
		b.WriteString("\nattack frames/s accepted by gen's veth (median; fewer than asked when fw's receive ring is full, as a NIC drops at its ring)\n\n| " + s.XLabel + " |")
	} else {
		cost := "fw CPU ns per delivered packet"
		if s.CostLabel != "" {
			cost = s.CostLabel
		}
		b.WriteString("\n" + cost + " (median) / other busy on CPU 1 (median)\n\n| " + s.XLabel + " |")
	}
	writeFirewallColumns(b, s.Firewalls)
	for _, x := range s.Xs {
		fmt.Fprintf(b, "| %s |", xLabel(s, x))
		for _, f := range s.Firewalls {
			p := s.get(f, x)
			switch {
			case p == nil || p.PPS.N == 0:
				b.WriteString(" – |")
			case offered:
				fmt.Fprintf(b, " %s |", humanRate(p.GenPPS.Median))
			default:
				fmt.Fprintf(b, " %.0f / %.0f%% |", p.NsPerPkt.Median, 100*p.OtherBusy.Median)
			}
		}
		b.WriteString("\n")
	}
	var errs []string
	for _, p := range s.Series {
		if p.Error != "" {
			errs = append(errs, fmt.Sprintf("- %s at %s: %s", p.Firewall, xLabel(s, p.X), p.Error))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nNot measured:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n")
}

// xLabel renders an x value of a section.
func xLabel(s *throughputSection, x int) string {
	if strings.Contains(s.XLabel, "pps") {
		return humanRate(float64(x))
	}
	return humanCount(x)
}

func writeUpdate(b *strings.Builder, u *updateSection, plot string) {
	b.WriteString("## Rule update latency\n\n")
	for _, n := range u.Notes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
	fmt.Fprintf(b, "![update latency](%s)\n\n", plot)
	fws := latencyFirewalls(u.Append)
	for _, part := range []struct {
		title string
		ps    []latencyPoint
	}{{"Append rule n+1 to a chain of n rules", u.Append}, {"Restore a whole ruleset of n rules", u.Restore},
		{"Insert a rule at the head of the chain (`-I FORWARD`)", u.Insert}, {"Delete that rule again (`-D FORWARD rule`)", u.Delete}} {
		if len(part.ps) == 0 {
			continue
		}
		fmt.Fprintf(b, "%s (median (min–max))\n\n| n |", part.title)
		writeFirewallColumns(b, fws)
		for _, n := range latencySizes(part.ps) {
			fmt.Fprintf(b, "| %s |", humanCount(n))
			for _, f := range fws {
				fmt.Fprintf(b, " %s |", describeLatency(getLatency(part.ps, f, n)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// latencyFirewalls returns the firewalls of ps in first-seen order.
func latencyFirewalls(ps []latencyPoint) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p.Firewall] {
			seen[p.Firewall] = true
			out = append(out, p.Firewall)
		}
	}
	return out
}

// latencySizes returns the sizes of ps in first-seen order.
func latencySizes(ps []latencyPoint) []int {
	var out []int
	seen := map[int]bool{}
	for _, p := range ps {
		if !seen[p.N] {
			seen[p.N] = true
			out = append(out, p.N)
		}
	}
	return out
}

// runDocs rewrites the generated part of docs/benchmarks.md (everything
// below docsMarker) from a report; the hand-written introduction above the
// marker and the hand-written "Large address sets" section are kept.
func runDocs(args []string) error {
	fs := flag.NewFlagSet("docs", flag.ContinueOnError)
	in := fs.String("in", "results/bench.json", "report")
	out := fs.String("out", "docs/benchmarks.md", "page to update below its marker line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := readReport(*in)
	if err != nil {
		return err
	}
	results, err := resultsLink(*in, *out)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(*out)
	if err != nil {
		return fmt.Errorf("read %s: %w", *out, err)
	}
	text := string(old)
	i := strings.Index(text, docsMarker)
	if i < 0 {
		return fmt.Errorf("%s has no line %q: put it below the page's hand-written introduction", *out, docsMarker)
	}
	intro, generated := text[:i+len(docsMarker)], text[i+len(docsMarker):]
	section := docsSection(rep, results)
	// The LPM section comes from make bench-lpm (results/lpm.md), not from
	// this report: keep it where it was.
	if lpm := handWrittenLPM(generated); lpm != "" {
		if j := strings.Index(section, notAheadHeading); j >= 0 {
			section = section[:j] + lpm + section[j:]
		} else {
			section += lpm
		}
	}
	if err := os.WriteFile(*out, []byte(intro+"\n\n"+section), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	return nil
}

// readReport decodes a bench.json report.
func readReport(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return &rep, nil
}

// resultsLink returns the path from the page's directory to the report's
// (where bench.md and the plots are), ending in a slash: "../results/"
// for docs/benchmarks.md and results/bench.json.
func resultsLink(report, page string) (string, error) {
	from, err := filepath.Abs(filepath.Dir(page))
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", page, err)
	}
	to, err := filepath.Abs(filepath.Dir(report))
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", report, err)
	}
	rel, err := filepath.Rel(from, to)
	if err != nil {
		return "", fmt.Errorf("link %s from %s: %w", report, page, err)
	}
	return filepath.ToSlash(rel) + "/", nil
}

// handWrittenLPM returns the hand-written "Large address sets" section of
// the generated part of the page (up to the next generated heading), or "".
func handWrittenLPM(generated string) string {
	i := strings.Index(generated, lpmHeading)
	if i < 0 {
		return ""
	}
	lpm := generated[i:]
	if j := strings.Index(lpm, notAheadHeading); j >= 0 {
		return lpm[:j]
	}
	if j := strings.Index(lpm[len(lpmHeading):], "\n## "); j >= 0 {
		return lpm[:len(lpmHeading)+j+1]
	}
	return lpm
}

// docsSection renders the generated part of docs/benchmarks.md from a
// report; results is the link from the page to the report's directory.
func docsSection(rep *report, results string) string {
	var b strings.Builder
	b.WriteString("## Latest run\n\n")
	fmt.Fprintf(&b, "`make bench` runs the whole suite (as root, about %.0f minutes here; it installs what it needs, "+
		"creates its own namespaces and removes them) and writes [results/bench.md](%sbench.md) (every table), "+
		"`results/bench.json` and the plots `results/*.png`; `make bench-quick` prints the headline ratios in under a minute. "+
		"Benchmarks are not tests: nothing asserts timings.\n\n", rep.Seconds/60, results)
	fmt.Fprintf(&b, "Latest run: `%s`, %s, on %s (%d cores%s), kernel %s, %s memory; xfw built from %s. Medians of %d repetitions, firewalls alternating within each.",
		rep.Command, rep.Started.Format("2006-01-02"), rep.Machine.CPU, rep.Machine.Cores, ifNotEmpty(", ", rep.Machine.Virtual),
		rep.Machine.Kernel, rep.Machine.Memory, rep.Machine.Versions["xfw commit"], rep.Reps)
	var other []float64
	for _, s := range []*throughputSection{rep.Forward, rep.Input, rep.Sets} {
		if s == nil {
			continue
		}
		for _, p := range s.Series {
			for _, q := range p.Points {
				other = append(other, q.OtherBusy)
			}
		}
	}
	if o := summarize(other); o.N > 0 {
		fmt.Fprintf(&b, " Other work on the machine took a median %.0f%% (up to %.0f%%) of the firewall's CPU during the measurement windows: pps values are disturbed where it was high, fw CPU ns/packet much less.", 100*o.Median, 100*o.Max)
	}
	b.WriteString("\n\n")
	b.WriteString("## Headline: xfw vs iptables-nft\n\n| | xfw | iptables-nft | ratio |\n|---|---|---|---|\n")
	for _, s := range []*throughputSection{rep.Forward, rep.Input} {
		if s == nil {
			continue
		}
		for _, x := range quickSizes {
			a, r := s.get(fwXFW, x), s.get(refFirewall, x)
			if a == nil || r == nil || a.PPS.N == 0 || r.PPS.N == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s, %s rules (pps) | %s | %s | ×%.1f |\n", strings.TrimPrefix(s.Title, "Scaling, "), humanCount(x),
				humanRate(a.PPS.Median), humanRate(r.PPS.Median), safeRatio(a.PPS.Median, r.PPS.Median))
		}
	}
	if s := rep.Forward; s != nil {
		for _, x := range quickSizes {
			a, r := s.get(fwXFW, x), s.get(refFirewall, x)
			if a == nil || r == nil || a.PPS.N == 0 || r.PPS.N == 0 {
				continue
			}
			fmt.Fprintf(&b, "| FORWARD, %s rules (fw CPU ns/packet) | %.0f | %.0f | ×%.1f less |\n", humanCount(x),
				a.NsPerPkt.Median, r.NsPerPkt.Median, safeRatio(r.NsPerPkt.Median, a.NsPerPkt.Median))
		}
	}
	if u := rep.Update; u != nil {
		for _, n := range []int{10000} {
			a, r := getLatency(u.Append, fwXFW, n), getLatency(u.Append, refFirewall, n)
			if a != nil && r != nil && a.Seconds.N > 0 && r.Seconds.N > 0 {
				fmt.Fprintf(&b, "| append one rule to a chain of %s rules (issue 3) | %s | %s | %s |\n", humanCount(n),
					humanDuration(a.Seconds.Median), humanDuration(r.Seconds.Median), latencyRatio(a.Seconds.Median, r.Seconds.Median))
			}
			if a, r := getLatency(u.Append, fwXFWAgent, n), getLatency(u.Append, refFirewall, n); a != nil && r != nil && a.Seconds.N > 0 && r.Seconds.N > 0 {
				fmt.Fprintf(&b, "| the same, served by xfw's agent (xfw as installed) | %s | %s | %s |\n",
					humanDuration(a.Seconds.Median), humanDuration(r.Seconds.Median), latencyRatio(a.Seconds.Median, r.Seconds.Median))
			}
			a, r = getLatency(u.Restore, fwXFW, n), getLatency(u.Restore, refFirewall, n)
			if a != nil && r != nil && a.Seconds.N > 0 && r.Seconds.N > 0 {
				fmt.Fprintf(&b, "| restore a ruleset of %s rules | %s | %s | %s |\n", humanCount(n),
					humanDuration(a.Seconds.Median), humanDuration(r.Seconds.Median), latencyRatio(a.Seconds.Median, r.Seconds.Median))
			}
		}
	}
	if p := rep.ProgRun; p != nil {
		for _, r := range p.Rows {
			if r.Rules == 2048 && len(r.Cases) == 3 {
				fmt.Fprintf(&b, "| xfw_xdp per packet at 2,048 rules (BPF_PROG_TEST_RUN, last rule hits) | %.0f ns | – | %s |\n",
					r.Cases[1].Ns.Median, p.Reference)
			}
		}
	}
	b.WriteString("\n(ratio: xfw's rate over iptables-nft's, or how much less CPU per packet it uses; for latencies, how much longer or shorter xfw takes.)\n\n")
	b.WriteString(methodText)
	if rep.Forward != nil {
		writeThroughput(&b, rep.Forward, "pps", results+plotForward)
	}
	if rep.Update != nil {
		writeUpdate(&b, rep.Update, results+plotUpdate)
	}
	if rep.Conntrack != nil {
		writeConntrack(&b, rep.Conntrack, results, "##", "###")
	}
	if rep.RFPF != nil {
		writeRFPF(&b, rep.RFPF)
	}
	if rep.SetLookup != nil {
		writeSetLookup(&b, rep.SetLookup)
	}
	if rep.XDPDrop != nil {
		writeXDPDrop(&b, rep.XDPDrop)
	}
	if rep.ClassBench != nil {
		writeClassBench(&b, rep.ClassBench, results+plotClassBench)
	}
	b.WriteString(behindText(rep))
	b.WriteString("INPUT, set-friendly rulesets, the DDoS scenario, the per-packet BPF_PROG_TEST_RUN cost and the traffic generator's capacity are in [results/bench.md](" + results + "bench.md).\n")
	return b.String()
}

// behindText lists the measured points where xfw is not ahead of
// iptables-nft and the causes known in xfw's implementation.
func behindText(rep *report) string {
	var pts []string
	secs := []*throughputSection{rep.Forward, rep.Input, rep.Sets, rep.DDoS}
	if c := rep.Conntrack; c != nil {
		secs = append(secs, c.ConnRate, c.DDoS)
	}
	for _, s := range secs {
		if s == nil {
			continue
		}
		for _, x := range s.Xs {
			a, r := s.get(fwXFW, x), s.get(refFirewall, x)
			if a == nil || r == nil || a.PPS.N == 0 || r.PPS.N == 0 {
				continue
			}
			if a.PPS.Median < r.PPS.Median {
				pts = append(pts, fmt.Sprintf("%s at %s: %s vs %s", s.Title, xLabel(s, x), humanRate(a.PPS.Median), humanRate(r.PPS.Median)))
			}
		}
	}
	if s := rep.Sets; s != nil {
		for _, x := range s.Xs {
			a := s.get(fwXFWSet, x)
			for _, other := range []string{fwIpset, fwNFTSet} {
				o := s.get(other, x)
				if a == nil || o == nil || a.PPS.N == 0 || o.PPS.N == 0 || a.PPS.Median >= o.PPS.Median {
					continue
				}
				pts = append(pts, fmt.Sprintf("%s at %s addresses: xfw-set %s vs %s %s",
					s.Title, humanCount(x), humanRate(a.PPS.Median), other, humanRate(o.PPS.Median)))
			}
			if a != nil && a.Error != "" {
				pts = append(pts, fmt.Sprintf("%s at %s addresses: xfw-set not measured (%s)", s.Title, humanCount(x), a.Error))
			}
		}
	}
	if s := rep.RFPF; s != nil {
		if a := s.get(rfpfXFW); a != nil && a.Processed.N > 0 {
			for _, o := range s.Results {
				if o.Firewall != rfpfXFW && o.Processed.N > 0 && o.Processed.Median > a.Processed.Median {
					pts = append(pts, fmt.Sprintf("RFPF configuration: xfw processes %s pps vs %s %s",
						humanRate(a.Processed.Median), o.Firewall, humanRate(o.Processed.Median)))
				}
			}
		}
	}
	if u := rep.Update; u != nil {
		for _, part := range []struct {
			what string
			ps   []latencyPoint
		}{{"append", u.Append}, {"restore", u.Restore}} {
			for _, n := range latencySizes(part.ps) {
				a, r := getLatency(part.ps, fwXFW, n), getLatency(part.ps, refFirewall, n)
				if a != nil && r != nil && a.Seconds.N > 0 && r.Seconds.N > 0 && a.Seconds.Median > r.Seconds.Median {
					pts = append(pts, fmt.Sprintf("%s at n = %s: %s vs %s", part.what, humanCount(n),
						humanDuration(a.Seconds.Median), humanDuration(r.Seconds.Median)))
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString(notAheadHeading + "\n\n")
	if len(pts) == 0 {
		b.WriteString("Nowhere in this run.\n\n")
	} else {
		b.WriteString("Points of this run where xfw is behind iptables-nft (or, for address sets, behind ipset or nft sets):\n\n")
		for _, p := range pts {
			fmt.Fprintf(&b, "- %s\n", p)
		}
		b.WriteString("\n")
	}
	b.WriteString(causesText(rep))
	return b.String()
}

// causesText names what in xfw's implementation explains where it is
// behind, with this run's numbers where it has them.
func causesText(rep *report) string {
	empty, large := "", ""
	if p := rep.ProgRun; p != nil {
		for _, r := range p.Rows {
			switch r.Rules {
			case 0:
				empty = fmt.Sprintf(" (Here the first load of the programs into a namespace, verifier included, took %.2f s in-process; the verifier processed %d instructions.)",
					r.ApplySeconds, r.VerifiedInsns)
			case 100000:
				large = fmt.Sprintf(" (at 100K rules here: parse %.2f s, compile %.2f s, apply %.2f s)", r.ParseSeconds, r.CompileSeconds, r.ApplySeconds)
			}
		}
	}
	return `Causes in xfw's implementation:

- **Most updates recompile the whole ruleset.** ` + "`xfw iptables -A`" + `, ` + "`-I`" + `
  (at the head) and ` + "`-D`" + ` on a base chain change the running generation in
  place (read back from its maps; slack positions take new rules, deleted
  ones leave every class); every other change reads
  the running ruleset back (its binary form, about 0.5 µs a rule to decode)
  and compiles all of it. Either way the new generation is written into the
  idle bank's maps (reused, so the kernel waits for no RCU grace period) and
  after the flip xfw waits only for the packets in flight (per-CPU
  begun/ended counts, as x_tables' sequence counts).` + empty + ` An
  in-place command still decodes the whole saved ruleset (about 0.3 µs a
  rule) while a second goroutine reads the running generation back (about
  5 MB at 10K rules: the chunks are copied map to map into the idle bank
  and extended there, the other arrays through one mapping each), and it
  writes the generation's other arrays whole; a fresh process pays for
  the pages it touches (fresh slices are mapped with one
  ` + "`madvise(MADV_POPULATE_WRITE)`" + `, about 1,250 page faults remain) and for
  finding the running programs and their thirty-odd maps (` + "`XFW_TRACE=1`" + `
  prints the phases). iptables-nft and nft send one rule to the kernel;
  iptables-legacy rewrites the whole table, about 20–30 ms at 10K rules
  here. Next steps: user chains in place, writing only the changed parts
  of the maps, and an append that does not decode the rules it keeps.
- **Large rulesets: whole-table rebuilds.** Parse, compile and map filling
  grow with the ruleset` + large + `; the class → chunk table holds classes ×
  chunks entries (about n²/4,096 for n distinct addresses); the maps are
  filled through mmap (BPF_F_MMAPABLE), so writing them is a memory copy.
  A command that compiles 100K rules peaks at 330–420 MB of RSS (the
  target is 150 MB): the live heap is the parsed rules (43 MB), the
  entries' conditions (about 50 MB) and the class table, and Go's
  collector lets the heap grow to about twice that ("100K filter rules:
  each command's time and peak memory").
- **Inner-map lookups are calls.** Generation maps are inner maps with
  BPF_F_INNER_MAP (each generation sizes its own), so the verifier cannot
  inline their lookups, the price of updates without the verifier. A
  match now reads 18–22 of them (50 to 100K rules, the steps / lookups
  columns), down from 40–58; inlining the rest (fixed-size inner maps,
  tried) saved about 6 ns of ~165 at 10K rules: what is left is the
  search's own instructions, not the calls.
- **No sets yet.** A blocklist is one rule per address: the source is
  classified by a search tree over 2n interval bounds (4 nodes of 32 keys
  read at 100K) where ipset and nft sets do one hash lookup, and the class → chunk
  table (one class per address × n/4,096 chunks) grows quadratically: at a
  million addresses it would hold about 245 million entries, so the bench
  stops xfw at 100K.
- **Per-packet cost grows in steps of 4,096 rules.** The search reads the
  chunks (4,096 rules each) where every field's class has entries, 32
  chunks' masks at a time (the steps column of the BPF_PROG_TEST_RUN
  table), so a match near the end of a 100K chain costs about 1.2–1.3×
  one near the start (it was about twice before the chunk masks).
- **veth fixed costs dominate small rulesets.** With few rules every
  firewall spends most of fw's CPU in the veth and forwarding path; xfw's
  XDP and TCX programs add a fixed cost there, so at 0–100 rules it can be
  level with or slightly behind iptables.

`
}

// writeFirewallColumns ends a table's header row with one column per
// firewall and writes the separator row under it.
func writeFirewallColumns(b *strings.Builder, fws []string) {
	for _, f := range fws {
		fmt.Fprintf(b, " %s |", f)
	}
	b.WriteString("\n|---|")
	for range fws {
		b.WriteString("---|")
	}
	b.WriteString("\n")
}

// latencyRatio says how much longer (or shorter) xfw takes than the
// reference.
func latencyRatio(xfw, ref float64) string {
	if xfw <= 0 || ref <= 0 {
		return "–"
	}
	if xfw >= ref {
		return fmt.Sprintf("xfw takes ×%.1f as long", xfw/ref)
	}
	return fmt.Sprintf("xfw takes ×%.2f the time", xfw/ref)
}

// Headings of the generated part of docs/benchmarks.md that runDocs looks
// for.
const (
	lpmHeading      = "## Large address sets (`make bench-lpm`"
	notAheadHeading = "## Where xfw is not ahead yet"
)

// docsMarker ends the hand-written introduction of docs/benchmarks.md:
// runDocs rewrites everything below it.
const docsMarker = "<!-- Generated below this line by `xfwbench docs` (bench/run.sh full) from results/bench.json: " +
	"edit bench/report.go, not the text below, except the hand-written \"Large address sets\" section, which it keeps. -->"

// runRender rewrites bench.md from bench.json (after editing the JSON, or
// to render an older report with the current layout).
func runRender(args []string) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	dir := fs.String("dir", "results", "directory holding bench.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := readReport(filepath.Join(*dir, jsonFile))
	if err != nil {
		return err
	}
	md := renderMarkdown(rep, "")
	if err := os.WriteFile(filepath.Join(*dir, markdownFile), []byte(md), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// writeConntrack renders the connection tracking section; h and sub are
// the heading levels of the section and of its parts.
func writeConntrack(b *strings.Builder, c *ctSection, imgDir, h, sub string) {
	fmt.Fprintf(b, "%s Connection tracking\n\n", h)
	fmt.Fprintf(b, "Produced by `%s` on %s in %.0f s (`bench/run.sh full -sections conntrack` as root after `make build`: it runs that, draws the plots and rewrites this section; the other sections keep their numbers); "+
		"medians of %d repetitions, min–max in parentheses. xfw tracks connections in its data plane (bpf/ct.h): an LRU table of %d unassured connections and a hash of assured ones; "+
		"iptables and nftables use the kernel's nf_conntrack.\n\n",
		c.Command, c.Started.Format("2006-01-02 15:04 MST"), c.Seconds, c.Reps, 65536)
	for _, part := range []struct {
		s    *throughputSection
		unit string
		plot string
	}{{c.ConnRate, "conn/s", plotCtConns}, {c.DDoS, "req/s", plotCtDDoS}} {
		if part.s == nil {
			continue
		}
		var pb strings.Builder
		writeThroughput(&pb, part.s, part.unit, imgDir+part.plot)
		b.WriteString(sub + strings.TrimPrefix(pb.String(), "##"))
	}
	if f := c.SynFlood; f != nil {
		writeSynFlood(b, f, imgDir+plotCtSynFlood, sub)
	}
}

// writeSynFlood renders the SYN flood table.
func writeSynFlood(b *strings.Builder, f *synFloodSection, plot, h string) {
	fmt.Fprintf(b, "%s SYN flood against an established stream\n\n", h)
	for _, n := range f.Notes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
	if f.KernelConntrackMax > 0 {
		fmt.Fprintf(b, "The kernel's table limit (nf_conntrack_max) was %d.\n\n", f.KernelConntrackMax)
	}
	fmt.Fprintf(b, "![SYN flood](%s)\n\n", plot)
	b.WriteString("| firewall, flood | stream Gbit/s, no flood | stream Gbit/s, under flood | stream Gbit/s after (resumed within 15 s) | stream survived (in the table, ESTABLISHED) | new conn/s, no flood | new conn/s, under flood | failed attempts/s under flood | SYNs/s accepted by gen's veth | frames/s lost at fw's receive ring under flood | fw path's share of CPU 1, no flood / flood | table entries after a flood |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range f.Results {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s, %s | n/a: %s |||||||||||\n", r.Firewall, floodRateLabel(r.Rate), r.Error)
			continue
		}
		surv := "yes"
		if !r.Survived {
			surv = "**no**"
			if r.StreamError != "" {
				surv += " (" + r.StreamError + ")"
			}
		}
		fmt.Fprintf(b, "| %s, %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %.0f%% / %.0f%% | %.0f |\n", r.Firewall, floodRateLabel(r.Rate),
			cellFloat(r.StreamBefore), cellFloat(r.StreamDuring), r.StreamAfter.Median, surv,
			cellStatsRate(r.ConnsBefore), cellStatsRate(r.ConnsDuring), humanRate(r.FailedDuring.Median),
			humanRate(r.FloodPPS.Median), humanRate(r.RingDropsDuring.Median),
			100*r.FwBusyBefore.Median, 100*r.FwBusyDuring.Median, r.TableEntries.Median)
	}
	b.WriteString("\nThe stream's connection in the firewall's table after the floods (`conntrack -L -p tcp --dport 5201`, xfw: `xfw conntrack -L …`):\n\n")
	for _, r := range f.Results {
		if r.Error == "" {
			entry := r.StreamEntry
			if entry == "" {
				entry = "(none)"
			}
			fmt.Fprintf(b, "- %s, after %s: `%s`\n", r.Firewall, floodRateLabel(r.Rate), entry)
		}
	}
	b.WriteString("\n")
}

// cellFloat renders stats with two decimals: median (min–max).
func cellFloat(s stats) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Median, s.Min, s.Max)
}

// cellStatsRate renders rate stats: median (min–max).
func cellStatsRate(s stats) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", humanRate(s.Median), humanRate(s.Min), humanRate(s.Max))
}
