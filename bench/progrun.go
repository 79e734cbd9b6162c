package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// progRunSizes are the rule counts of the per-packet cost section (2,048:
// bpfilter's published point).
var progRunSizes = []int{0, 50, 100, 500, 1000, 2048, 5000, 10000, 50000, 100000}

// progRunTarget is the wall time one BPF_PROG_TEST_RUN call should take:
// long enough to average out timer noise, short enough for 5 repetitions
// of 3 cases at 10 sizes.
const progRunTarget = 150 * time.Millisecond

// bpfilterReference is the published figure the issue compares with.
const bpfilterReference = "bpfilter's published figure, as quoted in issue #5: 13.7 µs per packet at 2,048 rules"

// lbvsCost is the work of one classification, counted by a user-space
// replica of the BPF search: an instruction-count proxy, not a measurement.
type lbvsCost struct {
	// Steps is the number of bpf_loop callback runs (one per word
	// examined or chunk skipped, plus the final one).
	Steps int `json:"steps"`
	// Lookups is the number of BPF map lookups: field classes (binary
	// search probes included), class→chunk ids and chunks, the entry.
	Lookups int `json:"lookups"`
	// Probes is the number of address search tree nodes read.
	Probes int `json:"probes"`
}

// progRunCase is one packet's cost at one ruleset size.
type progRunCase struct {
	Name   string   `json:"name"` // "first", "last", "none"
	Ns     stats    `json:"ns"`
	Retval uint32   `json:"retval"`
	Proxy  lbvsCost `json:"proxy"`
}

// progRunRow is one ruleset size.
type progRunRow struct {
	Rules int           `json:"rules"`
	Cases []progRunCase `json:"cases"`
	// Program sizes as the kernel reports them.
	XlatedInsns   int `json:"xlated_insns"`
	JitedBytes    int `json:"jited_bytes"`
	VerifiedInsns int `json:"verified_insns"`
	// Load phases in the dataplane package (in-process, no CLI).
	ParseSeconds   float64 `json:"parse_seconds"`
	CompileSeconds float64 `json:"compile_seconds"`
	ApplySeconds   float64 `json:"apply_seconds"`
	Generation     string  `json:"generation"`
	Error          string  `json:"error,omitempty"`
}

// progRunSection is the data plane's per-packet cost.
type progRunSection struct {
	Rows      []progRunRow `json:"rows"`
	Reference string       `json:"reference"`
	Notes     []string     `json:"notes"`
}

