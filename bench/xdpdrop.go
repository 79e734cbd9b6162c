package main

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The xdpdrop section: how many flood packets one core drops (issue 22,
// target 4: xfw's XDP drop rate per core at least 0.7× a bare XDP_DROP
// program's). gen's XDP generator sends 64-byte UDP frames from srcNet at
// full speed towards fw, whose ingress NAPI thread (CPU 1) drops them all;
// fw's CPU time per dropped frame gives the per-core rate (10⁹ / ns), which
// does not depend on whether the generator saturates CPU 1.

// dropSeed seeds the non-matching rules of the "policy" ruleset.
const dropSeed = 5

// dropFlowsDefault is how many flows the flood cycles through unless
// -xdpdrop-flows says otherwise: more than xfw's per-CPU route cache holds
// (64), as a flood from many sources is.
const dropFlowsDefault = 1000

// dropRules is the number of rules the flood passes before the policy in
// the "policy" rulesets.
const dropRules = 10000

// dropSystem is one way to drop the flood.
type dropSystem struct {
	Name string
	// Rules says what it runs, for the report.
	Rules string
	// load sets it up in t's fw namespace and returns what undoes it.
	load func(ctx context.Context, t *topology, xfwBin string) (func(), error)
}

// dropResult is one system's measurement.
type dropResult struct {
	Name  string `json:"name"`
	Rules string `json:"rules"`
	// Processed is the rate fw's ingress took frames from its ring.
	Processed stats `json:"processed_pps"`
	// NsPerPkt is fw's CPU time per processed (dropped) frame.
	NsPerPkt stats `json:"ns_per_pkt"`
	// FwBusy is the share of CPU 1 fw's receive path used.
	FwBusy stats `json:"fw_busy"`
	// OtherBusy is the share of CPU 1 anything else used.
	OtherBusy stats `json:"other_busy"`
	// Forwarded is what reached sink over all repetitions (0 when every
	// frame was dropped).
	Forwarded uint64 `json:"forwarded"`
	// TestRunNs is the XDP program's own cost on one flood frame, its
	// data in the caches (BPF_PROG_TEST_RUN on CPU 1; zero for a system
	// without an XDP program).
	TestRunNs stats  `json:"test_run_ns"`
	Error     string `json:"error,omitempty"`
}

// xdpDropSection is the xdpdrop section's result.
type xdpDropSection struct {
	Results []dropResult `json:"results"`
	Notes   []string     `json:"notes"`
}

// floodRange is the flood's source network as rules name it.
var floodRange = srcNet.String()

// dropSystems returns the systems the section measures.
func dropSystems() []dropSystem {
	filterDrop := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -s " + floodRange + " -j DROP\nCOMMIT\n"
	rawDrop := "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A PREROUTING -s " + floodRange + " -j DROP\nCOMMIT\n"
	policy := policyDropRuleset()
	nftIngress := func(dev string) string {
		return "table netdev flood {\n\tchain in {\n\t\ttype filter hook ingress device " + dev +
			" priority -500; policy accept;\n\t\tip saddr " + floodRange + " drop\n\t}\n}\n"
	}
	nftPrerouting := "table ip flood {\n\tchain pre {\n\t\ttype filter hook prerouting priority -300; policy accept;\n\t\tip saddr " +
		floodRange + " drop\n\t}\n}\n"
	return []dropSystem{
		{Name: "bare XDP_DROP", Rules: "a two-instruction XDP program returning XDP_DROP (native, fw's ingress veth)", load: loadBareDrop},
		{Name: "minimal XDP filter", Rules: "an XDP program that reads the IPv4 source and drops " + floodRange + " (native): the least any filter reads", load: loadSourceDrop},
		{Name: "xfw raw PREROUTING", Rules: "`-t raw -A PREROUTING -s " + floodRange + " -j DROP`", load: xfwRestore(rawDrop)},
		{Name: "xfw FORWARD first rule", Rules: "`-A FORWARD -s " + floodRange + " -j DROP`", load: xfwRestore(filterDrop)},
		{Name: "xfw FORWARD policy after 10K rules", Rules: "10,000 5-tuple ACCEPT rules the flood does not match, policy DROP", load: xfwRestore(policy)},
		{Name: "iptables-nft raw PREROUTING", Rules: "`-t raw -A PREROUTING -s " + floodRange + " -j DROP`", load: cmdRestore(rawDrop, "iptables-nft-restore")},
		{Name: "iptables-legacy raw PREROUTING", Rules: "`-t raw -A PREROUTING -s " + floodRange + " -j DROP`", load: cmdRestore(rawDrop, "iptables-legacy-restore")},
		{Name: "nftables prerouting priority raw", Rules: "`ip saddr " + floodRange + " drop` in a prerouting chain at priority -300", load: cmdRestore(nftPrerouting, "nft", "-f", "-")},
		{Name: "nftables netdev ingress", Rules: "`ip saddr " + floodRange + " drop` in a netdev ingress chain of fw's ingress device",
			load: func(ctx context.Context, t *topology, xfwBin string) (func(), error) {
				return cmdRestore(nftIngress(t.FwIn), "nft", "-f", "-")(ctx, t, xfwBin)
			}},
	}
}

// policyDropRuleset is dropRules FORWARD 5-tuple ACCEPT rules from sources
// outside srcNet (so the flood matches none), policy DROP.
func policyDropRuleset() string {
	rng := rand.New(rand.NewSource(dropSeed))
	other := netip.MustParsePrefix("10.99.0.0/16")
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := 0; i < dropRules; i++ {
		fmt.Fprintf(&b, "-A FORWARD -s %s/32 -d %s/32 -p udp -m udp --sport %d --dport %d -j ACCEPT\n",
			randomIn(rng, other), randomIn(rng, fwdNet), 1024+rng.Intn(60000), 1+rng.Intn(65535))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// xfwRestore loads text with xfw iptables-restore; the undo stops xfw.
func xfwRestore(text string) func(ctx context.Context, t *topology, xfwBin string) (func(), error) {
	return func(ctx context.Context, t *topology, xfwBin string) (func(), error) {
		if err := runStdin(ctx, t.FwNS, text, xfwBin, "iptables-restore", "-w"); err != nil {
			return nil, err
		}
		return func() { _ = mustIn(context.Background(), t.FwNS, xfwBin, "stop") }, nil
	}
}

// cmdRestore feeds text to argv in fw's namespace; the namespace's
// removal undoes it.
func cmdRestore(text string, argv ...string) func(ctx context.Context, t *topology, xfwBin string) (func(), error) {
	return func(ctx context.Context, t *topology, _ string) (func(), error) {
		if err := runStdin(ctx, t.FwNS, text, argv...); err != nil {
			return nil, err
		}
		return func() {}, nil
	}
}

// runStdin runs argv in ns with text on its standard input.
func runStdin(ctx context.Context, ns, text string, argv ...string) error {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in %s: %w: %s", strings.Join(argv, " "), ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// loadBareDrop attaches a program that only returns XDP_DROP to fw's
// ingress veth (native mode, as xfw attaches).
func loadBareDrop(_ context.Context, t *topology, _ string) (func(), error) {
	return attachIngressXDP(t, "xb_drop", asm.Instructions{asm.Mov.Imm(asm.R0, xdpDrop), asm.Return()})
}

// attachIngressXDP loads insns as XDP program name and attaches it to
// fw's ingress veth in native mode; the returned function detaches and
// closes it.
func attachIngressXDP(t *topology, name string, insns asm.Instructions) (func(), error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		return nil, fmt.Errorf("load XDP program %s: %w", name, err)
	}
	var l link.Link
	err = nettest.InNamespace(t.FwNS, func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: fwInIfindex, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("attach XDP program %s to fw's ingress: %w", name, err)
	}
	return func() { l.Close(); prog.Close() }, nil
}

// loadSourceDrop attaches an XDP program that drops IPv4 frames from
// floodRange and passes the rest: it reads the frame's EtherType and
// source address (the packet's first cache line, which the generator on
// the other CPU wrote), as any filter must, and nothing else.
func loadSourceDrop(_ context.Context, t *topology, _ string) (func(), error) {
	const (
		ipSrcOff   = 26     // IPv4 source address: Ethernet header + 12
		etherType  = 12     // EtherType offset
		ipv4BE     = 0x0008 // ETH_P_IP as a little-endian load of its big-endian bytes
		xdpData    = 0      // struct xdp_md.data
		xdpDataEnd = 4      // struct xdp_md.data_end
	)
	pfx := srcNet.Addr().As4()
	// The /16's two bytes as a little-endian load of the address's first
	// half word sees them.
	want := int32(pfx[0]) | int32(pfx[1])<<8
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, xdpDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ipSrcOff+4),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, etherType, asm.Half),
		asm.JNE.Imm(asm.R5, ipv4BE, "pass"),
		asm.LoadMem(asm.R5, asm.R2, ipSrcOff, asm.Half),
		asm.JNE.Imm(asm.R5, want, "pass"),
		asm.Mov.Imm(asm.R0, xdpDrop),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
	return attachIngressXDP(t, "xb_srcdrop", insns)
}

// runXDPDrop measures every system in a topology of its own, one after the
// other (each system's repetitions back to back).
func runXDPDrop(ctx context.Context, o *options) (*xdpDropSection, error) {
	defer fastPathOff()() // nothing is forwarded; keep the runs alike
	sec := &xdpDropSection{Notes: []string{
		fmt.Sprintf("Flood: gen's XDP generator (CPU 0) sends 64-byte UDP frames from %s to FORWARD destinations, cycling through %d flows (random sources, ports and destinations), as fast as it goes; fw's ingress veth (GRO on, threaded NAPI pinned to CPU 1) drops every frame.", floodRange, max(o.dropFlows, 1)),
		"processed pps: frames fw's ingress took from its ring (rx_packets); fw ns/pkt: CPU time of fw's NAPI thread per processed frame; per-core rate: 10⁹ / (fw ns/pkt), what one core would drop if the flood kept it busy (the generator on CPU 0 may not: see fw busy).",
		"× bare: the per-core rate over the bare XDP_DROP program's (issue 22 target 4: ≥ 0.7 for xfw).",
		"forwarded: frames that reached sink over all repetitions (any would be a failed drop; the system is then reported broken).",
		"program alone: the XDP program's own run time on one flood frame, its data in the caches (BPF_PROG_TEST_RUN on CPU 1, median of the calls; the harness alone is about the bare program's), for the systems with one.",
	}}
	for _, sys := range dropSystems() {
		if !dropSelected(o.dropSystems, sys.Name) {
			continue
		}
		res := measureDrop(ctx, o, sys)
		sec.Results = append(sec.Results, res)
		if res.Error != "" {
			progress("xdpdrop: %s: %s", sys.Name, res.Error)
			continue
		}
		progress("xdpdrop: %-40s %s pps processed, %.0f ns/pkt (%.0f–%.0f; %s per core), fw busy %.0f%%, test run %.0f ns",
			sys.Name, humanRate(res.Processed.Median), res.NsPerPkt.Median, res.NsPerPkt.Min, res.NsPerPkt.Max,
			humanRate(1e9/res.NsPerPkt.Median), 100*res.FwBusy.Median, res.TestRunNs.Median)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// dropSelected reports whether the system name is among the selected (by
// the start of its name; nil selects all).
func dropSelected(sel map[string]bool, name string) bool {
	if sel == nil {
		return true
	}
	for s := range sel {
		if strings.HasPrefix(name, s) {
			return true
		}
	}
	return false
}

// measureDrop sets sys up in a fresh topology and measures o.reps windows.
func measureDrop(ctx context.Context, o *options, sys dropSystem) dropResult {
	res := dropResult{Name: sys.Name, Rules: sys.Rules}
	fail := func(err error) dropResult {
		res.Error = err.Error()
		return res
	}
	t, err := newTopology(ctx, "xdpdrop")
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	g, err := newGenerator(t)
	if err != nil {
		return fail(err)
	}
	defer g.Close()
	flows := fiveTupleFlows(max(o.dropFlows, 1), false)
	if err := g.setFlows(flows); err != nil {
		return fail(err)
	}
	undo, err := sys.load(ctx, t, o.xfwBin)
	if err != nil {
		return fail(err)
	}
	defer undo()
	if res.TestRunNs, err = dropTestRun(t, flows[0], o.reps); err != nil {
		return fail(err)
	}
	sink0, err := t.sinkPackets()
	if err != nil {
		return fail(err)
	}
	var pps, ns, busy, other []float64
	for i := 0; i < o.reps; i++ {
		p, err := measure(t, g, ifaceRxPackets(t.FwNS, t.FwIn), o.timing, nil)
		if err != nil {
			return fail(err)
		}
		pps, ns = append(pps, p.PPS), append(ns, p.FwNsPerPkt)
		busy, other = append(busy, p.FwBusy), append(other, p.OtherBusy)
	}
	sink1, err := t.sinkPackets()
	if err != nil {
		return fail(err)
	}
	res.Forwarded = sink1 - sink0
	res.Processed, res.NsPerPkt = summarize(pps), summarize(ns)
	res.FwBusy, res.OtherBusy = summarize(busy), summarize(other)
	if res.Forwarded > 0 {
		res.Error = fmt.Sprintf("broken: %d frames reached sink", res.Forwarded)
	}
	return res
}

// dropTestRun times the XDP program on fw's ingress, if any, on f's frame
// with BPF_PROG_TEST_RUN on fw's CPU: the program's cost with its data in
// the caches, beside the rig's cost per frame. It must drop the frame.
func dropTestRun(t *topology, f flow, reps int) (stats, error) {
	var s stats
	err := nettest.InNamespace(t.FwNS, func() error {
		prog, err := attachedXDP(t.FwIn)
		if err != nil {
			return nil // the kernel's systems: no program
		}
		defer prog.Close()
		if err := pinSelf(fwCPU); err != nil {
			return err
		}
		pc, err := timeFrame(prog, udpFrame(t, f.Src, f.Dst, f.Sport, f.Dport), max(reps, 1))
		if err != nil {
			return err
		}
		if pc.Retval != xdpDrop {
			return fmt.Errorf("test run: the flood frame got XDP verdict %d, not XDP_DROP", pc.Retval)
		}
		s = pc.Ns
		return nil
	})
	return s, err
}

// writeXDPDrop renders the section.
func writeXDPDrop(b *strings.Builder, s *xdpDropSection) {
	b.WriteString("## Flood drop rate per core (xdpdrop)\n\n")
	for _, n := range s.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	var bare float64
	for _, r := range s.Results {
		if r.Name == "bare XDP_DROP" && r.Error == "" && r.NsPerPkt.Median > 0 {
			bare = r.NsPerPkt.Median
		}
	}
	b.WriteString("\n| system | rules | processed pps | fw ns/pkt | per-core rate | × bare | fw busy / other busy | program alone ns |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Results {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | %s | %s | | | | | |\n", r.Name, r.Rules, r.Error)
			continue
		}
		ratio := "–"
		if bare > 0 {
			ratio = fmt.Sprintf("%.2f", bare/r.NsPerPkt.Median)
		}
		alone := "–"
		if r.TestRunNs.Median > 0 {
			alone = fmt.Sprintf("%.0f", r.TestRunNs.Median)
		}
		fmt.Fprintf(b, "| %s | %s | %s (%s–%s) | %.0f (%.0f–%.0f) | %s | %s | %.0f%% / %.0f%% | %s |\n",
			r.Name, r.Rules, humanRate(r.Processed.Median), humanRate(r.Processed.Min), humanRate(r.Processed.Max),
			r.NsPerPkt.Median, r.NsPerPkt.Min, r.NsPerPkt.Max, humanRate(1e9/r.NsPerPkt.Median), ratio,
			100*r.FwBusy.Median, 100*r.OtherBusy.Median, alone)
	}
	b.WriteString("\n")
}
