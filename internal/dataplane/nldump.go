package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// dumpAttempts bounds how often a netlink dump the kernel marked
// interrupted is asked again. The kernel sets NLM_F_DUMP_INTR when the
// table (links, addresses, routes) changed while it was dumped, and the
// netlink package then returns what it read with ErrDumpInterrupted: a
// list that may lack an entry or hold a stale one. A host creating
// containers changes its tables in bursts; each new dump is consistent
// unless the burst goes on, so a few attempts suffice, and a table that
// changes through all of them is an error (never a partial list taken for
// the whole).
const dumpAttempts = 10

// consistentDump runs dump until the kernel reports an uninterrupted dump
// (at most dumpAttempts times) and returns its result; what names the
// table in the error when every attempt was interrupted.
func consistentDump[T any](what string, dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpAttempts {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	var zero T
	return zero, fmt.Errorf("%s changed during each of %d dumps: %w", what, dumpAttempts, err)
}

// consistentDumpErr is consistentDump for a dump that delivers its
// results itself (an iterator's callback, which must start afresh at each
// attempt).
func consistentDumpErr(what string, dump func() error) error {
	_, err := consistentDump(what, func() (struct{}, error) { return struct{}{}, dump() })
	return err
}

// ListLinks returns the namespace's network devices from a dump no change
// interrupted (netlink.LinkList).
func ListLinks() ([]netlink.Link, error) {
	return consistentDump("the device list", netlink.LinkList)
}

// listAddrs is netlink.AddrList from an uninterrupted dump.
func listAddrs(link netlink.Link, family int) ([]netlink.Addr, error) {
	return consistentDump("the address list", func() ([]netlink.Addr, error) { return netlink.AddrList(link, family) })
}

// listRoutes is netlink.RouteListFiltered from an uninterrupted dump.
func listRoutes(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	return consistentDump("the routing table", func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(family, filter, mask)
	})
}

// listQdiscs is netlink.QdiscList from an uninterrupted dump.
func listQdiscs(link netlink.Link) ([]netlink.Qdisc, error) {
	return consistentDump("the qdisc list", func() ([]netlink.Qdisc, error) { return netlink.QdiscList(link) })
}

// listFilters is netlink.FilterList from an uninterrupted dump.
func listFilters(link netlink.Link, parent uint32) ([]netlink.Filter, error) {
	return consistentDump("the tc filter list", func() ([]netlink.Filter, error) { return netlink.FilterList(link, parent) })
}

// listXfrmPolicies is netlink.XfrmPolicyList from an uninterrupted dump.
func listXfrmPolicies(family int) ([]netlink.XfrmPolicy, error) {
	return consistentDump("the IPsec policy list", func() ([]netlink.XfrmPolicy, error) { return netlink.XfrmPolicyList(family) })
}
