package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The RFPF section: the configuration of "Surgical DDoS filtering with fast
// LPM" in the forwarding path: three source lookups per packet (an allow
// list of networks, a block list of a million hosts, a geo list of country
// networks) under a botnet traffic mix, through xfw, iptables-legacy and
// iptables-nft with the kernel's ipset, and nftables with interval sets.

// Names of the RFPF systems.
const (
	rfpfXFW    = "xfw"
	rfpfLegacy = "iptables-legacy + ipset"
	rfpfIptNFT = "iptables-nft + ipset"
	rfpfNFT    = "nftables (interval sets)"
	// rfpfRef is the reference of the section's ratios.
	rfpfRef = rfpfIptNFT
)

// Set names, the same in every system.
const (
	rfpfAllowSet = "allow"
	rfpfBlockSet = "block"
	rfpfGeoSet   = "geo"
)

// rfpfSplitTolerance is how far (absolute share of processed packets) a
// rule's counted share may be from the share the flow table predicts, and
// the forwarded share from allow + policy, before the point is rejected as
// a broken configuration. Counters are read once after the repetitions, so
// the only slack is the generator stopping mid-cycle (under 1% of the
// packets at the rates here) and frames lost between fw and sink.
const rfpfSplitTolerance = 0.02

// rfpfSetInfo describes one of the three sets.
type rfpfSetInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Entries int    `json:"entries"`
	Target  string `json:"target"`
	Source  string `json:"source"`
}

// rfpfResult is one system's measurement.
type rfpfResult struct {
	Firewall string `json:"firewall"`
	// Processed is the packets/s fw's ingress interface handed to the
	// firewall (rx_packets of its veth: forwarded and dropped alike).
	Processed stats `json:"processed_pps"`
	// Forwarded is the packets/s that reached sink.
	Forwarded stats `json:"forwarded_pps"`
	// NsPerPkt is fw's CPU time per processed packet.
	NsPerPkt  stats `json:"ns_per_pkt"`
	OtherBusy stats `json:"other_busy"`
	GenPPS    stats `json:"gen_pps"`
	// SetSeconds is the load time of each set (allow, block, geo) and
	// RulesSeconds that of the three rules.
	SetSeconds   map[string]float64 `json:"set_seconds,omitempty"`
	RulesSeconds float64            `json:"rules_seconds,omitempty"`
	// Split is the verdict split the rules' counters show over all
	// repetitions (policy: the rest of the processed packets), and
	// ForwardedShare the share of processed packets sink received.
	Split          *verdictSplit `json:"split,omitempty"`
	ForwardedShare float64       `json:"forwarded_share,omitempty"`
	Error          string        `json:"error,omitempty"`
	Points         []point       `json:"points,omitempty"`
}

// rfpfSection is the RFPF section of the report.
type rfpfSection struct {
	Title    string        `json:"title"`
	Notes    []string      `json:"notes,omitempty"`
	Sets     []rfpfSetInfo `json:"sets"`
	Flows    int           `json:"flows"`
	Mix      trafficMix    `json:"mix"`
	Expected verdictSplit  `json:"expected"`
	Results  []rfpfResult  `json:"results"`
}

// rfpfSystem is how one system loads the sets and rules and reads the
// rules' counters, with its own tools, inside fw's namespace.
type rfpfSystem struct {
	name string
	// prepare runs before the sets are loaded (not timed).
	prepare func(ctx context.Context, ns string) error
	// loadSet loads one set: kind is "hash:ip" or "hash:net".
	loadSet func(ctx context.Context, ns, name, kind string, members []string) error
	// loadRules loads the FORWARD rules using the three sets.
	loadRules func(ctx context.Context, ns string) error
	// counters returns the packet counters of the three rules, in order.
	counters func(ctx context.Context, ns string) ([]uint64, error)
}

