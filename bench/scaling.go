package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// seriesPoint is one (firewall, x) point of a throughput series, over the
// repetitions.
type seriesPoint struct {
	Firewall string `json:"firewall"`
	// X is the number of rules (or set elements, or the attack rate).
	X int `json:"x"`
	// PPS is the delivered rate (requests/s for the DDoS scenario).
	PPS stats `json:"pps"`
	// NsPerPkt is fw's CPU time per delivered packet.
	NsPerPkt stats `json:"ns_per_pkt"`
	// FwBusy and OtherBusy: see point.
	FwBusy    stats `json:"fw_busy"`
	OtherBusy stats `json:"other_busy"`
	// GenPPS is what the generator offered.
	GenPPS stats `json:"gen_pps"`
	// LoadSeconds is how long loading the ruleset took.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// SetUpdateSeconds is the wall time of one command adding or deleting
	// one member of the loaded set (firewalls with setUpdate only).
	SetUpdateSeconds *stats `json:"set_update_seconds,omitempty"`
	// Error says why there is no measurement (did not load, …).
	Error string `json:"error,omitempty"`
	// Points are the raw measurements.
	Points []point `json:"points,omitempty"`
}

// finish computes the statistics of the raw points.
func (sp *seriesPoint) finish() {
	var pps, ns, fb, ob, gp []float64
	for _, p := range sp.Points {
		pps = append(pps, p.PPS)
		ns = append(ns, p.FwNsPerPkt)
		fb = append(fb, p.FwBusy)
		ob = append(ob, p.OtherBusy)
		gp = append(gp, p.GenPPS)
	}
	sp.PPS, sp.NsPerPkt, sp.FwBusy, sp.OtherBusy, sp.GenPPS = summarize(pps), summarize(ns), summarize(fb), summarize(ob), summarize(gp)
}

// throughputSection is the result of one throughput experiment.
type throughputSection struct {
	Title     string        `json:"title"`
	XLabel    string        `json:"x_label"`
	Firewalls []string      `json:"firewalls"`
	Xs        []int         `json:"xs"`
	Series    []seriesPoint `json:"series"`
	Notes     []string      `json:"notes,omitempty"`
	// CostLabel names what ns_per_pkt measures when it is not fw's CPU
	// time per delivered packet.
	CostLabel string `json:"cost_label,omitempty"`
}

// get returns the point of fw at x, or nil.
func (s *throughputSection) get(fw string, x int) *seriesPoint {
	for i := range s.Series {
		if s.Series[i].Firewall == fw && s.Series[i].X == x {
			return &s.Series[i]
		}
	}
	return nil
}

// rig is one firewall's topology with its generator.
type rig struct {
	fw   *firewall
	topo *topology
	gen  *generator
	// sink is a helper receiving INPUT traffic in fw, if any.
	sink *helper
}

// newRigs builds one topology and generator per firewall.
func newRigs(ctx context.Context, fws []*firewall) ([]*rig, error) {
	var rigs []*rig
	for _, f := range fws {
		t, err := newTopology(ctx, f.Name)
		if err != nil {
			closeRigs(rigs)
			return nil, err
		}
		g, err := newGenerator(t)
		if err != nil {
			t.Close()
			closeRigs(rigs)
			return nil, err
		}
		rigs = append(rigs, &rig{fw: f, topo: t, gen: g})
	}
	return rigs, nil
}

// closeRigs removes the rigs' helpers, firewalls and topologies.
func closeRigs(rigs []*rig) {
	for _, r := range rigs {
		if r.sink != nil {
			r.sink.stop()
		}
		r.gen.Close()
		r.topo.Close()
	}
}

// scaleConfig is what one throughput sweep varies.
type scaleConfig struct {
	title  string
	xLabel string
	// rulesets returns the ruleset for x and the flows to send.
	rulesets func(x int) (*ruleset, []flow)
	xs       []int
	// input: traffic terminates in fw (UDP sink) instead of sink.
	input bool
	// maxRules caps the ruleset size per firewall (0: no cap).
	maxRules map[string]int
	// setUpdates is how many single-member adds (and as many deletes) to
	// time after loading, on firewalls that have setUpdate.
	setUpdates int
}

