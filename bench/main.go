// Command xfwbench is xfw's benchmark suite (issue #5): throughput of xfw,
// iptables-legacy, iptables-nft and nftables through veth namespaces
// (FORWARD and INPUT scaling, set-friendly rulesets, a DDoS scenario,
// connection tracking: new connections per second and a SYN flood), the
// data plane's per-packet cost with BPF_PROG_TEST_RUN, and rule update
// latency. It writes JSON and Markdown under -out; bench/plot.py draws the
// plots. Run it as root through `make bench` (everything, some tens of
// minutes) or `make bench-quick` (headline ratios, under a minute).
//
// It creates only its own namespaces ("xbench-<pid>-<hex>-{gen,fw,sink}"),
// runs firewalls only inside them, sends traffic only between them, and
// removes them on exit, error or signal.
//
// The benchmark drives the firewalls through their own command-line tools
// (xfw's binary included). Of xfw's packages it imports only what the
// BPF_PROG_TEST_RUN section loads without the binary (the iptables front
// end and ir to parse a ruleset, the compiler, the data plane) and nettest
// (entering and cleaning up its namespaces). Nothing imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// options are the command-line settings of a run.
type options struct {
	quick    bool
	fastPath bool // -fastpath (fastpath.go)
	// inputXFWs: -input-xfws, further xfw builds for -input-base.
	inputXFWs string
	// compareForward: -compare-forward, FORWARD in the -input-base comparison.
	compareForward bool
	out            string
	xfwBin         string
	reps           int
	timing         timing
	sections       map[string]bool
	waitIdle       time.Duration
	// ctParts selects the conntrack section's experiments.
	ctParts map[string]bool
	// runInfo says which run measured a section (command, start, xfw
	// commit), for the notes of sections re-measured on their own.
	runInfo string
	// rfpfMix is the rfpf section's traffic mix and rfpfSystems the
	// systems it measures (empty: all).
	rfpfMix     trafficMix
	rfpfSystems map[string]bool
	rfpfFlows   int
	// dropFlows and dropSystems are the xdpdrop section's flood flows and
	// the systems it measures (nil: all).
	dropFlows   int
	dropSystems map[string]bool
	// progRunSizes are the progrun section's rule counts.
	progRunSizes []int
	// progRunCT puts an ESTABLISHED,RELATED ACCEPT rule first in the
	// progrun section's rulesets, so connection tracking runs.
	progRunCT bool
	// cbDir, cbSets and cbTrace are the classbench section's filter set
	// directory, set names and trace length.
	cbDir   string
	cbSets  []string
	cbTrace int
	// cbProgRunOnly skips the classbench section's forwarding runs: only
	// xfw_xdp's BPF_PROG_TEST_RUN cost (and its checks) per set.
	cbProgRunOnly bool
}

// Section names for -sections.
const (
	secForward = "forward"
	secInput   = "input"
	secSets    = "sets"
	secDDoS    = "ddos"
	secProgRun = "progrun"
	secUpdate  = "update"
	// secConntrack: connections per second through a stateful INPUT
	// ruleset, the DDoS scenario with the established rule first, and a
	// SYN flood against an established stream (conntrack.go).
	secConntrack = "conntrack"
	// secRFPF: the configuration of "Surgical DDoS filtering with fast
	// LPM" (allow, block and geo sets in FORWARD, botnet mix: rfpf.go).
	secRFPF = "rfpf"
	// secSetLookup: the per-packet cost of -m set lookups by kind of set
	// table (setlookup.go).
	secSetLookup = "setlookup"
	// secXDPDrop: how many flood packets one core drops, xfw against a
	// bare XDP_DROP program, iptables and nftables (xdpdrop.go).
	secXDPDrop = "xdpdrop"
	// secClassBench: the ClassBench filter sets in FORWARD: per-packet
	// cost over a trace, a correctness check against the kernel, and
	// forwarding rates (classbenchrun.go).
	secClassBench = "classbench"
)

var allSections = []string{secForward, secInput, secSets, secDDoS, secProgRun, secUpdate, secConntrack, secRFPF, secSetLookup, secXDPDrop, secClassBench}

