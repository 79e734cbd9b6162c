package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Sets the SET target writes (bpf/settarget.h): their tables carry the
// write parameters under a meta key of their own (SetWriteMetaEntry), and
// the members the data plane added or deleted are read back (Entries) and
// moved into the stored sets by `xfw ipset` commands and ruleset changes
// (internal/settable TakeWrites).

// setWriteMetaPort is the Port of a written set's write parameters' meta
// key (XFW_SETW_META), after the prefix-length words.
const setWriteMetaPort = SetMetaWords

// Write parameters' Answer bits (XFW_SETW_*).
const (
	setWriteTimeout = 1 // the set has timeouts
	setWriteNet     = 2 // hash:net, hash:net,port: the longest prefix length present
	setWritePort    = 4 // hash:ip,port, hash:net,port: the protocol and port too
)

// SetWriteMetaEntry returns the meta entry of a written set's table: the
// set's default timeout in seconds (hasTimeout: the set has timeouts),
// whether it is a net type (its elements take the longest prefix length
// present), whether its elements have a port (hash:ip,port,
// hash:net,port) and, for the others, the prefix length of its elements
// (hash:ip's netmask, or the address length).
func SetWriteMetaEntry(defaultTimeout uint32, hasTimeout, net, port bool, plen uint8) SetHashEntry {
	e := SetHashEntry{Key: SetHashKey{Port: setWriteMetaPort, Plen: SetMetaPlen}, Expires: uint64(defaultTimeout), Aux: uint32(plen)}
	if hasTimeout {
		e.Answer |= setWriteTimeout
	}
	if net {
		e.Answer |= setWriteNet
	}
	if port {
		e.Answer |= setWritePort
	}
	return e
}

// setWriteMarkDP is the Port of the first of a written set's prefix-length
// words the data plane marks (XFW_SETW_MDP): the data plane ORs a length
// its SET target adds into word setWriteMarkDP + plen/64 atomically, the
// control plane rewrites its own words (SetMetaEntries, MarkPlens) whole,
// and the written set's lookups OR the two. With one word for both
// writers, a bit the data plane ORs between the control plane's read and
// write of the word would be lost, and the set would miss the members of
// that length.
const setWriteMarkDP = 0x300

// SetWriteMarkEntries returns the data plane's prefix-length words of a
// written set's table (setWriteMarkDP), none marked.
func SetWriteMarkEntries() []SetHashEntry {
	out := make([]SetHashEntry, SetMetaWords)
	for w := range out {
		out[w] = SetHashEntry{Key: SetHashKey{Port: setWriteMarkDP + uint16(w), Plen: SetMetaPlen}}
	}
	return out
}

// SetWriteMetaKeys is the number of a written set's meta keys beyond
// SetMetaWords, besides a net type's counts (SetWriteCountKeys): the
// write parameters (SetWriteMetaEntry) and the data plane's prefix-length
// words (SetWriteMarkEntries).
const SetWriteMetaKeys = 1 + SetMetaWords

// Ports of the meta keys of a written net type's counts of elements per
// prefix length (XFW_SETW_NDP, XFW_SETW_NCP): the data plane's (its adds
// less its deletes, atomic adds) and the control plane's (written only by
// a command holding xfw's lock), port base + prefix length, the count
// (signed) in Expires. The data plane takes the longest length whose two
// counts sum above 0 for an element (bpf/settarget.h).
const (
	setWriteCountDP = 0x100
	setWriteCountCP = 0x200
)

// SetWriteCountKeys is the number of count keys of a written net type's
// table of addresses of maxPlen bits (SetWriteCountEntries).
func SetWriteCountKeys(maxPlen uint8) int { return 2 * (int(maxPlen) + 1) }

// SetWriteCountEntries returns the count keys of a written net type's
// table of addresses of maxPlen bits holding counts[l] elements of prefix
// length l: every length has both keys (the table's room counts them), the
// data plane's counts start at 0.
func SetWriteCountEntries(maxPlen uint8, counts *[129]int64) []SetHashEntry {
	var out []SetHashEntry
	for l := 0; l <= int(maxPlen); l++ {
		out = append(out,
			SetHashEntry{Key: SetHashKey{Port: setWriteCountDP + uint16(l), Plen: SetMetaPlen}},
			SetHashEntry{Key: SetHashKey{Port: setWriteCountCP + uint16(l), Plen: SetMetaPlen}, Expires: uint64(counts[l])})
	}
	return out
}