// timeSetUpdates times n deletes of member a from the loaded set, each
// followed by its add (so the set stays within its maxelem), and returns
// the statistics of the 2n commands' wall times.
func timeSetUpdates(ctx context.Context, r *rig, n int, a netip.Addr) (*stats, error) {
	var ds []float64
	for i := 0; i < n; i++ {
		for _, add := range []bool{false, true} {
			start := time.Now()
			if err := r.fw.setUpdate(ctx, r.topo.FwNS, add, a); err != nil {
				return nil, fmt.Errorf("%s: single set update: %w", r.fw.Name, err)
			}
			ds = append(ds, time.Since(start).Seconds())
		}
	}
	st := summarize(ds)
	return &st, nil
}

// runScaling measures every firewall at every x, alternating firewalls
// within each repetition.
func runScaling(ctx context.Context, o *options, rigs []*rig, sc scaleConfig) (*throughputSection, error) {
	sec := &throughputSection{Title: sc.title, XLabel: sc.xLabel, Xs: sc.xs}
	for _, r := range rigs {
		sec.Firewalls = append(sec.Firewalls, r.fw.Name)
		if sc.input && r.sink == nil {
			h, err := startHelper(r.topo.FwNS, fwCPU, "udpsink", "-port", fmt.Sprint(inputPort), "-max", "30m")
			if err != nil {
				return nil, err
			}
			r.sink = h
		}
	}
	if sc.input {
		defer func() {
			for _, r := range rigs {
				if r.sink != nil {
					r.sink.stop()
					r.sink = nil
				}
			}
		}()
	}
	for _, x := range sc.xs {
		rs, flows := sc.rulesets(x)
		var active []*rig
		for _, r := range rigs {
			sp := seriesPoint{Firewall: r.fw.Name, X: x}
			if limit := sc.maxRules[r.fw.Name]; limit > 0 && x > limit {
				sp.Error = fmt.Sprintf("not run above %s (see the notes)", humanCount(limit))
				sec.Series = append(sec.Series, sp)
				continue
			}
			progress("%s: %s rules: loading %s", sc.title, humanCount(x), r.fw.Name)
			d, err := r.fw.loadTimed(ctx, r.topo.FwNS, rs)
			sp.LoadSeconds = d.Seconds()
			if err == nil {
				err = r.gen.setFlows(flows)
			}
			if err != nil {
				sp.Error = err.Error()
				progress("  %v", err)
				sec.Series = append(sec.Series, sp)
				continue
			}
			if sc.setUpdates > 0 && r.fw.setUpdate != nil && len(rs.SetDrop) > 0 {
				progress("%s: %s rules: %d single deletes/adds through %s", sc.title, humanCount(x), sc.setUpdates, r.fw.Name)
				if sp.SetUpdateSeconds, err = timeSetUpdates(ctx, r, sc.setUpdates, rs.SetDrop[len(rs.SetDrop)/2]); err != nil {
					progress("  %v", err)
				}
			}
			sec.Series = append(sec.Series, sp)
			active = append(active, r)
		}
		for rep := 0; rep < o.reps; rep++ {
			for i := range active {
				// Rotate the order every repetition.
				r := active[(i+rep)%len(active)]
				count := r.topo.sinkPackets
				var pids []int
				if sc.input {
					count = udpDelivered(r.topo.FwNS)
					pids = []int{r.sink.pid()}
				}
				p, err := measure(r.topo, r.gen, count, o.timing, pids)
				if err != nil {
					return nil, fmt.Errorf("%s %s at %d: %w", sc.title, r.fw.Name, x, err)
				}
				sp := sec.get(r.fw.Name, x)
				sp.Points = append(sp.Points, p)
			}
		}
		for _, r := range active {
			sp := sec.get(r.fw.Name, x)
			sp.finish()
			progress("%s: %-16s %6s rules: %10s pps (%4.0f ns/pkt fw CPU, load %.2fs)",
				sc.title, r.fw.Name, humanCount(x), humanRate(sp.PPS.Median), sp.NsPerPkt.Median, sp.LoadSeconds)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// benchTiming is the default warm-up and window of one measurement.
var benchTiming = timing{Warm: 500 * time.Millisecond, Window: time.Second}