func main() {
	if len(os.Args) > 1 {
		var err error
		handled := true
		switch os.Args[1] {
		case "udpsink":
			err = runUDPSink(os.Args[2:])
		case "tcpserver":
			err = runTCPServer(os.Args[2:])
		case "tcpclient":
			err = runTCPClient(os.Args[2:])
		case "tcpsink":
			err = runTCPSink(os.Args[2:])
		case "tcpstream":
			err = runTCPStream(os.Args[2:])
		case "docs":
			err = runDocs(os.Args[2:])
		case "render":
			err = runRender(os.Args[2:])
		case "kubeproxy":
			err = runKubeProxy(os.Args[2:])
		case "kubeproxy-gen":
			err = runKubeProxyGen(os.Args[2:])
		default:
			handled = false
		}
		if handled {
			if err != nil {
				fmt.Fprintf(os.Stderr, "xfwbench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	os.Exit(run())
}

// run is the benchmark driver; it returns the exit status.
func run() int {
	o := &options{sections: map[string]bool{}}
	var err error
	quick := flag.Bool("quick", false, "headline ratios only (under a minute)")
	inputBase := flag.String("input-base", "", "INPUT at the -quick-sizes rule counts: the xfw binary at this path beside -xfw, iptables-nft, nftables and no firewall (inputcmp.go)")
	inputSystems := flag.String("input-systems", strings.Join([]string{fwNone, fwXFWBase, fwXFW, fwIptNFT, fwNFT}, ","),
		"-input-base: the systems to compare ("+fwXDPPass+", "+fwTCXPass+", "+fwBothPass+": bare pass programs on fw's ingress)")
	flag.BoolVar(&o.compareForward, "compare-forward", false, "-input-base: compare FORWARD instead of INPUT")
	flag.StringVar(&o.inputXFWs, "input-xfws", "", "-input-base: further xfw builds as comma-separated NAME=PATH, named in -input-systems")
	fastPath := flag.Bool("fastpath", false, "FORWARD with xfw's XDP fast path on and off, the kernel with no firewall and iptables-nft, at the -quick-sizes rule counts")
	flag.StringVar(&o.out, "out", "results", "output directory")
	flag.StringVar(&o.xfwBin, "xfw", "bin/xfw", "xfw binary")
	flag.IntVar(&o.reps, "reps", 5, "repetitions of each point")
	window := flag.Duration("window", benchTiming.Window, "measurement window")
	warm := flag.Duration("warm", benchTiming.Warm, "traffic before the window opens")
	sections := flag.String("sections", strings.Join(allSections, ","), "sections to run")
	flag.DurationVar(&o.waitIdle, "wait-idle", 5*time.Minute, "wait up to this long for other load on the machine to end")
	ctParts := flag.String("ct-parts", strings.Join(ctAllParts, ","), "experiments of the conntrack section")
	rfpfMix := flag.String("rfpf-mix", fmt.Sprintf("%d,%d,%d", rfpfBotnetMix.Random, rfpfBotnetMix.Allow, rfpfBotnetMix.Block),
		"rfpf section: percent of flows from random sources, allow-list networks and block-list hosts")
	rfpfSys := flag.String("rfpf-systems", "", "rfpf section: comma-separated systems to measure (default all: "+
		strings.Join([]string{rfpfXFW, rfpfLegacy, rfpfIptNFT, rfpfNFT}, ", ")+")")
	flag.IntVar(&o.rfpfFlows, "rfpf-flows", rfpfFlows, "rfpf section: distinct flows (sources) the generator cycles through")
	flag.IntVar(&o.dropFlows, "xdpdrop-flows", dropFlowsDefault, "xdpdrop section: distinct flood flows (sources and ports) the generator cycles through")
	dropSys := flag.String("xdpdrop-systems", "", "xdpdrop section: comma-separated systems to measure, by the start of their names (default all)")
	progRunSizesFlag := flag.String("progrun-sizes", joinInts(progRunSizes), "progrun section: comma-separated rule counts")
	flag.BoolVar(&o.progRunCT, "progrun-ct", false, "progrun section: an ESTABLISHED,RELATED ACCEPT rule first (connection tracking on)")
	flag.StringVar(&o.cbDir, "classbench-dir", cbDefaultDir, "classbench section: directory of the ClassBench filter sets")
	cbSets := flag.String("classbench-sets", cbDefaultSets, "classbench section: comma-separated filter sets")
	flag.IntVar(&o.cbTrace, "classbench-trace", cbDefaultTrace, "classbench section: distinct packets of each trace")
	flag.BoolVar(&o.cbProgRunOnly, "classbench-progrun-only", false, "classbench section: only xfw_xdp's BPF_PROG_TEST_RUN cost per set (no forwarding through the rig)")
	quickSizesFlag := flag.String("quick-sizes", joinInts(quickSizes), "-quick and the headline: comma-separated FORWARD rule counts")
	jitLines := flag.String("jit-lines", "", "print the JIT line table (address, file:line, source) of the comma-separated BPF program ids and exit (bench/profile.sh)")
	flag.Parse()
	if *jitLines != "" {
		if err := writeJitLines(os.Stdout, *jitLines); err != nil {
			fmt.Fprintf(os.Stderr, "xfwbench: -jit-lines: %v\n", err)
			return 1
		}
		return 0
	}
	if o.progRunSizes, err = parseInts(*progRunSizesFlag); err != nil {
		fmt.Fprintf(os.Stderr, "xfwbench: -progrun-sizes: %v\n", err)
		return 2
	}
	if quickSizes, err = parseInts(*quickSizesFlag); err != nil {
		fmt.Fprintf(os.Stderr, "xfwbench: -quick-sizes: %v\n", err)
		return 2
	}
	if o.rfpfMix, err = parseMix(*rfpfMix); err != nil {
		fmt.Fprintf(os.Stderr, "xfwbench: -rfpf-mix: %v\n", err)
		return 2
	}
	if *dropSys != "" {
		o.dropSystems = map[string]bool{}
		for _, s := range strings.Split(*dropSys, ",") {
			o.dropSystems[strings.TrimSpace(s)] = true
		}
	}
	o.rfpfSystems = map[string]bool{}
	for _, s := range strings.Split(*rfpfSys, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.rfpfSystems[s] = true
		}
	}
	for _, s := range strings.Split(*cbSets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.cbSets = append(o.cbSets, s)
		}
	}
	o.ctParts = map[string]bool{}
	for _, s := range strings.Split(*ctParts, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.ctParts[s] = true
		}
	}
	o.quick = *quick
	o.fastPath = *fastPath
	o.timing = timing{Warm: *warm, Window: *window}
	for _, s := range strings.Split(*sections, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.sections[s] = true
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "xfwbench: must run as root (network namespaces, BPF)")
		return 1
	}
	abs, err := filepath.Abs(o.xfwBin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "xfwbench: %v\n", err)
		return 1
	}
	o.xfwBin = abs

	ctx, cancel := cleanupOnSignal()
	defer cancel()
	defer closeAllTopologies()
	defer stopAllHelpers()
	if removed, err := nettest.CleanupStale(nsBase); err != nil {
		progress("warning: removing stale namespaces: %v", err)
	} else if len(removed) > 0 {
		progress("removed namespaces of an earlier, killed run: %v", removed)
	}

	switch {
	case *inputBase != "":
		err = runInputCompare(ctx, o, *inputBase, *inputSystems)
	case o.fastPath:
		err = runFastPath(ctx, o)
	case o.quick:
		err = runQuick(ctx, o)
	default:
		err = runFull(ctx, o)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintf(os.Stderr, "xfwbench: %v\n", err)
		return 1
	}
	return 0
}

// cleanupOnSignal returns the run's context; on a signal it cancels it,
// stops the helpers, deletes the namespaces and exits.
func cleanupOnSignal() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		progress("%v: cleaning up", s)
		cancel()
		stopAllHelpers()
		closeAllTopologies()
		os.Exit(130)
	}()
	return ctx, cancel
}
