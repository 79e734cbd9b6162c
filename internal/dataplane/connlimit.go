package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// The connlimit matches' lists (bpf/connlimit.h): one map per namespace,
// xfw_connlimit, keyed by generation slot, match and masked address. A
// generation built in a slot starts with none of its own, as a table
// replacement gives the kernel's connlimit matches new, empty lists; one
// that compiles the running rules again (Update.SameRules: no table
// replacement the kernel would see) starts with copies of the running
// generation's.

// connlimitMap is the name of the lists' map.
const connlimitMap = "xfw_connlimit"

// bpfConnlimitKey mirrors struct xfw_connlimit_key.
type bpfConnlimitKey struct {
	Hi, Lo uint64
	Slot   uint32
	Index  uint16
	Fam    uint8
	Pad    uint8
}

// resetConnlimits deletes the lists a previous generation of slot left
// and, when u compiles the running rules again, copies the running
// slot's lists to slot. Lists the running generation changes between the
// copy and the flip lose those changes (a connection counted then is
// counted again when its packets next meet the match).
func resetConnlimits(cur *state, slot uint32, runSlot int64, u *Update) error {
	m := cur.maps[connlimitMap]
	if m == nil {
		return nil
	}
	var stale, running []bpfConnlimitKey
	var k bpfConnlimitKey
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		switch {
		case k.Slot == slot:
			stale = append(stale, k)
		case u.SameRules && runSlot >= 0 && int64(k.Slot) == runSlot:
			running = append(running, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("connlimit lists: list them: %w", err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("connlimit lists: delete one of slot %d: %w", slot, err)
		}
	}
	for _, k := range running {
		if err := m.Lookup(k, &v); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return fmt.Errorf("connlimit lists: read a running one: %w", err)
		}
		k.Slot = slot
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("connlimit lists: copy a running one: %w", err)
		}
	}
	return nil
}
