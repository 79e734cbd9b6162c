package dataplane

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// ctExpireMap is the name of the --ctexpire ranges' table (bpf/ctexpire.h):
// compiler.MaxCtExpires per generation slot.
const ctExpireMap = "xfw_ctexpire"

// bpfCtExpire mirrors struct xfw_ctexpire.
type bpfCtExpire struct {
	Min, Max uint32
	Invert   uint32
	Pad      uint32
}

// fillCtExpires writes the generation's --ctexpire ranges into slot's part
// of the table (its probes name them by index).
func fillCtExpires(cur *state, slot uint32, ranges []compiler.CtExpire) error {
	if len(ranges) == 0 {
		return nil
	}
	m := cur.maps[ctExpireMap]
	if m == nil {
		return fmt.Errorf("--ctexpire ranges: the loaded programs have no %s map", ctExpireMap)
	}
	for i, r := range ranges {
		v := bpfCtExpire{Min: r.Min, Max: r.Max}
		if r.Invert {
			v.Invert = 1
		}
		if err := m.Put(slot*compiler.MaxCtExpires+uint32(i), v); err != nil {
			return fmt.Errorf("--ctexpire ranges: %w", err)
		}
	}
	return nil
}
