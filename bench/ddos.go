package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/netip"
	"time"
)

// DDoS scenario (bpf-iptables §6.3.2): 1,000 DROP rules on source address,
// protocol and source port, then accept new TCP connections to port 80;
// a legitimate client runs request/response transactions against a server
// in fw while attack traffic matching the DROP rules grows.

// ddosRules is the number of attack signatures (DROP rules).
const ddosRules = 1000

// ddosRates are the attack rates (frames/s). The AF_PACKET sender paces
// all but the last, which is the live-frames generator at full speed.
var ddosRates = []int{0, 100_000, 300_000, 1_000_000, ddosMaxRate}

// ddosMaxRate stands for "the live-frames generator at full speed".
const ddosMaxRate = 4_000_000

// Client settings of the legitimate traffic.
const (
	serverPort  = 80
	clientConns = 4
)

// ddosClientWindow is how long the client measures at each point.
const ddosClientWindow = 2 * time.Second

// ddosFlows returns the attack flows: UDP from the signatures' sources and
// ports to fw's address.
func ddosFlows() []flow {
	rng := rand.New(rand.NewSource(seedDDoS))
	seen := map[flow]bool{}
	var out []flow
	for len(out) < ddosRules {
		f := flow{Src: randomIn(rng, srcNet), Sport: uint16(1024 + rng.Intn(65536-1024)), Dst: fwInAddr, Dport: uint16(1 + rng.Intn(65535))}
		if f.Dport == serverPort || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// ddosRuleset returns the INPUT ruleset: the signatures, then new
// connections to port 80, then established traffic, policy DROP (the same
// policy for every firewall, xfw included).
func ddosRuleset(flows []flow) *ruleset {
	rs := &ruleset{Chain: "INPUT", Policy: "DROP"}
	for _, f := range flows {
		rs.Rules = append(rs.Rules, rule{Src: f.Src, Proto: "udp", Sport: f.Sport, Target: "DROP"})
	}
	rs.Rules = append(rs.Rules,
		rule{Proto: "tcp", Dport: serverPort, CtState: "NEW", Target: "ACCEPT"},
		rule{CtState: "ESTABLISHED,RELATED", Target: "ACCEPT"},
	)
	return rs
}

// runDDoS runs the scenario for each firewall.
func runDDoS(ctx context.Context, o *options, fws []*firewall) (*throughputSection, error) {
	rigs, err := newRigs(ctx, fws)
	if err != nil {
		return nil, err
	}
	defer closeRigs(rigs)
	flows := ddosFlows()
	return runDDoSScenario(ctx, o, rigs, ddosRuleset(flows), flows,
		"DDoS scenario (legitimate TCP transactions per second under attack)",
		fmt.Sprintf("INPUT: %d DROP rules on source address, protocol (UDP) and source port, then `-p tcp --dport %d -m conntrack --ctstate NEW -j ACCEPT` and `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`, policy DROP, for every firewall "+
			"(xfw with its own connection tracking; runs before it had one loaded the stateless equivalent `-p tcp --dport %d -j ACCEPT`).", ddosRules, serverPort, serverPort))
}

// runDDoSScenario measures legitimate transactions per second under
// attack on rigs loaded with rs (rulesetNote first among the notes); each
// rig gets a TCP server in fw, stopped with the rigs.
func runDDoSScenario(ctx context.Context, o *options, rigs []*rig, rs *ruleset, flows []flow, title, rulesetNote string) (*throughputSection, error) {
	sec := &throughputSection{
		Title:  title,
		XLabel: "attack pps",
		Xs:     ddosRates,
		Notes: []string{
			rulesetNote,
			fmt.Sprintf("Legitimate traffic: a client in gen (CPU 0, %d concurrent connections) opens a connection, sends %d bytes, reads %d bytes back and closes, in a loop, against a server in fw (CPU 1); the value is completed transactions per second over %v.", clientConns, reqSize, reqSize, ddosClientWindow),
			fmt.Sprintf("Attack: 64-byte UDP frames cycling over the %d signatures, paced with batched AF_PACKET (sendmmsg) from CPU 0, which the client shares; the top point (%s) is the live-frames generator at full speed (its real offered rate is in bench.json, gen_pps).", ddosRules, humanRate(ddosMaxRate)),
		},
	}
	loadErr := map[string]string{}
	var loaded []*rig
	for _, r := range rigs {
		sec.Firewalls = append(sec.Firewalls, r.fw.Name)
		progress("ddos: loading %s", r.fw.Name)
		if _, err := r.fw.loadTimed(ctx, r.topo.FwNS, rs); err != nil {
			progress("  %v", err)
			loadErr[r.fw.Name] = err.Error()
			continue
		}
		loaded = append(loaded, r)
		if err := r.gen.setFlows(flows); err != nil {
			return nil, err
		}
		h, err := startHelper(r.topo.FwNS, fwCPU, "tcpserver", "-listen", fmt.Sprintf(":%d", serverPort), "-max", "30m")
		if err != nil {
			return nil, err
		}
		r.sink = h
		// Client side: many short connections.
		if err := mustIn(ctx, r.topo.GenNS, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000"); err != nil {
			return nil, err
		}
	}
	time.Sleep(200 * time.Millisecond) // servers listening
	for _, rate := range ddosRates {
		for _, r := range rigs {
			sec.Series = append(sec.Series, seriesPoint{Firewall: r.fw.Name, X: rate, Error: loadErr[r.fw.Name]})
		}
		for rep := 0; rep < o.reps; rep++ {
			for i := range loaded {
				r := loaded[(i+rep)%len(loaded)]
				p, err := ddosPoint(r, flows, rate, o.timing.Warm)
				if err != nil {
					return nil, fmt.Errorf("ddos %s at %d pps: %w", r.fw.Name, rate, err)
				}
				sp := sec.get(r.fw.Name, rate)
				sp.Points = append(sp.Points, p)
			}
		}
		for _, r := range loaded {
			sp := sec.get(r.fw.Name, rate)
			sp.finish()
			progress("ddos: %-16s attack %9s pps (offered %9s): %8s legit req/s", r.fw.Name, humanRate(float64(rate)),
				humanRate(sp.GenPPS.Median), humanRate(sp.PPS.Median))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// ddosPoint measures the client's transactions per second under one
// attack rate.
func ddosPoint(r *rig, flows []flow, rate int, warm time.Duration) (point, error) {
	if err := r.topo.pinNAPI(); err != nil {
		return point{}, err
	}
	stop := make(chan struct{})
	type result struct {
		rep genReport
		err error
	}
	done := make(chan result, 1)
	maxDur := warm + ddosClientWindow + 5*time.Second
	switch {
	case rate == 0:
		done <- result{}
	case rate >= ddosMaxRate:
		go func() {
			rep, err := r.gen.run(stop, maxDur)
			done <- result{rep, err}
		}()
	default:
		s := newPacedSender(r.topo, flows)
		go func() {
			rep, err := s.run(stop, float64(rate), maxDur)
			done <- result{rep, err}
		}()
	}
	time.Sleep(warm)
	c, err := startHelper(r.topo.GenNS, genCPU, "tcpclient", "-addr", netip.AddrPortFrom(fwInAddr, serverPort).String(),
		"-conns", fmt.Sprint(clientConns), "-duration", ddosClientWindow.String())
	if err != nil {
		close(stop)
		<-done
		return point{}, err
	}
	time.Sleep(ddosClientWindow + 100*time.Millisecond)
	out := c.stop()
	close(stop)
	res := <-done
	if res.err != nil {
		return point{}, res.err
	}
	var cr clientReport
	if err := json.Unmarshal(out, &cr); err != nil {
		return point{}, fmt.Errorf("client report %q: %w", out, err)
	}
	p := point{}
	if cr.Seconds > 0 {
		p.PPS = float64(cr.Completed) / cr.Seconds
	}
	if res.rep.Elapsed > 0 {
		p.GenPPS = float64(res.rep.Frames) / res.rep.Elapsed.Seconds()
		if res.rep.Frames > 0 {
			p.GenNsPerFrame = float64(res.rep.CPU.Nanoseconds()) / float64(res.rep.Frames)
		}
	}
	return p, nil
}
