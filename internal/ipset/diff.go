package ipset

// Diff is what changed between two collections, in the terms a data plane
// needs: sets are identified by ID (contents) and bound to names.
type Diff struct {
	// Created are the sets of new whose ID old does not have.
	Created []*Set
	// Destroyed are the sets of old whose ID new does not have.
	Destroyed []*Set
	// Renamed are the sets present in both under a different name (rename,
	// and both halves of a swap).
	Renamed []Rename
	// Changed are the member changes of sets present in both.
	Changed []EntryChanges
}

// Rename is a set (ID) now bound to another name.
type Rename struct {
	ID               uint64
	OldName, NewName string
}

// EntryChanges are the member changes of one set.
type EntryChanges struct {
	Set *Set // the set in new
	// Flushed: every old member is gone; Added then holds all members.
	Flushed bool
	// Added are members added or whose extensions (timeout, counters,
	// nomatch, comment) changed.
	Added []Entry
	// Deleted are members removed.
	Deleted []Elem
}

// Empty reports whether nothing changed.
func (d *Diff) Empty() bool {
	return len(d.Created) == 0 && len(d.Destroyed) == 0 && len(d.Renamed) == 0 && len(d.Changed) == 0
}

// ComputeDiff returns the changes from old to new. When new is a Clone of
// old (what Run commits), it costs the number of changed members; otherwise
// it compares every member.
func ComputeDiff(old, new *Sets) Diff {
	var d Diff
	oldByID := map[uint64]*Set{}
	for _, s := range old.All() {
		oldByID[s.ID] = s
	}
	seen := map[uint64]bool{}
	tracked := new.base != 0 && new.base == old.gen
	for _, s := range new.All() {
		o, ok := oldByID[s.ID]
		if !ok {
			d.Created = append(d.Created, s)
			continue
		}
		seen[s.ID] = true
		if o.Name != s.Name {
			d.Renamed = append(d.Renamed, Rename{ID: s.ID, OldName: o.Name, NewName: s.Name})
		}
		var ch EntryChanges
		if tracked && s.journal != nil {
			ch = journalChanges(o, s)
		} else {
			ch = compareChanges(o, s)
		}
		if ch.Flushed || len(ch.Added) > 0 || len(ch.Deleted) > 0 {
			d.Changed = append(d.Changed, ch)
		}
	}
	for _, s := range old.All() {
		if !seen[s.ID] {
			d.Destroyed = append(d.Destroyed, s)
		}
	}
	return d
}

// journalChanges reads the changes of s from its journal.
func journalChanges(o, s *Set) EntryChanges {
	ch := EntryChanges{Set: s, Flushed: s.journal.flushed}
	if ch.Flushed {
		ch.Added = s.Entries()
		return ch
	}
	for e := range s.journal.touched {
		now, inNew := s.get(e)
		was, inOld := o.get(e)
		switch {
		case inNew && (!inOld || *now != *was):
			ch.Added = append(ch.Added, *now)
		case !inNew && inOld:
			ch.Deleted = append(ch.Deleted, e)
		}
	}
	return ch
}

// compareChanges compares every member of o and s.
func compareChanges(o, s *Set) EntryChanges {
	ch := EntryChanges{Set: s}
	s.All(func(now *Entry) bool {
		if was, ok := o.get(now.Elem); !ok || *was != *now {
			ch.Added = append(ch.Added, *now)
		}
		return true
	})
	o.All(func(was *Entry) bool {
		if _, ok := s.get(was.Elem); !ok {
			ch.Deleted = append(ch.Deleted, was.Elem)
		}
		return true
	})
	return ch
}
