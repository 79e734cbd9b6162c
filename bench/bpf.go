package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// The bench's own BPF programs are a few instructions each, written with
// cilium/ebpf's assembler so the bench needs no build step of its own.

// XDP return codes (enum xdp_action).
const (
	xdpDrop = 1
	xdpPass = 2
	xdpTX   = 3
)

// newSinkProgram returns an XDP program that counts every frame in a
// per-CPU counter (key 0) and drops it: sink's receiver.
func newSinkProgram() (*ebpf.Program, *ebpf.Map, error) {
	count, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xb_sink", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("create sink counter: %w", err)
	}
	insns := asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, count.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("out"),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_sink", Type: ebpf.XDP, Instructions: insns, License: "GPL"})
	if err != nil {
		count.Close()
		return nil, nil, fmt.Errorf("load sink program: %w", err)
	}
	return prog, count, nil
}

// tuple is one generated flow, as the generator program writes it into the
// frame: every field in network byte order, plus the IPv4 header checksum
// for these addresses (precomputed: the program does no arithmetic).
type tuple struct {
	Src, Dst     [4]byte
	Sport, Dport [2]byte
	IPCsum       [2]byte
	Proto        uint8
	Pad          uint8
}

// Offsets in the generated Ethernet + IPv4 (no options) + UDP frame.
const (
	offIPCsum = 14 + 10
	offIPSrc  = 14 + 12
	offIPDst  = 14 + 16
	offSport  = 14 + 20
	offDport  = 14 + 22
	offL4End  = 14 + 20 + 8
	offProto  = 14 + 9
	// offTCPEnd ends the TCP header's fixed part the generator writes
	// (acknowledgment number, data offset and flags; for UDP frames
	// these bytes are payload).
	offTCPEnd = 14 + 20 + 14
)

// maxTuples is the generator's tuple table size: a million flows for the
// million-address set benchmark (16 MiB).
const maxTuples = 1 << 20

// newGenProgram returns the traffic generator's XDP program and its maps.
// Run in BPF_F_TEST_XDP_LIVE_FRAMES mode (as xdp-trafficgen does), each run
// takes the next tuple round-robin from the tuples map (state[0] is the next
// index, state[1] the number of tuples), writes it into the frame and
// returns XDP_TX: the kernel sends the frame out of the context's ingress
// interface, gen's veth, to fw.
//
// The kernel recycles live frames through a page pool without restoring
// their contents, and fw's forwarding path rewrites the frames it forwards in
// place (MACs, TTL, checksum), so the program rewrites every header byte of
// template (the frame's Ethernet, IPv4 and UDP headers) each time: constant
// parts from the template, per-flow parts from the tuple.
func newGenProgram(template []byte) (*ebpf.Program, *ebpf.Map, *ebpf.Map, error) {
	if len(template) < offTCPEnd {
		return nil, nil, nil, fmt.Errorf("generator template of %d bytes, want at least %d", len(template), offTCPEnd)
	}
	state, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xb_gen_state", Type: ebpf.Array, KeySize: 4, ValueSize: 16, MaxEntries: 1})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create generator state: %w", err)
	}
	tuples, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xb_gen_tuples", Type: ebpf.Array, KeySize: 4,
		ValueSize: uint32(unsafe.Sizeof(tuple{})), MaxEntries: maxTuples})
	if err != nil {
		state.Close()
		return nil, nil, nil, fmt.Errorf("create generator tuples: %w", err)
	}
	copyField := func(off int16, to int16, size asm.Size) asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(asm.R5, asm.R0, off, size),
			asm.StoreMem(asm.R2, to, asm.R5, size),
		}
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// r0 = &state
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, state.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		// r7 = state.next; state.next = r7+1 < state.n ? r7+1 : 0
		asm.LoadMem(asm.R7, asm.R0, 0, asm.DWord),
		asm.LoadMem(asm.R9, asm.R0, 8, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R7),
		asm.Add.Imm(asm.R8, 1),
		asm.JLT.Reg(asm.R8, asm.R9, "store"),
		asm.Mov.Imm(asm.R8, 0),
		asm.StoreMem(asm.R0, 0, asm.R8, asm.DWord).WithSymbol("store"),
		// r0 = &tuples[r7]
		asm.StoreMem(asm.RFP, -8, asm.R7, asm.Word),
		asm.LoadMapPtr(asm.R1, tuples.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		// bounds check: data + offTCPEnd <= data_end
		asm.LoadMem(asm.R2, asm.R6, 0, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, 4, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, offTCPEnd),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
	}
	// Constant header bytes: [offset, size] regions of template (UDP's
	// length and checksum, or TCP's sequence number, then TCP's
	// acknowledgment number, data offset and flags).
	for _, r := range [][2]int{{0, 4}, {4, 4}, {8, 4}, {12, 2}, {14, 4}, {18, 4}, {22, 2}, {offL4End - 4, 4}, {offL4End, 4}, {offL4End + 4, 2}} {
		off, size := r[0], r[1]
		var v int64
		sz := asm.Word
		if size == 2 {
			v = int64(binary.NativeEndian.Uint16(template[off:]))
			sz = asm.Half
		} else {
			v = int64(int32(binary.NativeEndian.Uint32(template[off:])))
		}
		insns = append(insns, asm.StoreImm(asm.R2, int16(off), v, sz))
	}
	insns = append(insns, copyField(0, offIPSrc, asm.Word)...)
	insns = append(insns, copyField(4, offIPDst, asm.Word)...)
	insns = append(insns, copyField(8, offSport, asm.Half)...)
	insns = append(insns, copyField(10, offDport, asm.Half)...)
	insns = append(insns, copyField(12, offIPCsum, asm.Half)...)
	insns = append(insns, copyField(14, offProto, asm.Byte)...)
	insns = append(insns,
		asm.Mov.Imm(asm.R0, xdpTX),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_gen", Type: ebpf.XDP, Instructions: insns, License: "GPL"})
	if err != nil {
		state.Close()
		tuples.Close()
		return nil, nil, nil, fmt.Errorf("load generator program: %w", err)
	}
	return prog, state, tuples, nil
}

