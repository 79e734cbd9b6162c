package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync/atomic"

	"github.com/cilium/ebpf"
)

// The namespace's recent lists read and changed from user space, as
// /proc/net/xt_recent/NAME lets the kernel's be (recent_seq_show,
// recent_mt_proc_write): list an entry's timestamps, add an address (a
// new entry with TTL 0, or a new timestamp of the one there), remove one,
// flush the list. The address is taken as written: the list's mask is not
// applied (the kernel's write does not either).

// ErrNoRecentList says the namespace has no recent list of that name (the
// kernel's ENOENT opening /proc/net/xt_recent/NAME).
var ErrNoRecentList = errors.New("no such recent list")

// recentListTot is xt_recent's ip_list_tot (XFW_RECENT_LIST_TOT).
const recentListTot = 100

// RecentEntry is one entry of a recent list (struct recent_entry).
type RecentEntry struct {
	// Addr is the (masked) address.
	Addr netip.Addr
	// TTL is the TTL of the packet that last stamped it (0: none).
	TTL uint8
	// Index is the ring slot the next timestamp takes (the kernel's
	// "oldest_pkt").
	Index uint16
	// LastSeen is the last timestamp, Stamps all it holds in ring order
	// (jiffies, as the kernel's).
	LastSeen uint64
	Stamps   []uint64
	// lru orders the entries from least to most recently stamped.
	lru uint64
}

