package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// frameLen is the generated frame without the Ethernet FCS: 60 bytes, a
// 64-byte frame on the wire (the paper's "64-byte UDP").
const frameLen = 60

// Generator run sizes: one live-frames call of liveRepeat frames takes
// some tens of milliseconds at full speed, so stopping is prompt.
const (
	liveRepeat = 1 << 18
	liveBatch  = 64 // frames per kernel batch (the kernel's default)
)

// generator blasts 64-byte UDP frames out of gen's veth towards fw with
// BPF_PROG_TEST_RUN in live-frames mode, one CPU (genCPU), round-robin over
// a table of flows.
type generator struct {
	t      *topology
	prog   *ebpf.Program
	state  *ebpf.Map
	tuples *ebpf.Map
	frame  []byte
	n      int
}

// newGenerator loads the generator for topology t.
func newGenerator(t *topology) (*generator, error) {
	frame := udpFrame(t, netip.MustParseAddr("10.100.0.1"), fwdNet.Addr(), 1024, 9)
	prog, state, tuples, err := newGenProgram(frame)
	if err != nil {
		return nil, err
	}
	return &generator{t: t, prog: prog, state: state, tuples: tuples, frame: frame}, nil
}

// Close releases the generator's BPF objects.
func (g *generator) Close() {
	g.prog.Close()
	g.state.Close()
	g.tuples.Close()
}

// flow is one generated 5-tuple: UDP, or the IP protocol Proto (TCP
// segments carry ACK; ICMP's type and code are Sport's bytes, its checksum
// Dport's).
type flow struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8 // 0: UDP
}

// proto returns f's IP protocol.
func (f flow) proto() uint8 {
	if f.Proto == 0 {
		return protoUDP
	}
	return f.Proto
}

// setFlows loads the flows to cycle through (at most maxTuples).
func (g *generator) setFlows(flows []flow) error {
	if len(flows) == 0 || len(flows) > maxTuples {
		return fmt.Errorf("generator: %d flows (want 1 to %d)", len(flows), maxTuples)
	}
	keys := make([]uint32, len(flows))
	vals := make([]tuple, len(flows))
	for i, f := range flows {
		keys[i] = uint32(i)
		vals[i] = makeTuple(f)
	}
	// Array maps take batch updates; chunks keep each syscall's buffer modest.
	const chunk = 1 << 16
	for s := 0; s < len(keys); s += chunk {
		e := min(s+chunk, len(keys))
		if _, err := g.tuples.BatchUpdate(keys[s:e], vals[s:e], nil); err != nil {
			return fmt.Errorf("generator: fill flows: %w", err)
		}
	}
	st := [2]uint64{0, uint64(len(flows))}
	if err := g.state.Put(uint32(0), st); err != nil {
		return fmt.Errorf("generator: set flow count: %w", err)
	}
	g.n = len(flows)
	return nil
}

// makeTuple renders f in the generator's table format.
func makeTuple(f flow) tuple {
	var tp tuple
	tp.Src = f.Src.As4()
	tp.Dst = f.Dst.As4()
	binary.BigEndian.PutUint16(tp.Sport[:], f.Sport)
	binary.BigEndian.PutUint16(tp.Dport[:], f.Dport)
	hdr := ipv4Header(f.Src, f.Dst, frameLen-14)
	hdr[9] = f.proto()
	hdr[10], hdr[11] = 0, 0
	binary.BigEndian.PutUint16(hdr[10:], nettest.Checksum(hdr))
	copy(tp.IPCsum[:], hdr[10:12])
	tp.Proto = f.proto()
	return tp
}

// ipv4Header returns an option-less IPv4 header for a UDP packet of
// totalLen bytes, with its checksum.
func ipv4Header(src, dst netip.Addr, totalLen int) []byte {
	h := make([]byte, 20)
	h[0] = 0x45 // version 4, 5 words
	binary.BigEndian.PutUint16(h[2:], uint16(totalLen))
	h[8] = 64 // TTL
	h[9] = 17 // UDP
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], nettest.Checksum(h))
	return h
}