// rfpfIptables is the FORWARD chain in iptables-restore format.
func rfpfIptables() string {
	return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		fmt.Sprintf("-A FORWARD -m set --match-set %s src -j ACCEPT\n", rfpfAllowSet) +
		fmt.Sprintf("-A FORWARD -m set --match-set %s src -j DROP\n", rfpfBlockSet) +
		fmt.Sprintf("-A FORWARD -m set --match-set %s src -j DROP\n", rfpfGeoSet) +
		"COMMIT\n"
}

// ipsetScript renders one set for `ipset restore` (and `xfw ipset restore`).
func ipsetScript(name, kind string, members []string) string {
	var b strings.Builder
	// hashsize: a power of two at or above the member count keeps
	// buckets short; maxelem must hold every member.
	hs := 1024
	for hs < len(members) {
		hs *= 2
	}
	fmt.Fprintf(&b, "create %s %s family inet hashsize %d maxelem %d\n", name, kind, hs, max(len(members), 65536))
	for _, m := range members {
		fmt.Fprintf(&b, "add %s %s\n", name, m)
	}
	return b.String()
}

// countersRE finds a rule's counters in `iptables -S -v` output.
var countersRE = regexp.MustCompile(` -c (\d+) (\d+)`)

// iptablesCounters returns the packet counters of chain's rules, in order,
// from `argv… -S chain -v`.
func iptablesCounters(ctx context.Context, ns, chain string, argv ...string) ([]uint64, error) {
	res, err := runIn(ctx, 0, ns, nil, append(append([]string(nil), argv...), "-S", chain, "-v")...)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, line := range strings.Split(res.Stdout, "\n") {
		if !strings.HasPrefix(line, "-A "+chain+" ") {
			continue
		}
		m := countersRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s: no counters in %q", strings.Join(argv, " "), line)
		}
		v, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse counters of %q: %w", line, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// nftCounterRE finds a rule's counter in `nft list chain` output.
var nftCounterRE = regexp.MustCompile(`counter packets (\d+) bytes`)

// rfpfSystems returns the four systems; xfwBin is xfw's binary.
func rfpfSystems(xfwBin string) []*rfpfSystem {
	none := func(context.Context, string) error { return nil }
	ipsetLoad := func(argv ...string) func(ctx context.Context, ns, name, kind string, members []string) error {
		return func(ctx context.Context, ns, name, kind string, members []string) error {
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(ipsetScript(name, kind, members)),
				append(append([]string(nil), argv...), "restore")...)
			return err
		}
	}
	restore := func(argv ...string) func(context.Context, string) error {
		return func(ctx context.Context, ns string) error {
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rfpfIptables()), argv...)
			return err
		}
	}
	return []*rfpfSystem{
		{
			name: rfpfXFW,
			// A fresh data plane, no rules, no sets, already running:
			// the first xfw command in a namespace loads and verifies
			// the programs (under 2 s here), which the set load times
			// should not include (the kernel's ipset needs no start).
			prepare: func(ctx context.Context, ns string) error {
				if err := mustIn(ctx, ns, xfwBin, "stop"); err != nil {
					return err
				}
				empty := &ruleset{Chain: "FORWARD", Policy: "ACCEPT"}
				_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(empty.iptablesRestore(false)), xfwBin, "iptables-restore", "-w")
				return err
			},
			loadSet:   ipsetLoad(xfwBin, "ipset"),
			loadRules: restore(xfwBin, "iptables-restore", "-w"),
			counters: func(ctx context.Context, ns string) ([]uint64, error) {
				return iptablesCounters(ctx, ns, "FORWARD", xfwBin, "iptables", "-w")
			},
		},
		{
			name:      rfpfLegacy,
			prepare:   none,
			loadSet:   ipsetLoad("ipset"),
			loadRules: restore("iptables-legacy-restore", "-w"),
			counters: func(ctx context.Context, ns string) ([]uint64, error) {
				return iptablesCounters(ctx, ns, "FORWARD", "iptables-legacy", "-w")
			},
		},
		{
			name:      rfpfIptNFT,
			prepare:   none,
			loadSet:   ipsetLoad("ipset"),
			loadRules: restore("iptables-nft-restore", "-w"),
			counters: func(ctx context.Context, ns string) ([]uint64, error) {
				return iptablesCounters(ctx, ns, "FORWARD", "iptables-nft", "-w")
			},
		},
		{
			name: rfpfNFT,
			prepare: func(ctx context.Context, ns string) error {
				_, err := runIn(ctx, 0, ns, strings.NewReader(fmt.Sprintf("flush ruleset\nadd table ip %s\n", nftTable)), "nft", "-f", "/dev/stdin")
				return err
			},
			loadSet: func(ctx context.Context, ns, name, kind string, members []string) error {
				// Networks: an interval set (auto-merge joins adjacent
				// networks, as nft users do); hosts: a plain set (a
				// hash), like ipset's hash:ip.
				flags := "flags interval; auto-merge;"
				if kind == "hash:ip" {
					flags = fmt.Sprintf("size %d;", len(members))
				}
				var b strings.Builder
				fmt.Fprintf(&b, "add set ip %s %s { type ipv4_addr; %s }\nadd element ip %s %s {\n", nftTable, name, flags, nftTable, name)
				for i, m := range members {
					sep := ","
					if i == len(members)-1 {
						sep = ""
					}
					fmt.Fprintf(&b, "\t%s%s\n", m, sep)
				}
				b.WriteString("}\n")
				_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(b.String()), "nft", "-f", "/dev/stdin")
				return err
			},
			loadRules: func(ctx context.Context, ns string) error {
				// Counters, as iptables' rules always have.
				script := fmt.Sprintf("add chain ip %[1]s forward { type filter hook forward priority filter; policy accept; }\n"+
					"add rule ip %[1]s forward ip saddr @%[2]s counter accept\n"+
					"add rule ip %[1]s forward ip saddr @%[3]s counter drop\n"+
					"add rule ip %[1]s forward ip saddr @%[4]s counter drop\n", nftTable, rfpfAllowSet, rfpfBlockSet, rfpfGeoSet)
				_, err := runIn(ctx, 0, ns, strings.NewReader(script), "nft", "-f", "/dev/stdin")
				return err
			},
			counters: func(ctx context.Context, ns string) ([]uint64, error) {
				res, err := runIn(ctx, 0, ns, nil, "nft", "list", "chain", "ip", nftTable, "forward")
				if err != nil {
					return nil, err
				}
				var out []uint64
				for _, m := range nftCounterRE.FindAllStringSubmatch(res.Stdout, -1) {
					v, err := strconv.ParseUint(m[1], 10, 64)
					if err != nil {
						return nil, fmt.Errorf("parse nft counter %q: %w", m[0], err)
					}
					out = append(out, v)
				}
				return out, nil
			},
		},
	}
}

