package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// bpfProbe mirrors struct xfw_probe: one of a generation's probes
// (compiler.Generation.Probes), element k of the slot's xfw_o_probe.
type bpfProbe struct {
	Kind uint32
	Arg  uint32
}

// fillProbes writes a generation's probes into its xfw_o_probe map.
func fillProbes(m *ebpf.Map, probes []compiler.Probe) error {
	err := putArray(m, len(probes), func(i int) bpfProbe {
		return bpfProbe{Kind: uint32(probes[i].Kind), Arg: probes[i].Arg}
	})
	if err != nil {
		return fmt.Errorf("fill probes: %w", err)
	}
	return nil
}