// runProgRun loads each ruleset with dataplane.Apply into a fresh fw
// namespace and times xfw_xdp with BPF_PROG_TEST_RUN on frames hitting the
// first rule, the last rule and no rule (FORWARD, ingress_ifindex of fw's
// real ingress interface, so the FIB lookup routes them to sink).
func runProgRun(ctx context.Context, o *options) (*progRunSection, error) {
	defer fastPathOff()()
	t, err := newTopology(ctx, "progrun")
	if err != nil {
		return nil, err
	}
	defer t.Close()
	sec := &progRunSection{
		Reference: bpfilterReference,
		Notes: []string{
			"ns/packet: the kernel's mean duration of one run of xfw_xdp (BPF_PROG_TEST_RUN, repeat ≥ 1,000, on CPU 1), median of 5 calls; the context's ingress_ifindex is fw's ingress veth, so the FIB lookup and chain selection run as for real traffic (FORWARD, 64-byte UDP).",
			"The XDP fast path is off (XFW_FASTPATH=off): a test run repeats the program on one buffer, which the fast path's rewrite (destination MAC, TTL) would leave addressed to another host, so every later run would stop at the MAC check. Its cost shows in the forwarding rates of the fastpath section.",
			"first/last: the frame matches the first/last of n 5-tuple ACCEPT rules; none: it matches no rule (policy DROP).",
			"steps/lookups: instruction proxy, counted by a user-space replica of the BPF search over the compiled generation (cross-checked against compiler.Generation.Classify): bpf_loop steps and BPF map lookups of the classification. perf has no hardware counters on this VM.",
		},
	}
	for _, n := range o.progRunSizes {
		flows := fiveTupleFlows(max(n, 1), false)
		rs := fiveTupleRuleset("FORWARD", flows[:n])
		if o.progRunCT {
			ctRule := rule{CtState: "ESTABLISHED,RELATED", Target: "ACCEPT"}
			rs.Rules = append([]rule{ctRule}, rs.Rules...)
		}
		row := progRunRow{Rules: n}
		cases := []struct {
			name string
			f    flow
		}{
			{"first", flows[0]},
			{"last", flows[max(n, 1)-1]},
			{"none", flow{Src: netip.MustParseAddr("10.99.0.1"), Dst: fwdNet.Addr().Next(), Sport: 1, Dport: 1}},
		}
		err := nettest.InNamespace(t.FwNS, func() error {
			gen, err := applyInProcess(rs, &row)
			if err != nil {
				return err
			}
			prog, err := attachedXDP(t.FwIn)
			if err != nil {
				return err
			}
			defer prog.Close()
			row.XlatedInsns, row.JitedBytes, row.VerifiedInsns = progSizes(prog)
			if err := pinSelf(fwCPU); err != nil {
				return err
			}
			for _, c := range cases {
				frame := udpFrame(t, c.f.Src, c.f.Dst, c.f.Sport, c.f.Dport)
				pc, err := timeFrame(prog, frame, o.reps)
				if err != nil {
					return fmt.Errorf("%s rule: %w", c.name, err)
				}
				pc.Name = c.name
				p := compilerPacket(c.f, frameLen-14)
				cost, entry := lbvsCostOf(gen, p, compiler.ChainForward)
				if want := gen.Classify(p, compiler.ChainForward).Entry; want != entry {
					return fmt.Errorf("cost replica disagrees with Classify: entry %d, want %d", entry, want)
				}
				pc.Proxy = cost
				row.Cases = append(row.Cases, pc)
			}
			return nil
		})
		if err != nil {
			row.Error = err.Error()
		}
		sec.Rows = append(sec.Rows, row)
		var parts []string
		for _, c := range row.Cases {
			parts = append(parts, fmt.Sprintf("%s %.0f ns (%d steps)", c.Name, c.Ns.Median, c.Proxy.Steps))
		}
		progress("progrun: %6s rules: %s %s", humanCount(n), strings.Join(parts, ", "), row.Error)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// applyInProcess parses, compiles and loads rs with the dataplane package in
// the calling thread's namespace, timing each phase.
func applyInProcess(rs *ruleset, row *progRunRow) (*compiler.Generation, error) {
	return applyTextInProcess(rs.iptablesRestore(false), row)
}

// applyTextInProcess is applyInProcess of iptables-restore input text.
func applyTextInProcess(text string, row *progRunRow) (*compiler.Generation, error) {
	start := time.Now()
	irs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("parse ruleset: %w", err)
	}
	irs.Chains = iptables.OrderedChains(irs)
	row.ParseSeconds = time.Since(start).Seconds()
	ifaces, err := dataplane.CompilerInterfaces()
	if err != nil {
		return nil, err
	}
	start = time.Now()
	gen, err := compiler.Compile(irs, compiler.Options{Interfaces: ifaces})
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	row.CompileSeconds = time.Since(start).Seconds()
	row.Generation = gen.String()
	counters := make([]dataplane.CounterSource, gen.NumCounters())
	for i := range counters {
		counters[i].From = -1
	}
	saved, err := irs.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	u := &dataplane.Update{Gen: gen, Saved: saved, Counters: counters}
	start = time.Now()
	if err := dataplane.Apply(ir.IPv4, u, dataplane.AttachOptions{Mode: dataplane.XDPAuto}); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	row.ApplySeconds = time.Since(start).Seconds()
	return gen, nil
}

// fastPathOff turns xfw's XDP fast path off for the syncs of this process
// and the xfw commands it starts, and returns the function that restores
// the environment. Test runs repeat the program on one buffer: a frame the
// fast path rewrote for sink would be another host's frame in every later
// run, which xfw passes after its MAC check without judging it.
func fastPathOff() func() {
	old, had := os.LookupEnv(dataplane.FastPathEnv)
	os.Setenv(dataplane.FastPathEnv, "off")
	return func() {
		if had {
			os.Setenv(dataplane.FastPathEnv, old)
		} else {
			os.Unsetenv(dataplane.FastPathEnv)
		}
	}
}

// progSizes returns prog's translated instructions, JIT image bytes and
// verified instructions (0 for what the kernel does not tell).
func progSizes(prog *ebpf.Program) (xlated, jited, verified int) {
	info, err := prog.Info()
	if err != nil {
		return 0, 0, 0
	}
	if sz, err := info.TranslatedSize(); err == nil {
		const insnSize = 8 // bytes per BPF instruction
		xlated = sz / insnSize
	}
	if sz, err := info.JitedSize(); err == nil {
		jited = int(sz)
	}
	if v, ok := info.VerifiedInstructions(); ok {
		verified = int(v)
	}
	return xlated, jited, verified
}

// attachedXDP opens the XDP program attached to ifname.
func attachedXDP(ifname string) (*ebpf.Program, error) {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", ifname, err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return nil, fmt.Errorf("no XDP program on %s", ifname)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return nil, fmt.Errorf("open XDP program %d: %w", x.ProgId, err)
	}
	return prog, nil
}

