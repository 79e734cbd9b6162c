package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// xfw's per-packet cost on kube-proxy's ruleset: the first packet of a
// connection from a pod to a ClusterIP, which xfw_xdp walks through nat
// PREROUTING (KUBE-SERVICES → KUBE-SVC-* → KUBE-SEP-*), DNATs to an
// endpoint, routes again and walks FORWARD and nat POSTROUTING.
//
// BPF_PROG_TEST_RUN repeats a program on one buffer, and xfw rewrites it:
// after the first run the frame is addressed to the endpoint and its
// connection is known, so a repeated run times a later packet (no nat
// walk). Each timed run is therefore a call of its own (repeat 1) on a
// fresh frame of a new connection (a new source address and port); the
// kernel's duration of one run then includes one clock read, which the
// "floor" column measures on a program that only returns XDP_PASS.

// kpFirstPackets is how many first packets (connections) one repetition
// of a case times; the repetition's value is the median of their runs.
const kpFirstPackets = 2000

// kpPacketResult is one case's cost at one size.
type kpPacketResult struct {
	Name string `json:"name"`
	// First: a connection's first packet, ns per run; Later: the same
	// packet again (the connection known and translated).
	First stats `json:"first_ns"`
	Later stats `json:"later_ns"`
}

// kpPacketCase is one timed destination: a service hit early or late in
// KUBE-SERVICES.
type kpPacketCase struct {
	name string
	svc  *kubeproxy.Service
}

// kpPerPacket loads kube-proxy's exact ruleset (DNAT, MASQUERADE) into a
// namespace of its own and times xfw_xdp on first packets to the first
// and the last service. Every run must pass the frame DNATed to one of
// the service's endpoints, and the service's KUBE-SEP DNAT rules must
// have counted every run: otherwise it returns an error, not a number.
func kpPerPacket(ctx context.Context, t *kpTexts, reps int, pkt *kpPacket) error {
	defer fastPathOff()()
	topo, err := newTopology(ctx, "kubeproxy-pkt")
	if err != nil {
		return err
	}
	defer topo.Close()
	// Routes to the ClusterIPs and the endpoints, through sink.
	for _, p := range []netip.Prefix{t.opts.ServiceCIDR, t.opts.EndpointCIDR} {
		if err := mustIn(ctx, topo.FwNS, "ip", "route", "add", p.String(), "via", sinkAddr.String()); err != nil {
			return err
		}
	}
	return nettest.InNamespace(topo.FwNS, func() error {
		var row progRunRow
		if _, err := applyTextInProcess(t.full, &row); err != nil {
			return err
		}
		prog, err := attachedXDP(topo.FwIn)
		if err != nil {
			return err
		}
		defer prog.Close()
		floor, err := newPassProgram()
		if err != nil {
			return err
		}
		defer floor.Close()
		if err := pinSelf(fwCPU); err != nil {
			return err
		}
		var conn uint32 // connections used so far: each frame opens a new one
		frame := func(svc *kubeproxy.Service) []byte {
			src, sport := kpPodSource(conn)
			conn++
			return synFrame(topo, src, svc.ClusterIP, sport, svc.Port, conn)
		}
		cases := []kpPacketCase{{"first service", &t.svcs[0]}, {"last service", &t.svcs[len(t.svcs)-1]}}
		for _, c := range cases {
			pc, err := kpTimeCase(prog, c, frame, reps)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			pkt.Cases = append(pkt.Cases, pc)
		}
		var xs []float64
		for rep := 0; rep < reps; rep++ {
			ns, err := kpRunEach(floor, kpFirstPackets, func() []byte { return frame(&t.svcs[0]) })
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			xs = append(xs, ns)
		}
		pkt.Floor = summarize(xs)
		return nil
	})
}

// kpPodSource returns the source of connection k: a pod address in
// 10.100.0.0/16 (inside the cluster CIDR: no masquerade) and a port.
func kpPodSource(k uint32) (netip.Addr, uint16) {
	const ports = 60000 // source ports 1024–61023 per address
	a := 100<<16 | (k/ports)&0xffff
	return netip.AddrFrom4([4]byte{10, byte(a >> 16), byte(a >> 8), byte(a)}), uint16(1024 + k%ports)
}

// kpTimeCase times reps × kpFirstPackets connections to c's service: each
// connection's first packet, then the same packet again (a later packet
// of the connection, which xfw translates without the nat walk). Every run
// must pass the frame DNATed to one of the service's endpoints (the later
// packet to the first's), and the service's KUBE-SEP DNAT rules must have
// counted each first packet and no later one.
func kpTimeCase(prog *ebpf.Program, c kpPacketCase, frame func(*kubeproxy.Service) []byte, reps int) (kpPacketResult, error) {
	res := kpPacketResult{Name: c.name}
	before, err := kpSEPCounts(c.svc)
	if err != nil {
		return res, err
	}
	md := &xdpMD{IngressIfindex: fwInIfindex}
	out := make([]byte, frameLen+256) // room for headroom the program may add
	var first, later []float64
	for rep := 0; rep < reps; rep++ {
		xs := [2][]float64{make([]float64, 0, kpFirstPackets), make([]float64, 0, kpFirstPackets)}
		for i := 0; i < kpFirstPackets; i++ {
			in := frame(c.svc)
			md.DataEnd = uint32(len(in))
			var ep netip.AddrPort
			for k := range xs {
				ret, ns, got, err := progRunOut(prog, in, md, out)
				if err != nil {
					return res, err
				}
				to, err := kpDNATed(c.svc, ret, got)
				if err != nil {
					return res, fmt.Errorf("connection %d, packet %d: %w", i, k+1, err)
				}
				if k == 1 && to != ep {
					return res, fmt.Errorf("connection %d: first packet DNATed to %v, the next to %v", i, ep, to)
				}
				ep = to
				xs[k] = append(xs[k], float64(ns))
			}
		}
		first, later = append(first, median(xs[0])), append(later, median(xs[1]))
	}
	after, err := kpSEPCounts(c.svc)
	if err != nil {
		return res, err
	}
	if got, want := after-before, uint64(reps*kpFirstPackets); got != want {
		return res, fmt.Errorf("the service's KUBE-SEP DNAT rules counted %d packets, want %d (each connection's first)", got, want)
	}
	res.First, res.Later = summarize(first), summarize(later)
	return res, nil
}

