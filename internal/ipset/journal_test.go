package ipset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// journalStore keeps the sets as the namespace's store does: a snapshot
// (MarshalBinary) and a journal of member changes (JournalRecord), replayed
// on Load; a change the journal cannot carry, or one beyond room bytes of
// journal, writes a new snapshot.
type journalStore struct {
	snapshot, journal []byte
	room              int
	loaded            *Sets
	journaled, saved  int // commits of each kind
}

func (j *journalStore) Load() (*Sets, error) {
	ss := NewSets()
	if j.snapshot != nil {
		if err := ss.UnmarshalBinary(j.snapshot); err != nil {
			return nil, err
		}
		if err := ss.ReplayJournal(j.journal); err != nil {
			return nil, err
		}
	}
	j.loaded = ss
	return ss, nil
}

func (j *journalStore) Commit(old, new *Sets) error {
	if j.snapshot != nil && old == j.loaded {
		if rec, ok := JournalRecord(old, new); ok && len(j.journal)+len(rec) <= j.room {
			j.journal = append(j.journal, rec...)
			j.journaled++
			return nil
		}
	}
	data, err := new.MarshalBinary()
	if err != nil {
		return err
	}
	j.snapshot, j.journal = data, nil
	j.saved++
	return nil
}

func (j *journalStore) References(string) (int, error) { return 0, nil }

// initval matches the random hash seed, which differs between the stores.
var initval = regexp.MustCompile(`initval 0x[0-9a-f]+`)

// TestJournalStoreMatchesMemStore runs the same commands against a
// MemStore and a journalStore and compares every command's output and
// status, and the saved sets after each.
func TestJournalStoreMatchesMemStore(t *testing.T) {
	tests := []struct {
		name  string
		room  int
		lines []string
	}{
		{"adds and deletes", 1 << 16, []string{
			"create a hash:ip", "create n hash:net family inet6 counters comment",
			"add a 10.0.0.1", "add a 10.0.0.1", "add -exist a 10.0.0.1", "add a 10.0.0.2",
			"del a 10.0.0.1", "del a 10.0.0.1", "test a 10.0.0.2", "test a 10.0.0.1",
			"add n 2001:db8::/32 nomatch", "add n 2001:db8:1::/48 packets 5 bytes 7 comment \"x y\"",
			"add -exist n 2001:db8::/32", "del n 2001:db8::/32", "list", "save",
		}},
		{"flush, swap, rename, destroy", 1 << 16, []string{
			"create a hash:ip", "create b hash:net", "add a 1.2.3.4", "add b 10.0.0.0/8",
			"flush a", "add a 5.6.7.8", "swap a b", "add a 10.1.0.0/16", "rename b c", "add c 9.9.9.9",
			"destroy a", "create a hash:ip", "add a 1.1.1.1", "list:set", "create l list:set",
			"add l c", "add l a before c", "del l c", "save",
		}},
		{"tiny journal", 40, []string{
			"create a hash:ip", "add a 10.0.0.1", "add a 10.0.0.2", "add a 10.0.0.3", "add a 10.0.0.4",
			"del a 10.0.0.2", "add a 10.0.0.5", "add a 10.0.0.6", "del a 10.0.0.1", "save",
		}},
		{"timeouts", 1 << 16, []string{
			"create t hash:ip timeout 100", "add t 10.0.0.1 timeout 5", "add t 10.0.0.2",
			"add -exist t 10.0.0.1 timeout 50", "del t 10.0.0.2", "save",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, js := NewMemStore(), &journalStore{room: tt.room}
			for _, line := range tt.lines {
				ws, wo, we := run(mem, line, "")
				gs, gout, ge := run(js, line, "")
				wo, gout = initval.ReplaceAllString(wo, ""), initval.ReplaceAllString(gout, "")
				if ws != gs || wo != gout || we != ge {
					t.Fatalf("%s: journal store gave %d %q %q, memory store %d %q %q", line, gs, gout, ge, ws, wo, we)
				}
				_, wsave, _ := run(mem, "save", "")
				_, gsave, _ := run(js, "save", "")
				wsave, gsave = initval.ReplaceAllString(wsave, ""), initval.ReplaceAllString(gsave, "")
				if wsave != gsave {
					t.Fatalf("after %s: journal store saves\n%s\nmemory store\n%s", line, gsave, wsave)
				}
			}
			if js.journaled == 0 {
				t.Errorf("no commit went to the journal (%d snapshots)", js.saved)
			}
		})
	}
}