// udpFrame returns a frameLen-byte Ethernet frame gen → fw carrying UDP.
func udpFrame(t *topology, src, dst netip.Addr, sport, dport uint16) []byte {
	return flowFrame(t, flow{Src: src, Dst: dst, Sport: sport, Dport: dport})
}

// tcpACK is the TCP header's data offset (5 words) and flags (ACK) the
// generator's frames carry at offL4End+4 (UDP payload in UDP frames).
var tcpACK = [2]byte{0x50, 0x10}

// flowFrame returns the frameLen-byte Ethernet frame gen → fw of flow f,
// as the generator writes it.
func flowFrame(t *topology, f flow) []byte {
	b := make([]byte, frameLen)
	copy(b[0:6], t.FwInMAC)
	copy(b[6:12], t.GenMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	tp := makeTuple(f)
	copy(b[14:], ipv4Header(f.Src, f.Dst, frameLen-14))
	b[offProto] = tp.Proto
	copy(b[offIPCsum:], tp.IPCsum[:])
	binary.BigEndian.PutUint16(b[34:], f.Sport)
	binary.BigEndian.PutUint16(b[36:], f.Dport)
	binary.BigEndian.PutUint16(b[38:], frameLen-34) // UDP length; checksum 0 (none)
	copy(b[offL4End+4:], tcpACK[:])
	return b
}

// genReport is what one generator run did.
type genReport struct {
	Frames  uint64        // frames the program ran on (offered to the link)
	Elapsed time.Duration // wall time of the run
	CPU     time.Duration // CPU time of the generator threads
}

// genThreads is how many threads share genCPU. Each live-frames call ends
// with an RCU grace period (the kernel tears its page pool down), about
// 20 ms of wall time without CPU use; a second thread sends meanwhile.
const genThreads = 2

// run sends at full speed until stop is closed or maxDur passes. It
// blocks; its threads run inside gen's namespace, pinned to genCPU.
func (g *generator) run(stop <-chan struct{}, maxDur time.Duration) (genReport, error) {
	type res struct {
		rep genReport
		err error
	}
	out := make(chan res, genThreads)
	for i := 0; i < genThreads; i++ {
		go func() {
			rep, err := g.runThread(stop, maxDur)
			out <- res{rep, err}
		}()
	}
	var total genReport
	var errs []error
	for i := 0; i < genThreads; i++ {
		r := <-out
		total.Frames += r.rep.Frames
		total.CPU += r.rep.CPU
		total.Elapsed = max(total.Elapsed, r.rep.Elapsed)
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	return total, errors.Join(errs...)
}

// runThread is one generator thread of run.
func (g *generator) runThread(stop <-chan struct{}, maxDur time.Duration) (genReport, error) {
	var rep genReport
	err := nettest.InNamespace(g.t.GenNS, func() error {
		if err := pinSelf(genCPU); err != nil {
			return err
		}
		md := &xdpMD{DataEnd: uint32(len(g.frame)), IngressIfindex: genIfindex}
		cpu0, err := selfCPU()
		if err != nil {
			return err
		}
		start := time.Now()
		deadline := start.Add(maxDur)
	loop:
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				break loop
			default:
			}
			_, _, err := progRun(g.prog, g.frame, md, liveRepeat, bpfFTestXDPLiveFrames, liveBatch)
			if errors.Is(err, errInterrupted) {
				continue
			}
			if err != nil {
				return fmt.Errorf("generator: %w", err)
			}
			rep.Frames += liveRepeat
		}
		rep.Elapsed = time.Since(start)
		cpu1, err := selfCPU()
		rep.CPU = cpu1 - cpu0
		return err
	})
	return rep, err
}

// pinSelf pins the calling OS thread (locked by the caller) to cpu.
func pinSelf(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// selfCPU returns the calling thread's CPU time.
func selfCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)), nil
}