// median returns the median of xs (sorting it).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// kpRunEach runs prog once on each of n frames next returns, checks that
// each returned XDP_PASS, and returns the median of the kernel's durations
// of the runs in nanoseconds.
func kpRunEach(prog *ebpf.Program, n int, next func() []byte) (float64, error) {
	md := &xdpMD{IngressIfindex: fwInIfindex}
	out := make([]byte, frameLen+256) // room for headroom the program may add
	xs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		in := next()
		md.DataEnd = uint32(len(in))
		ret, ns, _, err := progRunOut(prog, in, md, out)
		if err != nil {
			return 0, err
		}
		if ret != xdpPass {
			return 0, fmt.Errorf("run %d returned %d, want XDP_PASS (%d)", i, ret, xdpPass)
		}
		xs = append(xs, float64(ns))
	}
	return median(xs), nil
}

// kpDNATed checks that a run passed the frame to the stack (ret) DNATed
// to one of svc's endpoints (out), and returns that endpoint.
func kpDNATed(svc *kubeproxy.Service, ret uint32, out []byte) (netip.AddrPort, error) {
	if ret != xdpPass {
		return netip.AddrPort{}, fmt.Errorf("xfw_xdp returned %d, want XDP_PASS (%d)", ret, xdpPass)
	}
	const ipDst, tcpDport = 14 + 16, 14 + 20 + 2 // offsets in the frame
	if len(out) < tcpDport+2 {
		return netip.AddrPort{}, fmt.Errorf("output frame of %d bytes", len(out))
	}
	ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte(out[ipDst:ipDst+4])), binary.BigEndian.Uint16(out[tcpDport:]))
	if !slices.Contains(svc.Endpoints, ep) {
		return netip.AddrPort{}, fmt.Errorf("the frame left for %v, not one of %s's endpoints (not DNATed)", ep, svc)
	}
	return ep, nil
}

// kpSEPCounts returns the packets the running ruleset's DNAT rules in
// svc's KUBE-SEP chains counted.
func kpSEPCounts(svc *kubeproxy.Service) (uint64, error) {
	saved, counters, err := dataplane.Running(ir.IPv4)
	if err != nil {
		return 0, fmt.Errorf("read counters: %w", err)
	}
	if saved == nil {
		return 0, fmt.Errorf("read counters: no IPv4 ruleset loaded")
	}
	rs, err := ir.UnmarshalRuleset(saved)
	if err != nil {
		return 0, fmt.Errorf("decode the running ruleset: %w", err)
	}
	dataplane.ApplyCounters(rs, counters)
	var nat *ir.Ruleset
	for _, tb := range rs.Tables {
		if tb.Table == "nat" {
			nat = tb
		}
	}
	if nat == nil {
		return 0, fmt.Errorf("the running ruleset has no nat table")
	}
	var sum uint64
	for _, ep := range svc.Endpoints {
		c := nat.Chain(svc.SEPChain(ep))
		if c == nil {
			return 0, fmt.Errorf("no chain %s in nat", svc.SEPChain(ep))
		}
		dnat := 0
		for _, r := range c.Rules {
			if r.Target.Kind == ir.TargetDNAT {
				sum += r.Counters.Packets
				dnat++
			}
		}
		if dnat != 1 {
			return 0, fmt.Errorf("%s has %d DNAT rules, want 1", c.Name, dnat)
		}
	}
	return sum, nil
}

// progRunOut runs prog once (BPF_PROG_TEST_RUN, repeat 1) on frame with
// the XDP context ctx and returns its return value, the kernel's duration
// of the run in nanoseconds and the frame as the program left it (in out).
func progRunOut(prog *ebpf.Program, frame []byte, ctx *xdpMD, out []byte) (retval, ns uint32, got []byte, err error) {
	attr := progRunAttr{
		ProgFD:      uint32(prog.FD()),
		DataSizeIn:  uint32(len(frame)),
		DataIn:      uint64(uintptr(unsafe.Pointer(&frame[0]))),
		DataSizeOut: uint32(len(out)),
		DataOut:     uint64(uintptr(unsafe.Pointer(&out[0]))),
		Repeat:      1,
		CtxSizeIn:   uint32(unsafe.Sizeof(*ctx)),
		CtxIn:       uint64(uintptr(unsafe.Pointer(ctx))),
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(frame)
	runtime.KeepAlive(out)
	runtime.KeepAlive(ctx)
	if errno != 0 {
		return 0, 0, nil, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
	}
	return attr.Retval, attr.Duration, out[:min(int(attr.DataSizeOut), len(out))], nil
}

// newPassProgram returns an XDP program that only returns XDP_PASS: the
// floor of a timed single run (the kernel's clock reads and call).
func newPassProgram() (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_pass", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()}})
	if err != nil {
		return nil, fmt.Errorf("load XDP_PASS program: %w", err)
	}
	return prog, nil
}