// timeFrame runs prog on frame reps times (each a calibrated repeat count)
// and returns the per-run durations.
func timeFrame(prog *ebpf.Program, frame []byte, reps int) (progRunCase, error) {
	md := &xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: fwInIfindex}
	const calibrate = 1000 // runs of the calibration call
	run := func(repeat uint32) (uint32, uint32, error) {
		for {
			ret, ns, err := progRun(prog, frame, md, repeat, 0, 0)
			if errors.Is(err, errInterrupted) {
				continue
			}
			return ret, ns, err
		}
	}
	ret, ns, err := run(calibrate)
	if err != nil {
		return progRunCase{}, err
	}
	repeat := uint32(calibrate)
	if ns > 0 {
		repeat = max(uint32(progRunTarget.Nanoseconds()/int64(ns)), calibrate)
	}
	var xs []float64
	for i := 0; i < reps; i++ {
		r, ns, err := run(repeat)
		if err != nil {
			return progRunCase{}, err
		}
		ret = r
		xs = append(xs, float64(ns))
	}
	return progRunCase{Ns: summarize(xs), Retval: ret}, nil
}

// compilerPacket returns the compiler's view of a UDP packet of flow f as
// the parser sees it on FORWARD (TTL already decremented).
func compilerPacket(f flow, l3len int) *compiler.Packet {
	const forwardedTTL = 63 // 64, decremented before FORWARD
	return &compiler.Packet{
		Src: compiler.AddrU128(f.Src), Dst: compiler.AddrU128(f.Dst), Proto: 17,
		Sport: uint32(f.Sport), Dport: uint32(f.Dport),
		TCPFlags: compiler.FlagsNone, ICMP: compiler.ValNone,
		Len: uint32(l3len), TTL: forwardedTTL, IIF: fwInIfindex, OIF: fwOutIfindex,
	}
}

