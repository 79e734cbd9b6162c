package dataplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The hashlimit match's tables (bpf/hashlimit.h). The kernel keeps one
// table per name and family in a namespace: the first rule naming it
// creates it with its own configuration (htable_create), later rules with
// that name share it whatever their parameters (htable_find_get), and it
// lives, entries and all, until no rule names it (an iptables command
// checks the new table's rules before it destroys the old one's, so a
// name used on both sides keeps its table). Here xfw_hl_tab holds the
// tables by id, with their name and family; registerHashLimits finds or
// creates the tables of a generation before it is filled, and
// dropHashLimitTables removes those no rule of the family names once the
// generation runs, with their entries.

// Map names of the tables and their entries.
const (
	hlTableMap = "xfw_hl_tab"
	hlEntryMap = "xfw_hl_ent"
)

// hlMaxTables is xfw_hl_tab's size: table ids are below it.
const hlMaxTables = 1024

// Probe argument bits (XFW_HL_ARG_*).
const (
	hlArgRateMatch = 1 << 29
	hlArgInvert    = 1 << 30
	hlArgBytes     = 1 << 31
)

// bpfHLTable mirrors struct xfw_hl_table.
type bpfHLTable struct {
	SrcHi, SrcLo, DstHi, DstLo uint64
	Credit, Cap, Cost, CPJ     uint64
	BFull, Refills, Expire, GC uint64
	Born, Count                uint64
	Rate, Burst, Interval      uint64
	Max, Mode, Fam, GCDone     uint32
	Name                       [256]byte
}

// bpfHLKey mirrors struct xfw_hl_key.
type bpfHLKey struct {
	Table, Ports               uint32
	SrcHi, SrcLo, DstHi, DstLo uint64
}

// tableName returns t's name.
func (t *bpfHLTable) tableName() string {
	if i := bytes.IndexByte(t.Name[:], 0); i >= 0 {
		return string(t.Name[:i])
	}
	return string(t.Name[:])
}

// hlTables reads the namespace's tables by id.
func hlTables(m *ebpf.Map) (map[uint32]bpfHLTable, error) {
	out := map[uint32]bpfHLTable{}
	var id uint32
	var t bpfHLTable
	it := m.Iterate()
	for it.Next(&id, &t) {
		out[id] = t
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("hashlimit tables: %w", err)
	}
	return out, nil
}

// registerHashLimits gives each hashlimit match of u's generation its
// table, creating the tables of names the family has none of, and sets
// u.hashLimitArgs: the probes' arguments in the data plane.
func registerHashLimits(cur *state, fam ir.Family, u *Update) error {
	u.hashLimitArgs = nil
	if len(u.Gen.HashLimits) == 0 {
		return nil
	}
	m := cur.maps[hlTableMap]
	if m == nil {
		return errors.New("hashlimit: the loaded programs have no hashlimit tables (an older build): run xfw stop first")
	}
	tables, err := hlTables(m)
	if err != nil {
		return err
	}
	byName := map[string]uint32{}
	for id, t := range tables {
		if t.Fam == uint32(familyIndex(fam)) {
			byName[t.tableName()] = id
		}
	}
	if err := hashLimitRateMatchMixed(tables, byName, u.Gen.HashLimits); err != nil {
		return err
	}
	for _, hl := range u.Gen.HashLimits {
		id, ok := byName[hl.Match.Name]
		if !ok {
			if id, err = createHashLimitTable(m, tables, fam, &hl.Match); err != nil {
				return err
			}
			byName[hl.Match.Name] = id
		}
		arg := id
		if hl.Match.Mode&ir.HashLimitRateMatch != 0 {
			arg |= hlArgRateMatch
		}
		if hl.Match.Mode&ir.HashLimitInvert != 0 {
			arg |= hlArgInvert
		}
		if hl.Match.Mode&ir.HashLimitBytes != 0 {
			arg |= hlArgBytes
		}
		u.hashLimitArgs = append(u.hashLimitArgs, arg)
	}
	return nil
}

// hashLimitRateMatchMixed refuses, before any table is created, a rule
// whose --hashlimit-rate-match differs from its table's (the running
// table of that name, or the one the generation's first rule naming it
// creates): the kernel's entries then hold a token bucket read as a rate
// window or the other way round (rateinfo's union), which xfw does not
// reproduce.
func hashLimitRateMatchMixed(tables map[uint32]bpfHLTable, byName map[string]uint32, hls []compiler.HashLimit) error {
	rateMatch := map[string]bool{}
	for name, id := range byName {
		rateMatch[name] = tables[id].Mode&ir.HashLimitRateMatch != 0
	}
	for _, hl := range hls {
		rm := hl.Match.Mode&ir.HashLimitRateMatch != 0
		if have, ok := rateMatch[hl.Match.Name]; ok && have != rm {
			return fmt.Errorf("hashlimit %s: rules with and without --hashlimit-rate-match sharing one table are not supported by xfw", hl.Match.Name)
		}
		rateMatch[hl.Match.Name] = rm
	}
	return nil
}

// createHashLimitTable writes the table match m creates (htable_create)
// under the lowest free id.
func createHashLimitTable(m *ebpf.Map, tables map[uint32]bpfHLTable, fam ir.Family, hm *ir.HashLimitMatch) (uint32, error) {
	id := uint32(0)
	for ; id < hlMaxTables; id++ {
		if _, used := tables[id]; !used {
			break
		}
	}
	if id == hlMaxTables {
		return 0, fmt.Errorf("hashlimit %s: more than %d tables", hm.Name, hlMaxTables)
	}
	t, err := hashLimitTable(fam, hm)
	if err != nil {
		return 0, err
	}
	// The kernel's collections run every gc interval from the table's
	// creation (htable_create): the data plane counts them from here.
	if t.Born, err = Jiffies(); err != nil {
		return 0, fmt.Errorf("hashlimit %s: %w", hm.Name, err)
	}
	if err := m.Update(id, t, ebpf.UpdateNoExist); err != nil {
		return 0, fmt.Errorf("hashlimit %s: create table: %w", hm.Name, err)
	}
	tables[id] = *t
	return id, nil
}

