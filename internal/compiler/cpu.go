package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The cpu match (xt_cpu): the CPU that processes the packet, which no
// classification field holds; a probe of kind ProbeCPU (probe.go) asks
// bpf_get_smp_processor_id in rule order. Its Arg is CPUArg.

// cpuInvertBit marks an inverted cpu match in CPUArg.
const cpuInvertBit = 1 << 31

// CPUArg packs a cpu match as its probe's argument (bpf/probe.h): the CPU
// in bits 0-30 (a larger number, which no CPU has, as 2^31-1, which none
// has either) and bit 31 for "!".
func CPUArg(m *ir.CPUMatch) uint32 {
	arg := min(m.CPU, cpuInvertBit-1)
	if m.Invert {
		arg |= cpuInvertBit
	}
	return arg
}
