package dataplane

// Reverse-path filtering as the data plane needs to know it: whether the
// kernel's input routing may refuse a packet whose source routes back by
// another device (net.ipv4.conf.*.rp_filter). A reply nat OUTPUT's DNAT
// translated back goes on to the stack on the device it arrived on, where
// input routing checks its new source, only when that check cannot refuse
// it (bpf/nat_out.h, xfw_nat_in_direct).

import (
	"fmt"
	"path/filepath"
)

// rpFilterGlob matches every device's rp_filter sysctl, "all" and
// "default" (the value of devices created later) among them.
const rpFilterGlob = "net/ipv4/conf/*/rp_filter"

// readRPFilterOn returns 1 when rp_filter is on (strict or loose) for any
// device of the namespace, for "all" (the kernel filters by the larger
// of "all" and the device's own) or for "default", else 0.
func readRPFilterOn() (uint32, error) {
	names, err := filepath.Glob(sysctlProcPrefix + rpFilterGlob)
	if err != nil {
		return 0, fmt.Errorf("rp_filter sysctls: %w", err)
	}
	if len(names) == 0 {
		return 1, nil // IPv4 without its sysctls: assumed on
	}
	for _, name := range names {
		rel, err := filepath.Rel(sysctlProcPrefix, name)
		if err != nil {
			return 0, fmt.Errorf("rp_filter sysctl %s: %w", name, err)
		}
		v, err := readSysctlInt(rel)
		if err != nil {
			return 0, err
		}
		if v != 0 {
			return 1, nil
		}
	}
	return 0, nil
}
