package cli

import (
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
)

// The kernel's check of a limit match (iptables.Validate) depends on its
// CONFIG_HZ: the front end asks the data plane's reading of it, and keeps
// its default when there is none.
func init() {
	fallback := iptables.KernelHZ
	iptables.KernelHZ = func() uint32 {
		if hz, err := dataplane.HZ(); err == nil && hz > 0 {
			return uint32(hz)
		}
		return fallback()
	}
}