// sumPerCPU adds up key 0 of a per-CPU array of u64.
func sumPerCPU(m *ebpf.Map) (uint64, error) {
	var vals []uint64
	if err := m.Lookup(uint32(0), &vals); err != nil {
		return 0, fmt.Errorf("read %s: %w", m, err)
	}
	var s uint64
	for _, v := range vals {
		s += v
	}
	return s, nil
}

// xdpMD mirrors struct xdp_md, the XDP context given to BPF_PROG_TEST_RUN.
type xdpMD struct {
	Data, DataEnd, DataMeta      uint32
	IngressIfindex, RxQueueIndex uint32
	EgressIfindex                uint32
}

// progRunAttr mirrors the BPF_PROG_TEST_RUN part of union bpf_attr.
type progRunAttr struct {
	ProgFD      uint32
	Retval      uint32
	DataSizeIn  uint32
	DataSizeOut uint32
	DataIn      uint64
	DataOut     uint64
	Repeat      uint32
	Duration    uint32
	CtxSizeIn   uint32
	CtxSizeOut  uint32
	CtxIn       uint64
	CtxOut      uint64
	Flags       uint32
	CPU         uint32
	BatchSize   uint32
	_           uint32
}

// Kernel constants not in x/sys for this command.
const (
	bpfProgTestRun        = 10     // BPF_PROG_TEST_RUN
	bpfFTestXDPLiveFrames = 1 << 1 // BPF_F_TEST_XDP_LIVE_FRAMES
)

// errInterrupted is returned when a run was interrupted by a signal
// before it completed (the kernel does not say how far it got).
var errInterrupted = errors.New("BPF_PROG_TEST_RUN interrupted")

// progRun runs prog with BPF_PROG_TEST_RUN on frame with the XDP context
// ctx, repeat times, and returns the program's last return value and the
// kernel's mean duration of one run in nanoseconds. It calls the syscall
// directly (cilium/ebpf's Benchmark takes no context and Run reports no
// duration).
func progRun(prog *ebpf.Program, frame []byte, ctx *xdpMD, repeat uint32, flags, batch uint32) (retval uint32, nsPerRun uint32, err error) {
	attr := progRunAttr{
		ProgFD:     uint32(prog.FD()),
		DataSizeIn: uint32(len(frame)),
		DataIn:     uint64(uintptr(unsafe.Pointer(&frame[0]))),
		Repeat:     repeat,
		Flags:      flags,
		BatchSize:  batch,
	}
	if ctx != nil {
		attr.CtxSizeIn = uint32(unsafe.Sizeof(*ctx))
		attr.CtxIn = uint64(uintptr(unsafe.Pointer(ctx)))
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(frame)
	runtime.KeepAlive(ctx)
	if errno == unix.EINTR {
		return 0, 0, errInterrupted
	}
	if errno != 0 {
		return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
	}
	return attr.Retval, attr.Duration, nil
}
