package nettest

import (
	"fmt"
	"time"
)

// CheckRoot reports, as an error, what RequireRoot would fail a test with:
// nil when the process can build topologies (root, iproute2's ip, network
// namespaces, veth and AF_PACKET). The probe runs once per process.
func CheckRoot() error {
	requireOnce.Do(func() { requireErr = probe() })
	return requireErr
}

// Build builds a fresh topology like New, for programs rather than tests:
// nothing is registered for removal, so the caller must call Close (also on
// its error and signal paths; namespaces of processes that died are removed
// by CleanupStale, which Build runs once per base and process). It returns
// an error if the machine cannot build one (see CheckRoot) or if any step
// fails, after removing whatever it had created.
func Build(opts ...Option) (*Topology, error) {
	if err := CheckRoot(); err != nil {
		return nil, fmt.Errorf("nettest: this needs root and kernel network features: %w", err)
	}
	cfg := config{base: defaultBase}
	for _, o := range opts {
		o(&cfg)
	}
	if !baseRe.MatchString(cfg.base) {
		return nil, fmt.Errorf("nettest: invalid namespace base %q (want %s)", cfg.base, baseRe)
	}
	staleCleaned.Lock()
	if !staleCleaned.bases[cfg.base] {
		staleCleaned.bases[cfg.base] = true
		// Leftovers of dead processes only; a failure here is not fatal
		// (the new topology's names are unique anyway).
		_, _ = CleanupStale(cfg.base)
	}
	staleCleaned.Unlock()
	topo, err := build(cfg)
	if err != nil {
		return nil, fmt.Errorf("nettest: building topology: %w", err)
	}
	return topo, nil
}

// StartCaptureFunc is StartCaptureFor that hands every frame for which
// filter returns true (all frames if filter is nil) to fn, on the capture's
// goroutine, instead of recording it: for long captures that must not keep
// what they saw. fn must return quickly. Frames and Wait then see nothing;
// the caller must call Stop.
func StartCaptureFunc(ns, ifname string, d time.Duration, filter func(Captured) bool, fn func(Captured)) (*Capture, error) {
	return startCapture(ns, ifname, d, filter, fn)
}