// RecentLists returns the names of the namespace's recent lists, sorted;
// none when xfw is not loaded.
func RecentLists() ([]string, error) {
	var names []string
	err := withRecent(func(t *recentTable) error {
		for i := range t.lists {
			if t.lists[i].Name[0] != 0 {
				names = append(names, listName(&t.lists[i]))
			}
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

// RecentEntries returns list name's entries, least recently stamped first.
func RecentEntries(name string) ([]RecentEntry, error) {
	var out []RecentEntry
	err := withRecentList(name, func(t *recentTable, id int) error {
		ring := atomic.LoadUint32(&t.lists[id].Ring)
		var k bpfRecentKey
		var e bpfRecentEnt
		it := t.ents.Iterate()
		for it.Next(&k, &e) {
			if int(k.List) != id {
				continue
			}
			n := min(int(e.NStamps), recentStamps)
			out = append(out, RecentEntry{
				Addr: recentAddr(&k), TTL: e.TTL, Index: e.Index,
				LastSeen: e.Stamps[uint32(e.Index-1)&ring&(recentStamps-1)],
				Stamps:   append([]uint64(nil), e.Stamps[:n]...), lru: e.LRU,
			})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("recent list %s: %w", name, err)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].lru < out[j].lru })
	return out, err
}

// RecentAdd adds addr to list name, or stamps it again when it is there
// (the kernel's "+ADDR"): a full list first loses its least recently
// stamped entry.
func RecentAdd(name string, addr netip.Addr) error {
	now, err := Jiffies()
	if err != nil {
		return fmt.Errorf("recent list %s: %w", name, err)
	}
	return withRecentList(name, func(t *recentTable, id int) error {
		l := &t.lists[id]
		k := recentKey(id, addr)
		var e bpfRecentEnt
		if err := t.ents.LookupWithFlags(k, &e, ebpf.LookupLock); err == nil {
			// recent_entry_update, with the TTL the kernel's write
			// leaves alone.
			e.Index &= uint16(atomic.LoadUint32(&l.Ring))
			e.Stamps[e.Index&(recentStamps-1)] = now
			e.Index++
			e.NStamps = max(e.NStamps, e.Index)
			e.LRU = atomic.AddUint64(&l.Clock, 1) - 1
			return recentPut(t.ents, k, &e, ebpf.UpdateLock|ebpf.UpdateExist, name)
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("recent list %s: %w", name, err)
		}
		if atomic.LoadUint32(&l.Entries) >= recentListTot {
			if err := t.evictOldest(id); err != nil {
				return err
			}
		}
		e = bpfRecentEnt{Index: 1, NStamps: 1, LRU: atomic.AddUint64(&l.Clock, 1) - 1}
		e.Stamps[0] = now
		if err := recentPut(t.ents, k, &e, ebpf.UpdateNoExist, name); err != nil {
			return err
		}
		atomic.AddUint32(&l.Entries, 1)
		return nil
	})
}

// RecentRemove removes addr from list name (the kernel's "-ADDR"); an
// address the list lacks is no error.
func RecentRemove(name string, addr netip.Addr) error {
	return withRecentList(name, func(t *recentTable, id int) error {
		return t.remove(id, recentKey(id, addr))
	})
}

// RecentFlush removes every entry of list name (the kernel's "/").
func RecentFlush(name string) error {
	return withRecentList(name, func(t *recentTable, id int) error { return t.flush(id) })
}

// withRecent runs fn with the namespace's list table; not at all when
// xfw is not loaded or its object has no lists.
func withRecent(fn func(t *recentTable) error) error {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	t, err := openRecent(cur)
	if err != nil || t == nil {
		return err
	}
	return fn(t)
}

// withRecentList runs fn with the table and the id of list name, or
// returns ErrNoRecentList.
func withRecentList(name string, fn func(t *recentTable, id int) error) error {
	found := false
	err := withRecent(func(t *recentTable) error {
		id := t.find(name)
		if id < 0 {
			return nil
		}
		found = true
		return fn(t, id)
	})
	if err == nil && !found {
		return fmt.Errorf("%s: %w", name, ErrNoRecentList)
	}
	return err
}

// evictOldest removes list id's least recently stamped entry
// (recent_entry_init on a full list).
func (t *recentTable) evictOldest(id int) error {
	var k, oldest bpfRecentKey
	var e bpfRecentEnt
	found := false
	var lru uint64
	it := t.ents.Iterate()
	for it.Next(&k, &e) {
		if int(k.List) == id && (!found || e.LRU < lru) {
			found, lru, oldest = true, e.LRU, k
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("recent list %d: %w", id, err)
	}
	if !found {
		return nil
	}
	return t.remove(id, oldest)
}

// remove deletes entry k of list id (recent_entry_remove).
func (t *recentTable) remove(id int, k bpfRecentKey) error {
	err := t.ents.Delete(k)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recent list %d: %w", id, err)
	}
	atomic.AddUint32(&t.lists[id].Entries, ^uint32(0))
	return nil
}

// recentPut writes entry k of list name.
func recentPut(m *ebpf.Map, k bpfRecentKey, e *bpfRecentEnt, flags ebpf.MapUpdateFlags, name string) error {
	if err := m.Update(k, e, flags); err != nil {
		return fmt.Errorf("recent list %s: %w", name, err)
	}
	return nil
}

// recentKey is the key of addr in list id (struct xfw_rc_key: IPv4 in the
// low 32 bits of lo, as a number).
func recentKey(id int, addr netip.Addr) bpfRecentKey {
	if addr.Is4() {
		a := addr.As4()
		return bpfRecentKey{List: uint32(id), Lo: uint64(binary.BigEndian.Uint32(a[:]))}
	}
	a := addr.As16()
	return bpfRecentKey{List: uint32(id), Fam: 1, Hi: binary.BigEndian.Uint64(a[:8]), Lo: binary.BigEndian.Uint64(a[8:])}
}

// recentAddr is the address of key k.
func recentAddr(k *bpfRecentKey) netip.Addr {
	if k.Fam == 0 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(k.Lo))
		return netip.AddrFrom4(a)
	}
	var a [16]byte
	binary.BigEndian.PutUint64(a[:8], k.Hi)
	binary.BigEndian.PutUint64(a[8:], k.Lo)
	return netip.AddrFrom16(a)
}
