package ipset

import (
	"encoding/binary"
	"fmt"
)

// A journal carries member changes of existing sets from one invocation to
// the next without encoding the collection again: a store keeps the
// collection's encoding (MarshalBinary) as a snapshot, appends the record
// of each commit that only changed members (JournalRecord), and replays
// the records after decoding the snapshot (ReplayJournal). Each change is
// an operation byte, the set's ID (uvarint) and, for a put or a delete,
// the entry in MarshalBinary's encoding.
const (
	journalPut    = 1 // add the entry, or replace the member with its element
	journalDelete = 2 // delete the member with the entry's element
	journalFlush  = 3 // delete every member
)

// JournalRecord returns the changes from old to new as a journal record,
// or ok false when they are not member changes of sets both hold under the
// same names (create, destroy, rename, swap, list:set members), which need
// a new snapshot. new must be a Clone of old, as Run commits: the record
// then costs the changes, not the sets. An empty record means no member
// changed.
func JournalRecord(old, new *Sets) (rec []byte, ok bool) {
	if new.base == 0 || new.base != old.gen || new.nextID != old.nextID || len(new.slots) != len(old.slots) {
		return nil, false
	}
	for i, s := range new.slots {
		o := old.slots[i]
		if (s == nil) != (o == nil) || s != nil && (s.ID != o.ID || s.Name != o.Name) {
			return nil, false
		}
	}
	d := ComputeDiff(old, new)
	if len(d.Created) > 0 || len(d.Destroyed) > 0 || len(d.Renamed) > 0 {
		return nil, false
	}
	for _, ch := range d.Changed {
		if ch.Set.Type == ListSet {
			return nil, false
		}
		if ch.Flushed {
			rec = append(rec, journalFlush)
			rec = binary.AppendUvarint(rec, ch.Set.ID)
		}
		for _, e := range ch.Deleted {
			rec = append(rec, journalDelete)
			rec = binary.AppendUvarint(rec, ch.Set.ID)
			rec = appendEntry(rec, &Entry{Elem: e})
		}
		for i := range ch.Added {
			rec = append(rec, journalPut)
			rec = binary.AppendUvarint(rec, ch.Set.ID)
			rec = appendEntry(rec, &ch.Added[i])
		}
	}
	return rec, true
}

// ReplayJournal applies journal records (JournalRecord's, one after the
// other) to ss, the collection decoded from the snapshot they follow.
func (ss *Sets) ReplayJournal(j []byte) error {
	byID := map[uint64]*Set{}
	for _, s := range ss.slots {
		if s != nil {
			byID[s.ID] = s
		}
	}
	d := &decoder{b: j}
	for n := 0; len(d.b) > 0; n++ {
		op, id := d.byte(), d.uvarint()
		s := byID[id]
		if d.err == nil && (s == nil || s.Type == ListSet) {
			return fmt.Errorf("journal change %d: no set with ID %d", n, id)
		}
		var e Entry
		switch op {
		case journalFlush:
			s.flush()
		case journalPut:
			d.entry(&e)
			if d.err == nil {
				s.put(e, -1)
			}
		case journalDelete:
			d.entry(&e)
			if d.err == nil {
				s.remove(e.Elem)
			}
		default:
			if d.err == nil {
				return fmt.Errorf("journal change %d: unknown operation %d", n, op)
			}
		}
		if d.err != nil {
			return fmt.Errorf("journal change %d: %w", n, d.err)
		}
	}
	return nil
}

// DecodeImage returns the sets of a stored image: the snapshot
// (MarshalBinary's encoding, read in place from snapshot) with the journal
// of the changes committed since (JournalRecord's records) replayed. The
// snapshot's bytes must not change while the sets are in use.
func DecodeImage(snapshot Pages, journal []byte) (*Sets, error) {
	ss := NewSets()
	if err := ss.UnmarshalPages(snapshot); err != nil {
		return nil, fmt.Errorf("decode the network namespace's sets: %w", err)
	}
	if err := ss.ReplayJournal(journal); err != nil {
		return nil, fmt.Errorf("replay the network namespace's set changes: %w", err)
	}
	return ss, nil
}
