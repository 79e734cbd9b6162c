package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// Indexes of xfw_ct_stats (enum xfw_ctstat, bpf/common.h).
const (
	ctStatInsert      = 0 // XFW_CTSTAT_INSERT
	ctStatNewGone     = 1 // XFW_CTSTAT_NEW_GONE
	ctStatPromote     = 2 // XFW_CTSTAT_PROMOTE
	ctStatMainGone    = 3 // XFW_CTSTAT_MAIN_GONE
	ctStatPromoteFull = 4 // XFW_CTSTAT_PROMOTE_FULL
	ctStatUserNew     = 5 // XFW_CTSTAT_USER_NEW
	ctStatUserMain    = 6 // XFW_CTSTAT_USER_MAIN
	ctStatLockTimeout = 7 // XFW_CTSTAT_LOCK_TIMEOUT
	numCTStats        = 8 // XFW_NCTSTATS
)

// CTStats are the connection tracker's counters since xfw was loaded in
// the namespace.
type CTStats struct {
	// Inserts are the connections entered in the table of new ones.
	Inserts uint64
	// Assured are the connections moved to the table of assured ones.
	Assured uint64
	// AssuredFull are the moves refused because that table was full of
	// live connections (the connection stays in the table of new ones).
	AssuredFull uint64
	// RemovedByTracker are the entries the data plane removed (expired,
	// closed, moved); RemovedByUser those xfw conntrack -D and -F removed.
	RemovedByTracker, RemovedByUser uint64
	// LockTimeouts are the entry locks the data plane gave up waiting
	// for (the holder on another CPU for milliseconds): each let an update
	// go ahead unserialised, which can lose another CPU's.
	LockTimeouts uint64
	// Evictions are the new connections the table of new ones (an LRU
	// table) dropped to make room: what entered it and is neither there
	// nor removed by anyone.
	Evictions uint64
}

// Stats reads the tracker's counters and counts the entries present (the
// evictions are what is missing). ErrNoConntrack when the running build
// has no counters.
func (t *CTTables) Stats() (CTStats, error) {
	if t.stats == nil {
		return CTStats{}, ErrNoConntrack
	}
	var v [numCTStats]uint64
	for i := range v {
		n, err := t.stat(uint32(i))
		if i == ctStatLockTimeout && errors.Is(err, ebpf.ErrKeyNotExist) {
			n, err = 0, nil // a running build from before the counter
		}
		if err != nil {
			return CTStats{}, err
		}
		v[i] = n
	}
	keys, _, err := readCTTable(t.maps[1])
	if err != nil {
		return CTStats{}, fmt.Errorf("read the table of new connections: %w", err)
	}
	st := CTStats{
		Inserts: v[ctStatInsert], Assured: v[ctStatPromote], AssuredFull: v[ctStatPromoteFull],
		RemovedByTracker: v[ctStatNewGone] + v[ctStatMainGone],
		RemovedByUser:    v[ctStatUserNew] + v[ctStatUserMain],
		LockTimeouts:     v[ctStatLockTimeout],
	}
	// Counted in this order, a connection inserted while the table is read
	// can only lower the figure; never below zero.
	if gone := v[ctStatNewGone] + v[ctStatUserNew] + uint64(len(keys)); v[ctStatInsert] > gone {
		st.Evictions = v[ctStatInsert] - gone
	}
	return st, nil
}

// stat sums statistic i over the CPUs.
func (t *CTTables) stat(i uint32) (uint64, error) {
	var per []uint64
	if err := t.stats.Lookup(i, &per); err != nil {
		return 0, fmt.Errorf("read %s[%d]: %w", ctStatsMap, i, err)
	}
	var n uint64
	for _, x := range per {
		n += x
	}
	return n, nil
}

// countUserDeletes adds n deletions by user space from table (0: assured,
// 1: new) to the statistics the programs never write (under xfw's lock,
// so no other writer races).
func (t *CTTables) countUserDeletes(table int, n uint64) error {
	if t.stats == nil || n == 0 {
		return nil
	}
	i := uint32(ctStatUserMain)
	if table == 1 {
		i = ctStatUserNew
	}
	var per []uint64
	if err := t.stats.Lookup(i, &per); err != nil {
		return fmt.Errorf("read %s[%d]: %w", ctStatsMap, i, err)
	}
	if len(per) == 0 {
		return errors.New("connection statistics: no CPU")
	}
	per[0] += n
	if err := t.stats.Update(i, per, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("count deleted connections: %w", err)
	}
	return nil
}