// addCounts adds d[l] to the control plane's count of prefix length l of
// a written net type's table (nothing for a table without counts).
func (h *LiveSetHash) addCounts(d *[129]int64) error {
	for l, n := range d {
		if n == 0 {
			continue
		}
		k := bpfSetKey{Port: setWriteCountCP + uint16(l), Plen: SetMetaPlen}
		var cur bpfSetVal
		if err := h.m.Lookup(k, &cur); errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("set lookup %d (%s): read its count of /%d: %w", h.Info.Index, h.Info.Set, l, err)
		}
		cur.Expires = uint64(int64(cur.Expires) + n)
		if err := h.m.Put(k, cur); err != nil {
			return fmt.Errorf("set lookup %d (%s): write its count of /%d: %w", h.Info.Index, h.Info.Set, l, err)
		}
	}
	return nil
}

// countPlen adds n to d[plen] (an element's prefix length, ≤ 128).
func countPlen(d *[129]int64, plen uint8, n int64) {
	if int(plen) < len(d) {
		d[plen] += n
	}
}

// counted reports whether the table counts its elements per prefix length
// (a written net type's).
func (h *LiveSetHash) counted() bool {
	var v bpfSetVal
	return h.m.Lookup(bpfSetKey{Port: setWriteCountCP, Plen: SetMetaPlen}, &v) == nil
}

// Entries returns the table's element entries (meta keys left out).
func (h *LiveSetHash) Entries() ([]SetHashEntry, error) {
	var k bpfSetKey
	var v bpfSetVal
	var out []SetHashEntry
	it := h.m.Iterate()
	for it.Next(&k, &v) {
		if k.Plen == SetMetaPlen {
			continue
		}
		out = append(out, SetHashEntry{Key: SetHashKey(k), Expires: v.Expires, Answer: v.Answer, Aux: v.Aux, Ctr: v.Ctr})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("set lookup %d (%s): read its entries: %w", h.Info.Index, h.Info.Set, err)
	}
	return out, nil
}

// DeleteExpired deletes entries that timed out at monotonic time now (ns)
// unless they changed since read (an add refreshed them): the data plane
// skips them, and they hold room a new member needs (a full set).
func (h *LiveSetHash) DeleteExpired(entries []SetHashEntry, now uint64) error {
	var gone [129]int64
	for _, e := range entries {
		if e.Expires == 0 || e.Expires > now {
			continue
		}
		var cur bpfSetVal
		if err := h.m.Lookup(bpfSetKey(e.Key), &cur); err != nil || cur.Expires != e.Expires {
			continue
		}
		if err := h.m.Delete(bpfSetKey(e.Key)); err == nil {
			countPlen(&gone, e.Key.Plen, -1)
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set lookup %d (%s): delete an expired entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return h.addCounts(&gone)
}

// RunningSetWrites reports whether a running generation writes sets: its
// configuration has a lookup after its set conditions' (slotConfig), read
// without the generation's metadata, which a large ruleset makes costly.
func RunningSetWrites() (bool, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return false, err
	}
	defer cur.Close()
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		if !cur.hasFamily(fam) {
			continue
		}
		fc := &cur.cfgs[cur.slot(fam)]
		for k := int(fc.NSetLk); k < maxSetLookups; k++ {
			if fc.SetLk[k].Kind != SetKindDXR {
				return true, nil
			}
		}
	}
	return false, nil
}

// SameTable reports whether h and o are the one map (a table the next
// generation took over), false when either's identity cannot be read.
func (h *LiveSetHash) SameTable(o *LiveSetHash) bool {
	a, errA := h.m.Info()
	b, errB := o.m.Info()
	if errA != nil || errB != nil {
		return false
	}
	ida, okA := a.ID()
	idb, okB := b.ID()
	return okA && okB && ida == idb
}

// PutAbsent adds the entries that are not in the table, leaving those
// there (newer than these) as they are; a table with counts has each
// added entry counted first (see Put).
func (h *LiveSetHash) PutAbsent(entries []SetHashEntry) error {
	counted := h.counted()
	var add, there [129]int64
	if counted {
		for _, e := range entries {
			countPlen(&add, e.Key.Plen, 1)
		}
		if err := h.addCounts(&add); err != nil {
			return err
		}
	}
	for _, e := range entries {
		err := h.m.Update(bpfSetKey(e.Key), bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux, Ctr: e.Ctr}, ebpf.UpdateNoExist)
		if err != nil {
			countPlen(&there, e.Key.Plen, -1)
		}
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			h.addCounts(&there)
			return fmt.Errorf("set lookup %d (%s): add an entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	if !counted {
		return nil
	}
	return h.addCounts(&there)
}