// hashLimitTable returns the table match m creates on this kernel.
func hashLimitTable(fam ir.Family, m *ir.HashLimitMatch) (*bpfHLTable, error) {
	hz, err := kernelHZ()
	if err != nil {
		return nil, err
	}
	size := m.Size
	if size == 0 {
		if size, err = defaultHashLimitSize(); err != nil {
			return nil, err
		}
	}
	max := m.Max
	if max == 0 {
		max = 8 * size
	} else if max < size {
		max = size
	}
	b := m.Bucket(uint32(hz))
	t := &bpfHLTable{
		Credit: b.Credit, Cap: b.Cap, Cost: b.Cost, CPJ: b.CreditsPerJiffy, Refills: b.Refills,
		BFull:  uint64(ir.HashLimitCreditsPerJiffyBytes(uint32(hz))) * hz,
		Expire: msecsToJiffies(m.Expire, hz), GC: msecsToJiffies(m.GCInterval, hz),
		Max: max, Mode: m.Mode &^ ir.HashLimitInvert, Fam: uint32(familyIndex(fam)),
	}
	if m.Mode&ir.HashLimitRateMatch != 0 {
		t.Rate, t.Burst = m.RateWindow()
		// rateinfo.interval * HZ, computed in 32 bits as the kernel's.
		t.Interval = uint64(m.Interval * uint32(hz))
	}
	if m.Mode&ir.HashLimitSrcIP != 0 {
		t.SrcHi, t.SrcLo = hashLimitMask(fam, m.SrcMask)
	}
	if m.Mode&ir.HashLimitDstIP != 0 {
		t.DstHi, t.DstLo = hashLimitMask(fam, m.DstMask)
	}
	copy(t.Name[:len(t.Name)-1], m.Name)
	return t, nil
}

// hashLimitMask is the mask of a prefix of bits in struct xfw_pkt's
// address halves (IPv4 in the low 32 bits of lo).
func hashLimitMask(fam ir.Family, bits uint8) (hi, lo uint64) {
	if fam == ir.IPv4 {
		return 0, (0xFFFFFFFF << (32 - uint64(min(bits, 32)))) & 0xFFFFFFFF
	}
	n := uint64(min(bits, 128))
	switch {
	case n >= 64:
		return ^uint64(0), ^uint64(0) << (128 - n)
	case n == 0:
		return 0, 0
	}
	return ^uint64(0) << (64 - n), 0
}

// msecsToJiffies is the kernel's msecs_to_jiffies: rounded up.
func msecsToJiffies(ms uint32, hz uint64) uint64 {
	return (uint64(ms)*hz + 999) / 1000
}

// defaultHashLimitSize is htable_create's size without
// --hashlimit-htable-size: a bucket per 16 KiB of memory (of 8-byte list
// heads), 8192 above 1 GiB, at least 16.
func defaultHashLimitSize() (uint32, error) {
	const (
		gib          = 1 << 30
		bytesPerHead = 16384 * 8
		largeSize    = 8192
		smallest     = 16
	)
	total, err := memTotal()
	if err != nil {
		return 0, err
	}
	if total > gib {
		return largeSize, nil
	}
	return max(uint32(total/bytesPerHead), smallest), nil
}

// memTotal reads the machine's memory in bytes (/proc/meminfo).
func memTotal() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("hashlimit table size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("hashlimit table size: MemTotal: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("hashlimit table size: no MemTotal in /proc/meminfo")
}

// hashLimitProbes returns the probes as the data plane reads them: a
// hashlimit probe's argument is its table and the rule's bits (args).
func hashLimitProbes(probes []compiler.Probe, args []uint32) ([]compiler.Probe, error) {
	out := probes
	for i, pr := range probes {
		if pr.Kind != compiler.ProbeHashLimit {
			continue
		}
		if int(pr.Arg) >= len(args) {
			return nil, fmt.Errorf("hashlimit probe %d: match %d has no table", i, pr.Arg)
		}
		if &out[0] == &probes[0] {
			out = append([]compiler.Probe(nil), probes...)
		}
		out[i].Arg = args[pr.Arg]
	}
	return out, nil
}

// dropHashLimitTables removes the tables of family fam no hashlimit
// match of gen names, and their entries (htable_put of the last user).
func dropHashLimitTables(cur *state, fam ir.Family, gen *compiler.Generation) error {
	tm, em := cur.maps[hlTableMap], cur.maps[hlEntryMap]
	if tm == nil || em == nil {
		return nil
	}
	tables, err := hlTables(tm)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	if gen != nil {
		for _, hl := range gen.HashLimits {
			used[hl.Match.Name] = true
		}
	}
	gone := map[uint32]bool{}
	for id, t := range tables {
		if t.Fam == uint32(familyIndex(fam)) && !used[t.tableName()] {
			gone[id] = true
			if err := tm.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("hashlimit %s: remove table: %w", t.tableName(), err)
			}
		}
	}
	if len(gone) == 0 {
		return nil
	}
	var k, next bpfHLKey
	var doomed []bpfHLKey
	for err = em.NextKey(nil, &next); err == nil; err = em.NextKey(&k, &next) {
		k = next
		if gone[k.Table] {
			doomed = append(doomed, k)
		}
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("hashlimit entries: %w", err)
	}
	for _, k := range doomed {
		if err := em.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("hashlimit entries: %w", err)
		}
	}
	return nil
}