// ifaceRxPackets returns a counter of the packets interface ifname in ns
// has received (rx_packets, from /proc/thread-self/net/dev read inside the
// namespace). For fw's ingress veth in NAPI mode it counts every frame the
// receive path took from the ring: those XDP dropped, the stack dropped or
// forwarded alike, not those lost because the ring was full.
func ifaceRxPackets(ns, ifname string) counterFunc {
	return func() (uint64, error) {
		var v uint64
		err := nettest.InNamespace(ns, func() error {
			b, err := os.ReadFile("/proc/thread-self/net/dev")
			if err != nil {
				return fmt.Errorf("read interface counters: %w", err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				name, rest, ok := strings.Cut(line, ":")
				if !ok || strings.TrimSpace(name) != ifname {
					continue
				}
				// Receive fields: bytes packets errs drop ….
				f := strings.Fields(rest)
				if len(f) < 2 {
					return fmt.Errorf("short %s line in %s's net/dev", ifname, ns)
				}
				v, err = strconv.ParseUint(f[1], 10, 64)
				return err
			}
			return fmt.Errorf("no %s in %s's net/dev", ifname, ns)
		})
		return v, err
	}
}

// rfpfRig is one system's topology with its generator and what the
// measurement needs between repetitions.
type rfpfRig struct {
	*rig
	sys *rfpfSystem
	res *rfpfResult
	// rx0 and sink0 are the interface and sink counts after loading.
	rx0, sink0 uint64
}

// runRFPF measures the RFPF configuration on every system.
func runRFPF(ctx context.Context, o *options) (*rfpfSection, error) {
	progress("RFPF: building the lists and the traffic")
	d, err := buildRFPFData(o.rfpfMix, o.rfpfFlows)
	if err != nil {
		return nil, err
	}
	sec := &rfpfSection{
		Title: "RFPF configuration: allow, block and geo lists in FORWARD (botnet mix)",
		Sets: []rfpfSetInfo{
			{Name: rfpfAllowSet, Type: "hash:net", Entries: len(d.Allow), Target: "ACCEPT",
				Source: "networks of " + strings.Join(rfpfAllowCountries, "+") + " in Tor's geoip (Debian tor-geoipdb)"},
			{Name: rfpfBlockSet, Type: "hash:ip", Entries: len(d.Block), Target: "DROP",
				Source: "random unicast /32 hosts outside the allow list (seeded)"},
			{Name: rfpfGeoSet, Type: "hash:net", Entries: len(d.Geo), Target: "DROP",
				Source: "networks of " + strings.Join(rfpfGeoCountries, "+") + " in Tor's geoip (Debian tor-geoipdb)"},
		},
		Flows:    len(d.Flows),
		Mix:      o.rfpfMix,
		Expected: d.Expected,
	}
	progress("RFPF: allow %d networks, block %d hosts, geo %d networks; %d flows, expected split allow %.1f%% block %.1f%% geo %.1f%% policy %.1f%%",
		len(d.Allow), len(d.Block), len(d.Geo), len(d.Flows),
		100*d.Expected.Allow, 100*d.Expected.Block, 100*d.Expected.Geo, 100*d.Expected.Policy)
	members := map[string][]string{}
	for _, p := range d.Allow {
		members[rfpfAllowSet] = append(members[rfpfAllowSet], p.String())
	}
	for _, a := range d.Block {
		members[rfpfBlockSet] = append(members[rfpfBlockSet], a.String())
	}
	for _, p := range d.Geo {
		members[rfpfGeoSet] = append(members[rfpfGeoSet], p.String())
	}

	var systems []*rfpfSystem
	for _, s := range rfpfSystems(o.xfwBin) {
		if len(o.rfpfSystems) == 0 || o.rfpfSystems[s.name] {
			systems = append(systems, s)
		}
	}
	if len(systems) == 0 {
		return nil, fmt.Errorf("-rfpf-systems selects none of %s, %s, %s, %s", rfpfXFW, rfpfLegacy, rfpfIptNFT, rfpfNFT)
	}
	var fws []*firewall
	for _, s := range systems {
		fws = append(fws, &firewall{Name: s.name})
	}
	rigs, err := newRigs(ctx, fws)
	if err != nil {
		return nil, err
	}
	defer closeRigs(rigs)

	var active []*rfpfRig
	for i, s := range systems {
		r := &rfpfRig{rig: rigs[i], sys: s, res: &rfpfResult{Firewall: s.name, SetSeconds: map[string]float64{}}}
		sec.Results = append(sec.Results, rfpfResult{})
		if err := r.load(ctx, sec.Sets, members, d.Flows); err != nil {
			r.res.Error = err.Error()
			progress("RFPF: %s: %v", s.name, err)
			sec.Results[i] = *r.res
			continue
		}
		active = append(active, r)
	}
	for rep := 0; rep < o.reps; rep++ {
		for i := range active {
			// Rotate the order every repetition.
			r := active[(i+rep)%len(active)]
			var rxs, sinks []uint64
			rx := ifaceRxPackets(r.topo.FwNS, r.topo.FwIn)
			// Each read of the processed count reads sink's count
			// too, so both cover the same window.
			count := func() (uint64, error) {
				n, err := rx()
				if err != nil {
					return 0, err
				}
				s, err := r.topo.sinkPackets()
				rxs, sinks = append(rxs, n), append(sinks, s)
				return n, err
			}
			p, err := measure(r.topo, r.gen, count, o.timing, nil)
			if err != nil {
				return nil, fmt.Errorf("RFPF %s: %w", r.sys.name, err)
			}
			r.res.Points = append(r.res.Points, p)
			// Forwarded rate: the processed rate times the window's
			// share of processed packets that reached sink.
			if len(rxs) == 2 && rxs[1] > rxs[0] {
				r.res.Forwarded.All = append(r.res.Forwarded.All, p.PPS*float64(sinks[1]-sinks[0])/float64(rxs[1]-rxs[0]))
			}
		}
	}
	for i, s := range systems {
		for _, r := range active {
			if r.sys != s {
				continue
			}
			r.finish(ctx, d.Expected)
			sec.Results[i] = *r.res
		}
	}
	sec.Notes = rfpfNotes(sec, o)
	return sec, nil
}

// load loads the three sets (each timed) and the rules into r's namespace
// and the flows into its generator.
func (r *rfpfRig) load(ctx context.Context, sets []rfpfSetInfo, members map[string][]string, flows []flow) error {
	ns := r.topo.FwNS
	if err := r.sys.prepare(ctx, ns); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	for _, s := range sets {
		progress("RFPF: %s: loading %s (%s, %d entries)", r.sys.name, s.Name, s.Type, s.Entries)
		start := time.Now()
		if err := r.sys.loadSet(ctx, ns, s.Name, s.Type, members[s.Name]); err != nil {
			return fmt.Errorf("load set %s: %w", s.Name, err)
		}
		r.res.SetSeconds[s.Name] = time.Since(start).Seconds()
	}
	start := time.Now()
	if err := r.sys.loadRules(ctx, ns); err != nil {
		return fmt.Errorf("load rules: %w", err)
	}
	r.res.RulesSeconds = time.Since(start).Seconds()
	progress("RFPF: %s: sets loaded in %.2f s (allow) %.2f s (block) %.2f s (geo), rules in %.2f s", r.sys.name,
		r.res.SetSeconds[rfpfAllowSet], r.res.SetSeconds[rfpfBlockSet], r.res.SetSeconds[rfpfGeoSet], r.res.RulesSeconds)
	if err := r.gen.setFlows(flows); err != nil {
		return err
	}
	// Nothing flows between measurements: these are the counts the
	// counters start from.
	var err error
	if r.rx0, err = ifaceRxPackets(ns, r.topo.FwIn)(); err != nil {
		return err
	}
	r.sink0, err = r.topo.sinkPackets()
	return err
}

// finish computes the statistics, reads the rules' counters and checks the
// verdict split against the expected one; a mismatch is the point's Error.
func (r *rfpfRig) finish(ctx context.Context, want verdictSplit) {
	res := r.res
	var pps, ns, ob, gp []float64
	for _, p := range res.Points {
		pps = append(pps, p.PPS)
		ns = append(ns, p.FwNsPerPkt)
		ob = append(ob, p.OtherBusy)
		gp = append(gp, p.GenPPS)
	}
	res.Processed, res.NsPerPkt, res.OtherBusy, res.GenPPS = summarize(pps), summarize(ns), summarize(ob), summarize(gp)
	res.Forwarded = summarize(res.Forwarded.All)
	progress("RFPF: %-26s processed %10s pps (%s–%s), forwarded %10s pps, %4.0f ns/pkt fw CPU", res.Firewall,
		humanRate(res.Processed.Median), humanRate(res.Processed.Min), humanRate(res.Processed.Max),
		humanRate(res.Forwarded.Median), res.NsPerPkt.Median)
	c, err := r.sys.counters(ctx, r.topo.FwNS)
	if err == nil && len(c) != 3 {
		err = fmt.Errorf("%d rule counters, want 3", len(c))
	}
	var rx, sink uint64
	if err == nil {
		rx, err = ifaceRxPackets(r.topo.FwNS, r.topo.FwIn)()
	}
	if err == nil {
		sink, err = r.topo.sinkPackets()
	}
	if err != nil {
		res.Error = fmt.Sprintf("reading the counters: %v", err)
		progress("RFPF: %s: %s", res.Firewall, res.Error)
		return
	}
	total := float64(rx - r.rx0)
	if total == 0 {
		res.Error = "no packets processed"
		return
	}
	got := verdictSplit{Allow: float64(c[0]) / total, Block: float64(c[1]) / total, Geo: float64(c[2]) / total}
	got.Policy = 1 - got.Allow - got.Block - got.Geo
	res.Split = &got
	res.ForwardedShare = float64(sink-r.sink0) / total
	progress("RFPF: %s: counters allow %.1f%% block %.1f%% geo %.1f%% policy %.1f%% (expected %.1f / %.1f / %.1f / %.1f); forwarded %.1f%% of processed",
		res.Firewall, 100*got.Allow, 100*got.Block, 100*got.Geo, 100*got.Policy,
		100*want.Allow, 100*want.Block, 100*want.Geo, 100*want.Policy, 100*res.ForwardedShare)
	bad := checkSplit(got, want, res.ForwardedShare)
	if len(bad) > 0 {
		res.Error = "verdict split off, configuration broken: " + strings.Join(bad, ", ")
		progress("RFPF: %s: ERROR: %s", res.Firewall, res.Error)
	}
}

// checkSplit compares a measured verdict split and forwarded share with
// the expected split and returns what is off by more than
// rfpfSplitTolerance (nil: the configuration works as intended).
func checkSplit(got, want verdictSplit, forwardedShare float64) []string {
	var bad []string
	for _, chk := range []struct {
		what      string
		got, want float64
	}{
		{"allow", got.Allow, want.Allow}, {"block", got.Block, want.Block}, {"geo", got.Geo, want.Geo},
		{"forwarded", forwardedShare, want.Allow + want.Policy},
	} {
		if math.Abs(chk.got-chk.want) > rfpfSplitTolerance {
			bad = append(bad, fmt.Sprintf("%s %.1f%% (expected %.1f%%)", chk.what, 100*chk.got, 100*chk.want))
		}
	}
	return bad
}

// rfpfNotes explains the section.
func rfpfNotes(sec *rfpfSection, o *options) []string {
	var sets []string
	for _, s := range sec.Sets {
		sets = append(sets, fmt.Sprintf("`%s` (%s, %s entries, %s: %s)", s.Name, s.Type, commaCount(s.Entries), s.Target, s.Source))
	}
	e := sec.Expected
	mixName := "RFPF's botnet mix"
	if sec.Mix != rfpfBotnetMix {
		mixName = "not RFPF's botnet mix but `-rfpf-mix " + fmt.Sprintf("%d,%d,%d", sec.Mix.Random, sec.Mix.Allow, sec.Mix.Block) + "`"
	}
	return []string{
		"Run it with `bench/run.sh full -sections rfpf` as root after `make build` (it rewrites this section of results/bench.md and docs/benchmarks.md; the other sections keep their numbers).",
		"FORWARD, in order: `-m set --match-set allow src -j ACCEPT`, `-m set --match-set block src -j DROP`, `-m set --match-set geo src -j DROP`, policy ACCEPT. Sets: " + strings.Join(sets, "; ") + ". " +
			"xfw loads them with `xfw ipset restore` (one per set) and `xfw iptables-restore`, after an untimed empty `xfw iptables-restore` that starts its data plane (the first xfw command in a namespace loads and verifies the programs, under 2 s here); iptables-legacy and iptables-nft use the kernel's ipset (`ipset restore`) with `-m set` rules; nftables has interval sets (`flags interval; auto-merge`) for the networks and a plain set (a hash, as hash:ip) for the hosts, and `ip saddr @set counter accept|drop` rules.",
		fmt.Sprintf("Traffic: %s over %s UDP flows (64-byte frames, round-robin, shuffled): %d%% from random unicast sources (uniform over IPv4 without 0/8, 10/8, 127/8 and 224/3; they may fall into any list), %d%% from hosts of allow networks (a random network, then a random host in it), %d%% from distinct block-list hosts. "+
			"No source is drawn from the geo list on purpose: only random sources that fall into France's or Germany's networks hit it. Expected verdicts, by first match: allow %.1f%%, block %.1f%%, geo %.1f%%, policy %.1f%%.",
			mixName, commaCount(sec.Flows), sec.Mix.Random, sec.Mix.Allow, sec.Mix.Block, 100*e.Allow, 100*e.Block, 100*e.Geo, 100*e.Policy),
		"Processed packets/s: frames fw's ingress veth handed to its receive path (rx_packets of the interface over the window: dropped by xfw's XDP, dropped by netfilter and forwarded alike; frames lost because the receive ring was full are not counted). Forwarded: what sink received. fw CPU ns/pkt: fw's receive path CPU per processed packet (it depends less than pps on how much of CPU 1 other work took: the other busy column, medians). Offered: what the generator sent towards fw; the rest was lost at fw's full receive ring, as a NIC drops at its ring.",
		fmt.Sprintf("Checked: after the repetitions each system's rule counters (`iptables -S FORWARD -v`, `xfw iptables -S FORWARD -v`, `nft list chain`) over the processed packets must match the expected split, and the forwarded share allow + policy, within %.0f points, or the system is reported as broken instead of measured.", 100*rfpfSplitTolerance),
		fmt.Sprintf("Medians of %d repetitions (min–max), systems alternating within each; %d ms of traffic before a %d ms window. %s",
			o.reps, o.timing.Warm.Milliseconds(), o.timing.Window.Milliseconds(), o.runInfo),
	}
}

// commaCount writes n with thousands separators.
func commaCount(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeRFPF renders the RFPF section.
func writeRFPF(b *strings.Builder, s *rfpfSection) {
	fmt.Fprintf(b, "## %s\n\n", s.Title)
	for _, n := range s.Notes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
	ref := s.get(rfpfRef)
	b.WriteString("| system | processed pps | × " + rfpfRef + " | forwarded pps | fw CPU ns/processed pkt | other busy on CPU 1 | offered pps | counted allow / block / geo / policy | load allow / block / geo / rules |\n|---|---|---|---|---|---|---|---|---|\n")
	for i := range s.Results {
		r := &s.Results[i]
		if r.Processed.N == 0 {
			fmt.Fprintf(b, "| %s | n/a: %s ||||||||\n", r.Firewall, r.Error)
			continue
		}
		ratio := "–"
		if ref != nil && ref.Processed.Median > 0 && r.Firewall != rfpfRef {
			ratio = fmt.Sprintf("×%.2f", r.Processed.Median/ref.Processed.Median)
		}
		split := "–"
		if r.Split != nil {
			split = fmt.Sprintf("%.1f / %.1f / %.1f / %.1f %%", 100*r.Split.Allow, 100*r.Split.Block, 100*r.Split.Geo, 100*r.Split.Policy)
		}
		cell := cellStatsRate(r.Processed)
		if r.Error != "" {
			cell = "**broken** " + cell
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.0f | %.0f%% | %s | %s | %.2f / %.2f / %.2f / %.2f s |\n", r.Firewall, cell, ratio,
			cellStatsRate(r.Forwarded), r.NsPerPkt.Median, 100*r.OtherBusy.Median, humanRate(r.GenPPS.Median), split,
			r.SetSeconds[rfpfAllowSet], r.SetSeconds[rfpfBlockSet], r.SetSeconds[rfpfGeoSet], r.RulesSeconds)
	}
	var errs []string
	for _, r := range s.Results {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("- %s: %s", r.Firewall, r.Error))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nNot measured or rejected:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n")
}

// get returns the result of a system, or nil.
func (s *rfpfSection) get(name string) *rfpfResult {
	for i := range s.Results {
		if s.Results[i].Firewall == name {
			return &s.Results[i]
		}
	}
	return nil
}