// TestEncodedMembersWithin checks the range query of an encoded set
// against a scan of its members.
func TestEncodedMembersWithin(t *testing.T) {
	store := NewMemStore()
	lines := []string{"create n hash:net"}
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf("add n 10.%d.%d.0/%d", i%7, i*13%256, 16+i%17))
	}
	for _, line := range lines {
		if status, _, errOut := run(store, line, ""); status != 0 && status != 1 {
			t.Fatalf("%s: %s", line, errOut)
		}
	}
	decoded, _ := roundTrip(t, store.sets)
	if err := decoded.ReplayJournal(append(append([]byte{journalPut}, 1), appendEntry(nil, &Entry{Elem: Elem{Prefix: netip.MustParsePrefix("10.3.0.0/24")}})...)); err != nil {
		t.Fatal(err)
	}
	mem := store.sets.Get("n").clone()
	mem.put(Entry{Elem: Elem{Prefix: netip.MustParsePrefix("10.3.0.0/24")}}, -1)
	for _, r := range [][2]string{{"10.0.0.0", "10.0.255.255"}, {"10.3.0.0", "10.3.0.0"}, {"10.2.128.0", "10.5.3.255"}, {"0.0.0.0", "255.255.255.255"}, {"11.0.0.0", "12.0.0.0"}} {
		first, last := netip.MustParseAddr(r[0]), netip.MustParseAddr(r[1])
		var want, got []string
		mem.Within(first, last, func(e *Entry) bool { want = append(want, e.Prefix.String()); return true })
		decoded.Get("n").Within(first, last, func(e *Entry) bool { got = append(got, e.Prefix.String()); return true })
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("Within(%v, %v) = %v, want %v", first, last, got, want)
		}
		if decoded.Get("n").enc == nil {
			t.Fatal("the decoded set's members are not left encoded")
		}
	}
}

// TestCorruptSnapshotIsAnError damages the stored encoding of a set's
// members (the offsets, and the entries themselves) and checks that
// commands reading them fail with ipset's status and a message naming the
// damage, instead of crashing.
func TestCorruptSnapshotIsAnError(t *testing.T) {
	const members = 3
	damages := []struct {
		name   string
		damage func(snap []byte)
	}{
		{"offsets beyond the entries", func(snap []byte) {
			for i := len(snap) - 4*members; i < len(snap); i++ {
				snap[i] = 0xff
			}
		}},
		{"entries that do not decode", func(snap []byte) {
			// Every offset points at the last byte of the entries,
			// where no entry fits: an IPv4 /32 member of hash:ip is
			// 10 bytes (flags, prefix length, 4 address bytes,
			// protocol, port, empty interface and set names).
			const entryBytes = 10
			offsets := len(snap) - 4*members
			for k := 0; k < members; k++ {
				binary.LittleEndian.PutUint32(snap[offsets+4*k:], entryBytes*members-1)
			}
		}},
	}
	for _, tt := range damages {
		t.Run(tt.name, func(t *testing.T) {
			js := &journalStore{room: 0} // every commit writes a snapshot
			for _, line := range []string{"create s hash:ip", "add s 10.0.0.1", "add s 10.0.0.2", "add s 10.0.0.3"} {
				if status, _, errOut := run(js, line, ""); status != 0 {
					t.Fatalf("%s: %d %s", line, status, errOut)
				}
			}
			tt.damage(js.snapshot)
			for _, line := range []string{"list s", "test s 10.0.0.2", "save"} {
				status, _, errOut := run(js, line, "")
				if status != statusError || !strings.Contains(errOut, "stored ipsets are corrupt") {
					t.Errorf("%s on damaged sets: status %d, stderr %q; want %d and a message about the damage", line, status, errOut, statusError)
				}
			}
		})
	}
}
