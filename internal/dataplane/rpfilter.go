package dataplane

// Reverse-path filtering as the data plane needs to know it: whether the
// kernel's input routing may refuse a packet whose source routes back by
// another device (net.ipv4.conf.*.rp_filter). A reply nat OUTPUT's DNAT
// translated back goes on to the stack on the device it arrived on, where
// input routing checks its new source, only when that check cannot refuse
// it (bpf/nat_out.h, xfw_nat_in_direct).

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
)

// rpFilterGlob matches every device's rp_filter sysctl, "all" and
// "default" (the value of devices created later) among them.
const rpFilterGlob = "net/ipv4/conf/*/rp_filter"

// readRPFilterOn returns 1 when rp_filter is on (strict or loose) for any
// device of the namespace, for "all" (the kernel filters by the larger
// of "all" and the device's own) or for "default", else 0.
func readRPFilterOn() (uint32, error) {
	names, kept, err := rpFilterSysctls()
	if err != nil {
		return 0, err
	}
	on, gone, err := anyRPFilterOn(names)
	if (err != nil || gone) && kept {
		// A device removed since the listing kept (its notification
		// queued for the next command): list them afresh.
		rpFilterKept.forget()
		if names, _, err = rpFilterSysctls(); err == nil {
			on, _, err = anyRPFilterOn(names)
		}
	}
	return on, err
}

// anyRPFilterOn is readRPFilterOn for the sysctls names (relative to
// sysctlProcPrefix). A device deleted since the listing (its sysctls gone)
// filters nothing: it is skipped and reported in gone.
func anyRPFilterOn(names []string) (on uint32, gone bool, err error) {
	if len(names) == 0 {
		return 1, false, nil // IPv4 without its sysctls: assumed on
	}
	for _, name := range names {
		v, err := readSysctlInt(name)
		if errors.Is(err, fs.ErrNotExist) {
			gone = true
			continue
		}
		if err != nil {
			return 0, gone, err
		}
		if v != 0 {
			return 1, gone, nil
		}
	}
	return 0, gone, nil
}

// rpFilterListing is a listing of the rp_filter sysctls kept in a
// process that follows the links (WatchNetwork: the agent), with the
// watch's epoch before it was taken: a device's sysctls come and go with
// it (its registration, renaming or removal is notified as a link
// change), so while the epoch stays the listing does (listing
// /proc/sys/net/ipv4/conf took 0.25 ms of every served command).
type rpFilterListing struct {
	mu    sync.Mutex
	names []string
	epoch uint64
	valid bool
}

// rpFilterKept is the process's kept listing.
var rpFilterKept rpFilterListing

// forget drops the kept listing.
func (k *rpFilterListing) forget() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.valid = false
}

// rpFilterSysctls returns the rp_filter sysctls' names, relative to
// sysctlProcPrefix: the kept listing when the links have not changed
// since it was taken (kept true), else a new one.
func rpFilterSysctls() (names []string, kept bool, err error) {
	epoch, watching := netFacts.currentEpoch()
	k := &rpFilterKept
	k.mu.Lock()
	defer k.mu.Unlock()
	if watching && k.valid && k.epoch == epoch {
		return k.names, true, nil
	}
	paths, err := filepath.Glob(sysctlProcPrefix + rpFilterGlob)
	if err != nil {
		return nil, false, fmt.Errorf("rp_filter sysctls: %w", err)
	}
	names = make([]string, 0, len(paths))
	for _, p := range paths {
		rel, err := filepath.Rel(sysctlProcPrefix, p)
		if err != nil {
			return nil, false, fmt.Errorf("rp_filter sysctl %s: %w", p, err)
		}
		names = append(names, rel)
	}
	k.names, k.epoch, k.valid = names, epoch, watching
	return names, false, nil
}
