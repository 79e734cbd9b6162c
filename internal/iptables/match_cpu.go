package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The cpu match (libxt_cpu): [!] --cpu N, mandatory.

// cpuOptCPU is the cpu match's only option id.
const cpuOptCPU = 0

// cpuExt is the cpu match module.
var cpuExt = registerMatch(&extension{
	name: "cpu",
	x6: []x6opt{
		{name: "cpu", id: cpuOptCPU, typ: xtUint32, flags: xtInvert | xtMand, max: 1<<32 - 1},
	},
	newMatch: func(*parseCtx) matchState { return &cpuState{} },
})

// cpuState is one cpu match being parsed.
type cpuState struct {
	m     ir.CPUMatch
	flags x6flags
}

// parse implements matchState.
func (s *cpuState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(cpuExt, o.id, invert)
	if f != nil {
		return f
	}
	v, ok := xtStrtoui(arg, x.min, x.max)
	if !ok {
		return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", cpuExt.name, x.name, x.min, x.max)
	}
	s.m = ir.CPUMatch{CPU: uint32(v), Invert: invert}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *cpuState) final(*parseCtx) *failure { return s.flags.fcheck(cpuExt) }

// build implements matchState.
func (s *cpuState) build() ir.Match { m := s.m; return &m }

// writeCPU prints a cpu match's options (cpu_save).
func writeCPU(b *strings.Builder, m *ir.CPUMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	fmt.Fprintf(b, " --cpu %d", m.CPU)
}

// cpuListing is a cpu match in iptables -L's listing (cpu_print).
func cpuListing(m *ir.CPUMatch) string {
	if m.Invert {
		return fmt.Sprintf(" cpu ! %d", m.CPU)
	}
	return fmt.Sprintf(" cpu %d", m.CPU)
}
