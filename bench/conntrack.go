package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Connection tracking section (-sections conntrack):
//
//  1. New connections per second completed through a stateful INPUT
//     ruleset (bpf-iptables Fig. 9): the established rule first, filler
//     rules that never match, then new connections to serverPort.
//  2. The DDoS scenario (ddos.go) with the established rule first, so the
//     legitimate connections' packets after the SYN take the established
//     path while the attack (matching no connection) is classified and
//     dropped.
//  3. A SYN flood from spoofed random sources to serverPort while a
//     long-lived TCP stream runs: the stream's throughput before and
//     during the flood, whether it survives, and new connections per
//     second during the flood.

// Experiments of the conntrack section (-ct-parts).
const (
	ctPartConnRate = "connrate"
	ctPartSynFlood = "synflood"
	ctPartDDoS     = "ddos"
)

var ctAllParts = []string{ctPartConnRate, ctPartSynFlood, ctPartDDoS}

// ctFillers are the filler rule counts of the connection-rate sweep.
var ctFillers = []int{0, 1000, 10000}

// synFloodRates are the SYN flood's rates (SYNs/s): a paced one, sent in
// batches of 50 a millisecond that fw's receive ring (256 frames) takes,
// and 0, the injector as fast as it goes (batches of up to 1024).
var synFloodRates = []int{50_000, 0}

// streamPort is the TCP port of the long-lived stream's sink in fw.
const streamPort = 5201

// Settings of the connection-rate client and the SYN flood.
const (
	// ctClientConns is how many connections the client keeps in flight
	// (goroutines on one CPU).
	ctClientConns = 16
	// ctWindow is how long the client measures at each point.
	ctWindow = 2 * time.Second
	// synFloodTuples is how many distinct spoofed SYNs the flood cycles
	// over: four times xfw's 65536-entry table of unassured connections,
	// so every cycle overflows it several times.
	synFloodTuples = 4 * 65536
	// synFloodMaxRate asks the AF_PACKET sender for more than it
	// reaches: it sends as fast as it can.
	synFloodMaxRate = 20_000_000
	// synFloodWarm is how long the flood runs before the window opens
	// (at a few hundred thousand SYNs/s, enough to fill the tables).
	synFloodWarm = time.Second
	// synFloodPause lets the path settle between flood windows.
	synFloodPause = time.Second
	// seedSynFlood seeds the spoofed sources.
	seedSynFlood = 5
	// streamRate paces the long-lived stream (bits/s): unpaced, it would
	// take all of CPU 0 from the connection client.
	streamRate = 1e9
	// synFloodClientRate is the connection client's rate in the SYN
	// flood experiment (connections/s started): a fixed offered load, so
	// that the flood takes the CPU the legitimate traffic leaves.
	synFloodClientRate = 2000
	// streamRecover bounds the wait for the stream to move again after
	// the last flood (TCP's retransmission backoff after heavy loss).
	streamRecover = 15 * time.Second
)

// ctSection is the result of the conntrack section. It records its own
// command and start, since a run of -sections conntrack merges it into an
// existing report.
type ctSection struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Reps    int       `json:"reps"`
	// ConnRate: x is the number of filler rules, pps is completed
	// connections per second, ns_per_pkt fw's CPU time per connection.
	ConnRate *throughputSection `json:"conn_rate,omitempty"`
	// DDoS is the DDoS scenario with the established rule first.
	DDoS     *throughputSection `json:"ddos,omitempty"`
	SynFlood *synFloodSection   `json:"syn_flood,omitempty"`
}

// synFloodSection is the SYN flood experiment.
type synFloodSection struct {
	Notes   []string         `json:"notes,omitempty"`
	Results []synFloodResult `json:"results"`
	// KernelConntrackMax is the host's nf_conntrack_max, the limit of the
	// kernel's table in every namespace.
	KernelConntrackMax int `json:"kernel_conntrack_max,omitempty"`
}

