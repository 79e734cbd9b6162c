package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// updateSizes are the ruleset sizes n of the update-latency section: the
// time to append rule n+1, and to restore a whole ruleset of n rules.
var updateSizes = []int{0, 100, 1000, 5000, 10000, 50000}

// latencyPoint is one firewall's latency at one ruleset size.
type latencyPoint struct {
	Firewall string `json:"firewall"`
	N        int    `json:"n"`
	Seconds  stats  `json:"seconds"`
	Error    string `json:"error,omitempty"`
}

// updateSection is the rule update latency (bpf-iptables Table 1).
type updateSection struct {
	// Append: one `-A` command (xfw iptables -A, iptables -A, nft add
	// rule) on a chain of n rules, wall time of the command.
	Append []latencyPoint `json:"append"`
	// Restore: loading a whole ruleset of n rules (iptables-restore, xfw
	// iptables-restore, nft -f).
	Restore []latencyPoint `json:"restore"`
	// Insert and Delete: one `-I CHAIN` (at the head) of a new rule, then
	// one `-D CHAIN rule` of it, on the chain of n (+ appended) rules.
	Insert []latencyPoint `json:"insert,omitempty"`
	Delete []latencyPoint `json:"delete,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
}

// get returns the point of fw at n in ps, or nil.
func getLatency(ps []latencyPoint, fw string, n int) *latencyPoint {
	for i := range ps {
		if ps[i].Firewall == fw && ps[i].N == n {
			return &ps[i]
		}
	}
	return nil
}

// runUpdate measures restore and append latency on every rig's firewall,
// alternating firewalls within each repetition.
func runUpdate(ctx context.Context, o *options, rigs []*rig, sizes []int) (*updateSection, error) {
	sec := &updateSection{Notes: []string{
		"Wall time of one command as an administrator runs it (process start, lock, kernel update), in fw's namespace of a topology with three interfaces.",
		"Appended rules are 5-tuple UDP ACCEPT rules in FORWARD like the ruleset's; each repetition appends one more rule (n, n+1, …).",
		"Issue 3's requirement, appending one rule to a chain of 10,000 rules, is the n = 10K row of the first table.",
	}}
	// Start from an empty ruleset everywhere (an earlier section may have
	// left 100K rules whose removal would count in the first restore).
	for _, r := range rigs {
		if err := r.fw.reset(ctx, r.topo.FwNS); err != nil {
			return nil, fmt.Errorf("%s: reset: %w", r.fw.Name, err)
		}
		if err := r.fw.load(ctx, r.topo.FwNS, fiveTupleRuleset("FORWARD", nil)); err != nil {
			return nil, fmt.Errorf("%s: warm-up load: %w", r.fw.Name, err)
		}
	}
	// xfw as installed: the same commands through xfw-cmd, served by the
	// namespace's agent, in a topology of its own.
	agent, err := startAgentRig(ctx, o.xfwBin)
	if err != nil {
		return nil, err
	}
	if agent != nil {
		defer agent.Close()
		rigs = append(rigs[:len(rigs):len(rigs)], &agent.rig)
		sec.Notes = append(sec.Notes, "xfw, agent: xfw as installed (`make install`: the iptables alternatives link to xfw-cmd, the xfw-agent unit runs the agent): the same commands through xfw-cmd, served by the agent of fw's namespace (XFW_CMDSERVER=only: a command it does not serve fails).")
	}
	for _, n := range sizes {
		rs := fiveTupleRuleset("FORWARD", fiveTupleFlows(max(n, 1), false)[:n])
		// Rules to append: fresh tuples outside the ruleset's source range.
		extra := make([]rule, o.reps)
		for i := range extra {
			extra[i] = rule{Src: netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i + 1)}), Dst: fwdNet.Addr().Next(),
				Proto: "udp", Sport: uint16(1000 + i), Dport: 53, Target: "ACCEPT"}
		}
		restore := map[string][]float64{}
		appends := map[string][]float64{}
		errs := map[string]string{}
		for rep := 0; rep < o.reps; rep++ {
			for i := range rigs {
				r := rigs[(i+rep)%len(rigs)]
				name := r.fw.Name
				if errs[name] != "" {
					continue
				}
				start := time.Now()
				if err := r.fw.load(ctx, r.topo.FwNS, rs); err != nil {
					errs[name] = err.Error()
					continue
				}
				restore[name] = append(restore[name], time.Since(start).Seconds())
			}
		}
		// The last restore left n rules; append one more per repetition.
		for rep := 0; rep < o.reps; rep++ {
			for i := range rigs {
				r := rigs[(i+rep)%len(rigs)]
				name := r.fw.Name
				if errs[name] != "" || r.fw.appendRule == nil {
					continue
				}
				start := time.Now()
				if err := r.fw.appendRule(ctx, r.topo.FwNS, "FORWARD", extra[rep]); err != nil {
					errs[name] = err.Error()
					continue
				}
				appends[name] = append(appends[name], time.Since(start).Seconds())
			}
		}
		// Insert a fresh rule at the head, then delete it, per repetition.
		inserts := map[string][]float64{}
		deletes := map[string][]float64{}
		for rep := 0; rep < o.reps; rep++ {
			head := extra[rep]
			head.Sport += 10000 // not one of the appended rules
			for i := range rigs {
				r := rigs[(i+rep)%len(rigs)]
				name := r.fw.Name
				if errs[name] != "" || r.fw.insertRule == nil || r.fw.deleteRule == nil {
					continue
				}
				start := time.Now()
				if err := r.fw.insertRule(ctx, r.topo.FwNS, "FORWARD", head); err != nil {
					errs[name] = err.Error()
					continue
				}
				inserts[name] = append(inserts[name], time.Since(start).Seconds())
				start = time.Now()
				if err := r.fw.deleteRule(ctx, r.topo.FwNS, "FORWARD", head); err != nil {
					errs[name] = err.Error()
					continue
				}
				deletes[name] = append(deletes[name], time.Since(start).Seconds())
			}
		}
		for _, r := range rigs {
			name := r.fw.Name
			rp := latencyPoint{Firewall: name, N: n, Seconds: summarize(restore[name]), Error: errs[name]}
			ap := latencyPoint{Firewall: name, N: n, Seconds: summarize(appends[name]), Error: errs[name]}
			ip := latencyPoint{Firewall: name, N: n, Seconds: summarize(inserts[name]), Error: errs[name]}
			dp := latencyPoint{Firewall: name, N: n, Seconds: summarize(deletes[name]), Error: errs[name]}
			sec.Restore = append(sec.Restore, rp)
			sec.Append = append(sec.Append, ap)
			sec.Insert = append(sec.Insert, ip)
			sec.Delete = append(sec.Delete, dp)
			progress("update: %-16s n=%6s: restore %9s, append %9s, insert %9s, delete %9s %s", name, humanCount(n),
				humanDuration(rp.Seconds.Median), humanDuration(ap.Seconds.Median),
				humanDuration(ip.Seconds.Median), humanDuration(dp.Seconds.Median), errs[name])
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// describeLatency renders a latency point for tables.
func describeLatency(p *latencyPoint) string {
	if p == nil {
		return "–"
	}
	if p.Error != "" {
		return "error"
	}
	if p.Seconds.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", humanDuration(p.Seconds.Median), humanDuration(p.Seconds.Min), humanDuration(p.Seconds.Max))
}
