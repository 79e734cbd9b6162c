package ir

// CPUMatch is -m cpu [!] --cpu N (xt_cpu): the packet is processed on CPU
// N (or, inverted, on another one).
type CPUMatch struct {
	CPU    uint32
	Invert bool
}

// ModuleName implements Match.
func (*CPUMatch) ModuleName() string { return "cpu" }

// CloneMatch implements Match.
func (m *CPUMatch) CloneMatch() Match { c := *m; return &c }

// tagCPU is the cpu match's tag in the binary form (codec.go), away from
// the tags numbered in a row there.
const tagCPU = 85

// cpu encodes a cpu match.
func (e *encoder) cpu(m *CPUMatch) {
	e.u8(tagCPU)
	e.uv(uint64(m.CPU))
	e.flags(m.Invert)
}

// cpu decodes what encoder.cpu wrote after the tag.
func (d *decoder) cpu() *CPUMatch {
	m := &CPUMatch{CPU: d.u32()}
	d.flags(&m.Invert)
	return m
}