// synFloodResult is one firewall's SYN flood measurements over the
// repetitions.
type synFloodResult struct {
	Firewall string `json:"firewall"`
	// Rate is the flood rate asked (SYNs/s; 0: as fast as it goes).
	Rate int `json:"rate"`
	// Stream throughput (Gbit/s) without the flood, during it, and after
	// the last flood.
	StreamBefore stats `json:"stream_gbps_before"`
	StreamDuring stats `json:"stream_gbps_during"`
	StreamAfter  stats `json:"stream_gbps_after"`
	// Survived: the stream's connection never failed and is still in the
	// firewall's table, ESTABLISHED, after the floods (whether it moved
	// again within streamRecover is StreamAfter: TCP may still be backing
	// off its retransmissions).
	Survived    bool   `json:"survived"`
	StreamError string `json:"stream_error,omitempty"`
	// StreamEntry is the stream's connection as the firewall's table
	// lists it after the last flood (conntrack -L, xfw conntrack -L).
	StreamEntry string `json:"stream_entry,omitempty"`
	// New connections per second (completed request/response) without
	// and during the flood, and the client's failed attempts per second.
	ConnsBefore  stats `json:"conns_before"`
	ConnsDuring  stats `json:"conns_during"`
	FailedDuring stats `json:"failed_per_s_during"`
	// FloodPPS is the rate of SYNs gen's veth accepted.
	FloodPPS stats `json:"flood_pps"`
	// FwBusyBefore and FwBusyDuring are the share of CPU 1 used by fw's
	// receive path (NAPI thread) and servers in the windows.
	FwBusyBefore stats `json:"fw_busy_before"`
	FwBusyDuring stats `json:"fw_busy_during"`
	// RingDropsDuring is the rate of frames (flood and legitimate) that
	// gen's veth could not hand to fw's receive ring in the flood window
	// (its tx_dropped: the ring, 256 frames, was full).
	RingDropsDuring stats `json:"ring_drops_per_s_during"`
	// TableEntries is the firewall's connection table size right after
	// each flood (xfw conntrack -C, or the namespace's
	// nf_conntrack_count).
	TableEntries stats  `json:"table_entries"`
	Error        string `json:"error,omitempty"`
}

// runConntrack runs the three experiments on one rig per firewall.
func runConntrack(ctx context.Context, o *options, fws []*firewall) (*ctSection, error) {
	sec := &ctSection{Command: commandLine(), Started: time.Now(), Reps: o.reps}
	defer func() { sec.Seconds = time.Since(sec.Started).Seconds() }()
	rigs, err := newRigs(ctx, fws)
	if err != nil {
		return nil, err
	}
	defer closeRigs(rigs)
	for _, r := range rigs {
		// The client's connections end with RST (SO_LINGER 0), so no
		// TIME_WAIT limits port reuse; the whole range cycles in a few
		// seconds at the rates measured.
		if err := mustIn(ctx, r.topo.GenNS, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000"); err != nil {
			return nil, err
		}
		h, err := startHelper(r.topo.FwNS, fwCPU, "tcpserver", "-listen", fmt.Sprintf(":%d", serverPort), "-max", "60m")
		if err != nil {
			return nil, err
		}
		r.sink = h
	}
	time.Sleep(200 * time.Millisecond) // servers listening
	if o.ctParts[ctPartConnRate] {
		if sec.ConnRate, err = runConnRate(ctx, o, rigs); err != nil {
			return nil, err
		}
	}
	if o.ctParts[ctPartSynFlood] {
		if sec.SynFlood, err = runSynFlood(ctx, o, rigs); err != nil {
			return nil, err
		}
	}
	if !o.ctParts[ctPartDDoS] {
		return sec, nil
	}
	// The DDoS scenario builds its own rigs (and servers).
	for _, r := range rigs {
		if r.sink != nil {
			r.sink.stop()
			r.sink = nil
		}
	}
	flows := ddosFlows()
	sec.DDoS, err = runDDoSScenario(ctx, o, rigs, ddosEstablishedRuleset(flows), flows,
		"DDoS scenario, established rule first (legitimate TCP transactions per second under attack)",
		fmt.Sprintf("INPUT: `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT` first, then %d DROP rules on source address, protocol (UDP) and source port, then `-p tcp --dport %d -m conntrack --ctstate NEW -j ACCEPT`, policy DROP: "+
			"every packet of a legitimate connection after its SYN is accepted by the first rule (xfw: without classification, its established fast path); "+
			"the attack matches no connection and is dropped by the signatures.", ddosRules, serverPort))
	if err != nil {
		return nil, err
	}
	return sec, nil
}

