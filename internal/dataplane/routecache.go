package dataplane

import (
	"fmt"
	"os"
)

// routeFlushPath is the kernel's IPv4 route cache flush switch: any write
// bumps the namespace's route generation (rt_cache_flush), which the data
// plane's route cache (bpf/route_cache.h) checks on every packet.
const routeFlushPath = "/proc/sys/net/ipv4/route/flush"

// flushRouteCache invalidates the data plane's cached route lookups of the
// calling thread's namespace. The cache keeps what the local table map
// (xfw_local4) says of each flow's addresses: after fillLocal changes that
// map, no cached answer may outlive it.
func flushRouteCache() error {
	f, err := os.OpenFile(routeFlushPath, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("flush the route cache: %w", err)
	}
	if _, err := f.WriteString("1\n"); err != nil {
		f.Close()
		return fmt.Errorf("flush the route cache: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("flush the route cache: %w", err)
	}
	return nil
}