// lbvsCostOf replays Generation.Classify (and bpf/classify.h's
// xfw_resolve / xfw_step) for a packet without hotdrop defects, counting
// the work; it returns the cost and the terminal entry (-1: policy).
func lbvsCostOf(g *compiler.Generation, p *compiler.Packet, chain int) (lbvsCost, int) {
	var c lbvsCost
	var cls [compiler.NumFields]uint32
	var nodes []compiler.BoundNode
	var shape compiler.BoundTreeShape
	active := func(f compiler.Field) bool { return g.Active&(1<<uint(f)) != 0 }
	for f := compiler.Field(0); f < compiler.NumFields; f++ {
		if !active(f) {
			continue
		}
		v := p.FieldValue(f)
		switch f.Kind() {
		case compiler.KindSmall:
			c.Lookups++
			if v.Hi != 0 || v.Lo >= uint64(f.SmallDomain()) {
				return c, -1
			}
			cls[f] = g.Small[int(g.SmallBase[f])+int(v.Lo)]
		case compiler.KindAddr:
			// One node per level of the field's search tree
			// (compiler.BoundTrees, bpf/classify.h xfw_addr_cls).
			a := f.AddrIndex()
			if nodes == nil {
				var err error
				if nodes, shape, err = g.BoundTrees(); err != nil {
					return c, -1
				}
			}
			c.Probes += int(shape.Levels[a])
			c.Lookups += int(shape.Levels[a])
			cls[f] = compiler.SearchBoundTree(nodes, shape, a, v)
		default:
			c.Lookups++
			var ok bool
			if cls[f], ok = g.Hash[compiler.HashKey{Field: uint32(f), Value: v.Lo}]; !ok {
				cls[f] = g.DefaultClass[f]
			}
		}
		if cls[f] == 0 {
			return c, -1
		}
	}
	// The walk's reads (bpf/classify.h): entering a chunk reads each
	// field's chunk id and chunk (the summaries and the word the walk is
	// at), a later word of that chunk each field's chunk by the ids kept
	// (after a RETURN to the caller's chunk, both again).
	walkFields := g.WalkFields() // xfw_family_cfg.fields
	idsChunk, wordChunk, wordJ := ^uint32(0), ^uint32(0), ^uint32(0)
	var word uint64
	andChunk := func(k, j uint32) uint64 {
		summary, w := ^uint64(0), ^uint64(0)
		idsChunk, wordChunk, wordJ, word = ^uint32(0), k, j, 0
		for _, f := range walkFields {
			c.Lookups++ // class→chunk id
			id := g.ClassChunks.At(cls[f], k)
			if id == 0 {
				return 0
			}
			c.Lookups++ // the chunk
			summary &= g.Chunks[id].Summary
			w &= g.Chunks[id].Words[j]
		}
		idsChunk, word = k, w
		return summary
	}
	// xfw_next_chunk: the chunks where every field's class has entries,
	// by the AND of their chunk masks (one read per field and mask word).
	masks, maskWords := g.ChunkMasks(), g.ChunkMaskWords()
	maskW, mask := ^uint32(0), uint32(0)
	nextChunk := func(n uint32) uint32 {
		w := n / compiler.ChunkMaskBits
		if w >= maskWords {
			return n
		}
		if w != maskW {
			maskW, mask = w, ^uint32(0)
			for _, f := range walkFields {
				if mask == 0 {
					break
				}
				c.Lookups++ // the field's mask word
				mask &= masks[cls[f]*maskWords+w]
			}
		}
		m := mask & (^uint32(0) << (n % compiler.ChunkMaskBits))
		if m == 0 {
			return (w + 1) * compiler.ChunkMaskBits
		}
		return w*compiler.ChunkMaskBits + uint32(trailingZeros(uint64(m)))
	}
	// andWord: word j of chunk k by the ids kept, one read per field up
	// to the first that leaves the AND empty (xfw_and_word,
	// xfw_scan_words).
	andWord := func(k, j uint32) uint64 {
		w := ^uint64(0)
		for _, f := range walkFields {
			c.Lookups++ // the chunk, by the id kept
			if w &= g.Chunks[g.ClassChunks.At(cls[f], k)].Words[j]; w == 0 {
				break
			}
		}
		return w
	}
	// scanWords: xfw_scan_words over the candidate words cand of chunk
	// k, up to scanWords of them: the first word whose AND is not empty,
	// else the next untried candidate (more) or none.
	const scanWords = 4 // XFW_SCAN_WORDS
	scanWords4 := func(k uint32, cand uint64) (j uint32, found, more bool) {
		for n := 0; n < scanWords; n++ {
			if cand == 0 {
				return 0, false, false
			}
			j = uint32(trailingZeros(cand))
			if w := andWord(k, j); w != 0 {
				wordChunk, wordJ, word = k, j, w
				return j, true, false
			}
			cand &= cand - 1
		}
		if cand == 0 {
			return 0, false, false
		}
		return uint32(trailingZeros(cand)), false, true
	}
	wordAt := func(k, j uint32) uint64 {
		switch {
		case wordChunk == k && wordJ == j:
		case idsChunk == k:
			wordChunk, wordJ, word = k, j, andWord(k, j)
		default:
			andChunk(k, j)
		}
		return word
	}
	pos, end := g.ChainStart[chain], g.ChainEnd[chain]
	baseEnd := end
	var stack []uint32 // the user chains' calls (compiler/regions.go)
	unwinding := false
	cached := ^uint32(0)
	var summary uint64
	for steps := uint32(0); steps < g.MaxIters; steps++ {
		c.Steps++
		if pos >= end {
			return c, -1
		}
		k := pos / compiler.ChunkBits
		j := (pos % compiler.ChunkBits) / 64
		if k != cached {
			summary = andChunk(k, j)
			cached = k
		}
		summ := summary & (^uint64(0) << j)
		if summ == 0 {
			// The next chunk the masks allow, entered in this step.
			k = nextChunk(k + 1)
			pos, j = k*compiler.ChunkBits, 0
			if pos >= end {
				return c, -1
			}
			summary, cached = andChunk(k, 0), k
			if summ = summary; summ == 0 {
				continue
			}
		}
		if tz := uint32(trailingZeros(summ)); tz != j {
			// The next word that can match, read in this step.
			j, pos = tz, k*compiler.ChunkBits+tz*64
		}
		w := ^uint64(0) << (pos % 64) & wordAt(k, j)
		if w == 0 {
			// The chunk's later candidate words, several in this
			// step (xfw_scan_words).
			rest := summ & (^uint64(1) << j)
			if rest == 0 || idsChunk != k {
				pos = k*compiler.ChunkBits + (j+1)*64
				continue
			}
			nj, found, more := scanWords4(k, rest)
			switch {
			case more:
				pos = k*compiler.ChunkBits + nj*64
				continue
			case !found:
				pos = nextChunk(k+1) * compiler.ChunkBits
				continue
			}
			j, w = nj, word
		}
		e := k*compiler.ChunkBits + j*64 + uint32(trailingZeros(w))
		if e >= end {
			return c, -1
		}
		c.Lookups++ // the entry
		ent := &g.Entries[e]
		switch ent.Action {
		case compiler.ActContinue:
		case compiler.ActCall:
			stack, end = append(stack, e+1), uint32(len(g.Entries))
		case compiler.ActReturn:
			if len(stack) == 0 {
				return c, -1
			}
			pos, stack = stack[len(stack)-1], stack[:len(stack)-1]
			if len(stack) == 0 {
				end = baseEnd
			}
			continue
		case compiler.ActUnwind:
			if len(stack) == 0 {
				return c, -1
			}
			pos, stack, end, unwinding = stack[0], stack[:0], baseEnd, true
			continue
		case compiler.ActExit:
			pos = e + 1
			if unwinding {
				pos, unwinding = ent.Next, false
			}
			continue
		default:
			return c, int(e)
		}
		pos = ent.Next
	}
	return c, -1
}