// fillerRules returns n ACCEPT rules that the benchmark's traffic never
// matches: TCP from random sources of srcNet (the client is genAddr) to
// random ports other than serverPort and streamPort.
func fillerRules(n int) []rule {
	rng := rand.New(rand.NewSource(seedLegit))
	out := make([]rule, 0, n)
	for len(out) < n {
		dport := uint16(1 + rng.Intn(65535))
		if dport == serverPort || dport == streamPort {
			continue
		}
		out = append(out, rule{Src: randomIn(rng, srcNet), Proto: "tcp", Dport: dport, Target: "ACCEPT"})
	}
	return out
}

// statefulRuleset is the INPUT ruleset of the connection-rate and SYN
// flood experiments: established first, the fillers, then new
// connections to serverPort and, with stream, to streamPort; policy DROP.
func statefulRuleset(fillers int, stream bool) *ruleset {
	rs := &ruleset{Chain: "INPUT", Policy: "DROP"}
	rs.Rules = append(rs.Rules, rule{CtState: "ESTABLISHED,RELATED", Target: "ACCEPT"})
	rs.Rules = append(rs.Rules, fillerRules(fillers)...)
	rs.Rules = append(rs.Rules, rule{Proto: "tcp", Dport: serverPort, CtState: "NEW", Target: "ACCEPT"})
	if stream {
		rs.Rules = append(rs.Rules, rule{Proto: "tcp", Dport: streamPort, CtState: "NEW", Target: "ACCEPT"})
	}
	return rs
}

