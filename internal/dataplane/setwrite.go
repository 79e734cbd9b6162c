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

// SetWriteMetaKeys is the number of a written set's meta keys beyond
// SetMetaWords.
const SetWriteMetaKeys = 1

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
	for _, e := range entries {
		if e.Expires == 0 || e.Expires > now {
			continue
		}
		var cur bpfSetVal
		if err := h.m.Lookup(bpfSetKey(e.Key), &cur); err != nil || cur.Expires != e.Expires {
			continue
		}
		if err := h.m.Delete(bpfSetKey(e.Key)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set lookup %d (%s): delete an expired entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return nil
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