// trailingZeros counts the trailing zero bits of a non-zero word.
func trailingZeros(x uint64) int {
	n := 0
	for x&1 == 0 && n < 64 {
		x >>= 1
		n++
	}
	return n
}

// writeProgRun renders the per-packet cost section.
func writeProgRun(b *strings.Builder, p *progRunSection, plot string) {
	b.WriteString("## Data-plane cost per packet (BPF_PROG_TEST_RUN)\n\n")
	for _, n := range p.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	fmt.Fprintf(b, "\nReference: %s.\n\n![per-packet cost](%s)\n\n", p.Reference, plot)
	b.WriteString("| rules | first rule: ns (min–max) | steps / lookups | last rule: ns | steps / lookups | no rule: ns | steps / lookups | xlated insns | verified insns | parse / compile / apply (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range p.Rows {
		fmt.Fprintf(b, "| %s |", humanCount(r.Rules))
		if r.Error != "" {
			fmt.Fprintf(b, " error: %s |||||||||\n", r.Error)
			continue
		}
		for _, c := range r.Cases {
			fmt.Fprintf(b, " %.0f (%.0f–%.0f) | %d / %d |", c.Ns.Median, c.Ns.Min, c.Ns.Max, c.Proxy.Steps, c.Proxy.Lookups)
		}
		fmt.Fprintf(b, " %d | %d | %.2f / %.2f / %.2f |\n", r.XlatedInsns, r.VerifiedInsns, r.ParseSeconds, r.CompileSeconds, r.ApplySeconds)
	}
	b.WriteString("\n")
}