// runConnRate measures connections per second at every filler count,
// alternating firewalls within each repetition.
func runConnRate(ctx context.Context, o *options, rigs []*rig) (*throughputSection, error) {
	sec := &throughputSection{
		Title:     "Connection tracking: new connections per second through a stateful INPUT ruleset",
		XLabel:    "filler rules",
		Xs:        ctFillers,
		CostLabel: "fw CPU ns per completed connection",
		Notes: []string{
			fmt.Sprintf("INPUT, policy DROP: `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`, then n filler rules that never match (`-s <random 10.100/16> -p tcp --dport <random> -j ACCEPT`), then `-p tcp --dport %d -m conntrack --ctstate NEW -j ACCEPT` (nftables: `ct state established,related accept` and the same rules). "+
				"Each connection's SYN walks the chain; its other packets are accepted by the first rule (xfw: its established fast path, no classification).", serverPort),
			fmt.Sprintf("Client in gen (CPU 0, %d connections in flight, Go, one thread): connect, send %d bytes, read %d bytes back, close with SO_LINGER 0 (RST), in a loop, for %v; server in fw (CPU 1) answers and closes. "+
				"RST leaves no TIME_WAIT on either side, so the ephemeral ports (1024–65000, one source address) are reused within seconds: the firewalls see new SYNs on tuples whose previous connection is still in their table in state CLOSE, as a busy client makes them. "+
				"The value is completed connections per second; the CPU table is fw's NAPI thread plus the server per completed connection.", ctClientConns, reqSize, reqSize, ctWindow),
		},
	}
	for _, x := range ctFillers {
		rs := statefulRuleset(x, false)
		var active []*rig
		for _, r := range rigs {
			sp := seriesPoint{Firewall: r.fw.Name, X: x}
			progress("conntrack conn/s: %s filler rules: loading %s", humanCount(x), r.fw.Name)
			d, err := r.fw.loadTimed(ctx, r.topo.FwNS, rs)
			sp.LoadSeconds = d.Seconds()
			if err != nil {
				sp.Error = err.Error()
				progress("  %v", err)
			} else {
				active = append(active, r)
			}
			sec.Series = append(sec.Series, sp)
		}
		if x == ctFillers[0] {
			for _, r := range rigs {
				sec.Firewalls = append(sec.Firewalls, r.fw.Name)
			}
		}
		for rep := 0; rep < o.reps; rep++ {
			for i := range active {
				r := active[(i+rep)%len(active)]
				p, err := connRatePoint(r, ctWindow)
				if err != nil {
					return nil, fmt.Errorf("conntrack conn/s %s at %d: %w", r.fw.Name, x, err)
				}
				sp := sec.get(r.fw.Name, x)
				sp.Points = append(sp.Points, p)
			}
		}
		for _, r := range active {
			sp := sec.get(r.fw.Name, x)
			sp.finish()
			var failed uint64
			for _, p := range sp.Points {
				failed += p.Failed
			}
			progress("conntrack conn/s: %-16s %6s fillers: %8s conn/s (%5.0f ns CPU/conn, %d failed, load %.2fs)",
				r.fw.Name, humanCount(x), humanRate(sp.PPS.Median), sp.NsPerPkt.Median, failed, sp.LoadSeconds)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// clientRun is a running TCP client helper with fw's CPU accounting
// started with it.
type clientRun struct {
	r     *rig
	h     *helper
	path  time.Duration
	busy  float64
	start time.Time
}

// startClient starts the connection client in gen for dur, at rate
// connections per second (0: as many as it can).
func startClient(r *rig, dur time.Duration, rate float64) (*clientRun, error) {
	if err := r.topo.pinNAPI(); err != nil {
		return nil, err
	}
	c := &clientRun{r: r, start: time.Now()}
	var err error
	if c.path, err = pathCPU(r.topo, []int{r.sink.pid()}); err != nil {
		return nil, err
	}
	if c.busy, _, err = cpuTimes(fwCPU); err != nil {
		return nil, err
	}
	c.h, err = startHelper(r.topo.GenNS, genCPU, "tcpclient", "-addr", netip.AddrPortFrom(fwInAddr, serverPort).String(),
		"-conns", fmt.Sprint(ctClientConns), "-duration", dur.String(), "-rate", fmt.Sprint(rate))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// wait waits for the client to finish (it stops by itself after its
// duration; the caller has slept most of it) and returns the point:
// connections per second, fw CPU per connection, failures.
func (c *clientRun) wait(dur time.Duration) (point, error) {
	if d := time.Until(c.start.Add(dur + 100*time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
	if err := c.h.cmd.Wait(); err != nil {
		c.h.stop()
		return point{}, fmt.Errorf("tcp client: %w", err)
	}
	out := c.h.stop()
	path, err := pathCPU(c.r.topo, []int{c.r.sink.pid()})
	if err != nil {
		return point{}, err
	}
	busy, _, err := cpuTimes(fwCPU)
	if err != nil {
		return point{}, err
	}
	var cr clientReport
	if err := json.Unmarshal(out, &cr); err != nil {
		return point{}, fmt.Errorf("client report %q: %w", out, err)
	}
	p := point{Failed: cr.Failed}
	el := time.Since(c.start).Seconds()
	if cr.Seconds > 0 {
		p.PPS = float64(cr.Completed) / cr.Seconds
	}
	used := (path - c.path).Seconds()
	p.FwBusy = used / el
	p.OtherBusy = max(0, (busy-c.busy)/el-p.FwBusy)
	if cr.Completed > 0 {
		p.FwNsPerPkt = used * 1e9 / float64(cr.Completed)
	}
	return p, nil
}

// connRatePoint measures connections per second over dur.
func connRatePoint(r *rig, dur time.Duration) (point, error) {
	c, err := startClient(r, dur, 0)
	if err != nil {
		return point{}, err
	}
	return c.wait(dur)
}

// ddosEstablishedRuleset is ddosRuleset with the established rule first.
func ddosEstablishedRuleset(flows []flow) *ruleset {
	rs := &ruleset{Chain: "INPUT", Policy: "DROP"}
	rs.Rules = append(rs.Rules, rule{CtState: "ESTABLISHED,RELATED", Target: "ACCEPT"})
	for _, f := range flows {
		rs.Rules = append(rs.Rules, rule{Src: f.Src, Proto: "udp", Sport: f.Sport, Target: "DROP"})
	}
	rs.Rules = append(rs.Rules, rule{Proto: "tcp", Dport: serverPort, CtState: "NEW", Target: "ACCEPT"})
	return rs
}

// synFloodFrames returns synFloodTuples distinct SYNs from random sources
// of srcNet and random ports to fw's serverPort.
func synFloodFrames(t *topology) [][]byte {
	rng := rand.New(rand.NewSource(seedSynFlood))
	seen := make(map[flow]bool, synFloodTuples)
	out := make([][]byte, 0, synFloodTuples)
	for len(out) < synFloodTuples {
		f := flow{Src: randomIn(rng, srcNet), Sport: uint16(1024 + rng.Intn(65536-1024)), Dst: fwInAddr, Dport: serverPort}
		if seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, synFrame(t, f.Src, f.Dst, f.Sport, f.Dport, rng.Uint32()))
	}
	return out
}

// runSynFlood runs the SYN flood experiment on each firewall in turn (one
// stream at a time: concurrent streams would share the CPUs).
func runSynFlood(ctx context.Context, o *options, rigs []*rig) (*synFloodSection, error) {
	sec := &synFloodSection{
		Notes: []string{
			fmt.Sprintf("INPUT: `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`, `-p tcp --dport %d -m conntrack --ctstate NEW -j ACCEPT`, policy DROP. "+
				"A TCP stream gen → fw:%d (one connection, paced at %.0f Gbit/s in %d KiB writes) is opened while a rule also accepts NEW connections to port %d; that rule is then removed (a restore of the ruleset above: the connection tables stay), so the stream lives only through its table entry: "+
				"if the firewall lost it, its next segments would be NEW (loose pickup) and dropped by the policy.", serverPort, streamPort, streamRate/1e9, streamChunk>>10, streamPort),
			fmt.Sprintf("Each repetition: a %v window without flood, then a flood of spoofed SYNs cycling over %d distinct random sources and ports of 10.100.0.0/16 to port %d (AF_PACKET sendmmsg from CPU 0: paced at 50 k/s in batches of 50 a millisecond, or \"max\": as fast as it goes, in batches of up to 1024, which overflow fw's 256-frame receive ring in bursts and drop legitimate frames with the flood's, whatever the firewall), %v of warm-up, a %v window under flood, and a %v pause; "+
				"in both windows the connection client above opens new connections to port %d, at most %d a second (a connection attempt fails after 1 s without answer, so one lost SYN fails it). "+
				"The flood's sending thread runs with SCHED_IDLE: it takes the CPU 0 time the stream's sender and the client leave (they share CPU 0), so it degrades the legitimate traffic mostly through fw (gen's NAPI thread, at normal priority, still receives fw's SYN-ACKs on CPU 0), and its rate is what it reaches in that time. After the last repetition the stream gets up to %v to move again (TCP backs off its retransmissions after heavy loss) and is measured for %v (\"after\"); it survived if its connection never failed and the firewall's table still holds it, ESTABLISHED.",
				ctWindow, synFloodTuples, serverPort, synFloodWarm, ctWindow, synFloodPause, serverPort, synFloodClientRate, streamRecover, ctWindow),
			"fw answers the spoofed SYNs (SYN cookies once its listen queue is full); the SYN-ACKs go to gen, which discards them. " +
				"Table entries: xfw's two tables (`xfw conntrack -C`), or the kernel's entries in fw's namespace (nf_conntrack_count) right after each flood (xfw conntrack -C walks its tables and gives up while a flood churns them). The firewalls run one after the other, not alternating.",
		},
	}
	if b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		sec.KernelConntrackMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	for _, r := range rigs {
		progress("conntrack SYN flood: %s", r.fw.Name)
		var results []synFloodResult
		if _, err := r.fw.loadTimed(ctx, r.topo.FwNS, statefulRuleset(0, true)); err != nil {
			progress("  %v", err)
			for _, rate := range synFloodRates {
				results = append(results, synFloodResult{Firewall: r.fw.Name, Rate: rate, Error: err.Error()})
			}
		} else if results, err = synFloodRig(ctx, o, r); err != nil {
			return nil, fmt.Errorf("SYN flood %s: %w", r.fw.Name, err)
		}
		sec.Results = append(sec.Results, results...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// synFloodRig runs the SYN flood at each rate on one rig, one stream for
// all of them.
func synFloodRig(ctx context.Context, o *options, r *rig) ([]synFloodResult, error) {
	sink, err := startHelper(r.topo.FwNS, fwCPU, "tcpsink", "-listen", fmt.Sprintf(":%d", streamPort), "-max", "30m")
	if err != nil {
		return nil, err
	}
	defer sink.stop()
	time.Sleep(200 * time.Millisecond) // listening
	stream, err := startHelper(r.topo.GenNS, genCPU, "tcpstream", "-addr", netip.AddrPortFrom(fwInAddr, streamPort).String(),
		"-rate", fmt.Sprint(streamRate), "-max", "30m")
	if err != nil {
		return nil, err
	}
	defer stream.stop()
	time.Sleep(500 * time.Millisecond) // stream up to speed
	// From now on the stream lives through its table entry only.
	if _, err := r.fw.loadTimed(ctx, r.topo.FwNS, statefulRuleset(0, false)); err != nil {
		return nil, err
	}
	frames := synFloodFrames(r.topo)
	var out []synFloodResult
	for _, rate := range synFloodRates {
		res := synFloodResult{Firewall: r.fw.Name, Rate: rate}
		if err := synFloodRate(ctx, o, r, stream, frames, &res); err != nil {
			return nil, err
		}
		out = append(out, res)
		progress("conntrack SYN flood: %-16s %-6s stream %.2f → %.2f Gbit/s under %s SYN/s (after: %.2f, survived %v); conn/s %s → %s (failed/s %s); ring drops/s %s; fw busy %.0f%% → %.0f%%; table %.0f entries",
			r.fw.Name, floodRateLabel(rate), res.StreamBefore.Median, res.StreamDuring.Median, humanRate(res.FloodPPS.Median), res.StreamAfter.Median, res.Survived,
			humanRate(res.ConnsBefore.Median), humanRate(res.ConnsDuring.Median), humanRate(res.FailedDuring.Median),
			humanRate(res.RingDropsDuring.Median), 100*res.FwBusyBefore.Median, 100*res.FwBusyDuring.Median, res.TableEntries.Median)
	}
	return out, nil
}

// floodRateLabel names a flood rate of synFloodRates.
func floodRateLabel(rate int) string {
	if rate == 0 {
		return "max"
	}
	return humanRate(float64(rate))
}

// synFloodRate runs the repetitions of the SYN flood at res.Rate.
func synFloodRate(ctx context.Context, o *options, r *rig, stream *helper, frames [][]byte, res *synFloodResult) error {
	var before, during, conB, conD, failD, flood, entries, busyB, busyD, drops []float64
	for rep := 0; rep < o.reps; rep++ {
		// Without flood.
		t0 := time.Now()
		c, err := startClient(r, ctWindow, synFloodClientRate)
		if err != nil {
			return err
		}
		p, err := c.wait(ctWindow)
		if err != nil {
			return err
		}
		t1 := time.Now()
		conB = append(conB, p.PPS)
		busyB = append(busyB, p.FwBusy)
		g, err := streamGbps(stream, t0, t1)
		if err != nil {
			return err
		}
		before = append(before, g)
		// Under flood.
		stop := make(chan struct{})
		type result struct {
			rep genReport
			err error
		}
		done := make(chan result, 1)
		s := newFrameSender(r.topo, frames)
		s.idle = true
		go func() {
			asked := float64(res.Rate)
			if asked == 0 {
				asked = synFloodMaxRate
			}
			rep, err := s.run(stop, asked, synFloodWarm+ctWindow+10*time.Second)
			done <- result{rep, err}
		}()
		time.Sleep(synFloodWarm)
		t0 = time.Now()
		d0, err := txDropped(ctx, r)
		if err == nil {
			c, err = startClient(r, ctWindow, synFloodClientRate)
		}
		if err == nil {
			p, err = c.wait(ctWindow)
		}
		t1 = time.Now()
		var d1 uint64
		if err == nil {
			d1, err = txDropped(ctx, r)
		}
		close(stop)
		fr := <-done
		if err != nil {
			return err
		}
		if fr.err != nil {
			return fr.err
		}
		// Counted once the flood stopped: xfw conntrack -C walks the
		// tables, and a walk of a hash map whose keys are being evicted
		// restarts until it gives up (see the report).
		n, err := tableEntries(ctx, r)
		if err != nil {
			return err
		}
		conD = append(conD, p.PPS)
		busyD = append(busyD, p.FwBusy)
		drops = append(drops, float64(d1-d0)/t1.Sub(t0).Seconds())
		failD = append(failD, float64(p.Failed)/ctWindow.Seconds())
		entries = append(entries, n)
		if fr.rep.Elapsed > 0 {
			flood = append(flood, float64(fr.rep.Frames)/fr.rep.Elapsed.Seconds())
		}
		if g, err = streamGbps(stream, t0, t1); err != nil {
			return err
		}
		during = append(during, g)
		time.Sleep(synFloodPause)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	// Wait for the stream to move again, then measure it.
	var after float64
	var err error
	for deadline := time.Now().Add(streamRecover); ; {
		t0 := time.Now()
		time.Sleep(ctWindow)
		if after, err = streamGbps(stream, t0, time.Now()); err != nil {
			return err
		}
		if after > 0 || time.Now().After(deadline) {
			break
		}
	}
	if res.StreamEntry, err = streamEntry(ctx, r); err != nil {
		return err
	}
	res.StreamBefore, res.StreamDuring, res.StreamAfter = summarize(before), summarize(during), summarize([]float64{after})
	res.ConnsBefore, res.ConnsDuring, res.FailedDuring = summarize(conB), summarize(conD), summarize(failD)
	res.FloodPPS, res.TableEntries = summarize(flood), summarize(entries)
	res.FwBusyBefore, res.FwBusyDuring, res.RingDropsDuring = summarize(busyB), summarize(busyD), summarize(drops)
	samples, err := streamSamples(stream)
	if err != nil {
		return err
	}
	for _, s := range samples {
		if s.Error != "" {
			res.StreamError = s.Error
		}
	}
	res.Survived = res.StreamError == "" && strings.Contains(res.StreamEntry, " ESTABLISHED ")
	return nil
}

// streamSamples parses what the stream client printed so far.
func streamSamples(h *helper) ([]streamSample, error) {
	b, err := h.peek()
	if err != nil {
		return nil, err
	}
	var out []streamSample
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s streamSample
		if err := json.Unmarshal(line, &s); err != nil {
			continue // a line being written
		}
		out = append(out, s)
	}
	return out, nil
}

// streamGbps returns the stream's throughput in Gbit/s between t0 and t1,
// from its first and last samples inside the interval (0 if it moved
// nothing or failed before).
func streamGbps(h *helper, t0, t1 time.Time) (float64, error) {
	samples, err := streamSamples(h)
	if err != nil {
		return 0, err
	}
	var first, last *streamSample
	for i := range samples {
		s := &samples[i]
		if s.T < t0.UnixNano() || s.T > t1.UnixNano() {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil || last == first || last.T <= first.T {
		return 0, nil
	}
	return float64(last.Bytes-first.Bytes) * 8 / (float64(last.T-first.T) / 1e9) / 1e9, nil
}

// tableEntries returns the number of connections in the firewall's table
// in fw's namespace: xfw's own tables, or the kernel's.
func tableEntries(ctx context.Context, r *rig) (float64, error) {
	var out cmdResult
	var err error
	if r.fw.Name == fwXFW {
		out, err = runIn(ctx, 0, r.topo.FwNS, nil, r.fw.bin, "conntrack", "-C")
	} else {
		out, err = runIn(ctx, 0, r.topo.FwNS, nil, "cat", "/proc/sys/net/netfilter/nf_conntrack_count")
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(out.Stdout), 64)
	if err != nil {
		return 0, fmt.Errorf("table entries %q: %w", out.Stdout, err)
	}
	return n, nil
}

// streamEntry returns the stream's connection as the firewall's table
// lists it (conntrack -L format, "" if absent).
func streamEntry(ctx context.Context, r *rig) (string, error) {
	argv := []string{"conntrack"}
	if r.fw.Name == fwXFW {
		argv = []string{r.fw.bin, "conntrack"}
	}
	argv = append(argv, "-L", "-p", "tcp", "--dport", fmt.Sprint(streamPort))
	out, err := runIn(ctx, 0, r.topo.FwNS, nil, argv...)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(out.Stdout), "\n")
	return line, nil
}

// txDropped returns the frames gen's veth failed to hand to fw's receive
// ring so far.
func txDropped(ctx context.Context, r *rig) (uint64, error) {
	out, err := runIn(ctx, 0, r.topo.GenNS, nil, "cat", "/sys/class/net/"+r.topo.GenIf+"/statistics/tx_dropped")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(out.Stdout), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("tx_dropped %q: %w", out.Stdout, err)
	}
	return n, nil
}
