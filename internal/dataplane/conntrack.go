package dataplane

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/conntrack"
)

// Names of the connection tables (bpf/ct_maps.h) and of the clock program
// and its map (bpf/ct_clock.c).
const (
	ctMainMap   = "xfw_ct"
	ctNewMap    = "xfw_ct_new"
	ctStatsMap  = "xfw_ct_stats"
	ctClockProg = "xfw_ct_clock"
	ctClockMap  = "xfw_ct_now"
)

// clockObjectBytes is the clock's own BPF object (bpf/ct_clock.c), loaded
// apart from xfw's programs (Jiffies).
//
//go:embed bpf/ct_clock.o
var clockObjectBytes []byte

// ErrNoConntrack reports that the running data plane has no connection
// tables (a build without connection tracking).
var ErrNoConntrack = errors.New("connection tracking is not loaded")

// bpfCTKey mirrors struct xfw_ct_key.
type bpfCTKey struct {
	AHi, ALo     uint64
	BHi, BLo     uint64
	APort, BPort uint16
	Proto        uint8
	Fam          uint8
	Pad          uint16
}

// bpfCTTCPSide mirrors struct xfw_ct_tcp_side.
type bpfCTTCPSide struct {
	End, MaxEnd, MaxWin, MaxAck uint32
	Scale, Flags                uint8
	Pad                         [2]uint8
}

// bpfCTVal mirrors struct xfw_ct_val.
type bpfCTVal struct {
	Expires    uint64
	StreamTS   uint64
	Packets    [2]uint64
	Bytes      [2]uint64
	Status     uint32
	TCPState   uint8
	LastDir    uint8
	LastIndex  uint8
	LastWscale uint8
	LastFlags  uint8
	Retrans    uint8
	ICMPType   uint8
	ICMPCode   uint8
	LoState    [2]uint8
	LastWin    uint16
	LastSeq    uint32
	LastAck    uint32
	LastEnd    uint32
	Side       [2]bpfCTTCPSide
	// NatPort is a translated connection's original destination port,
	// with ctNatDst in NatFlags (bpf/nat.h); NatAddrHi:NatAddr its
	// address.
	NatPort  uint16
	NatFlags uint8
	NatPad   uint8
	// SNatPort is a translated connection's new source port, with
	// ctNatSrc in NatFlags; SNatAddrHi:SNatAddr its address.
	SNatPort uint16
	// NatSPort is the original source port of a DNAT whose translated
	// tuple was taken, with ctNatClash in NatFlags (bpf/nat_clash.h).
	NatSPort uint16
	// Mark is the connection's mark (bpf/connmark.h).
	Mark uint32
	// NatAddrHi and NatAddr are the original destination's address (IPv4:
	// NatAddr, NatAddrHi 0).
	NatAddrHi, NatAddr uint64
	// SNatAddrHi and SNatAddr are the new source's address.
	SNatAddrHi, SNatAddr uint64
}

// bpfCTEntry mirrors struct xfw_ct_entry, the value of both tables: Head
// is the entry's lock word (xfw_ct_lock, bpf/ct_conn.h), read here only
// for ctLockMoved.
type bpfCTEntry struct {
	Head uint64
	V    bpfCTVal
}

// ctLockMoved is XFW_CT_LOCK_MOVED (bpf/ct_conn.h): an xfw_ct_new entry
// whose connection a promotion copied into xfw_ct (bpf/ct_track.h
// xfw_ct_promote) and is about to delete.
const ctLockMoved = 2

// Indexes of CTTables.maps.
const (
	ctMain = 0 // xfw_ct
	ctNew  = 1 // xfw_ct_new
)

// ctReadOrder is the order the tables are read and deleted from:
// xfw_ct_new first, as a promotion moves a connection the other way
// (insert into xfw_ct, then delete from xfw_ct_new), so a connection
// moving during a read is met at least once (twice: Entries keeps
// xfw_ct's), and a deletion racing a move is one the promotion sees
// (it deletes its copy when its own delete finds the entry gone).
var ctReadOrder = [2]int{ctNew, ctMain}

// CTTables are the data plane's two connection tables: xfw_ct (assured
// connections) and xfw_ct_new (connections not yet assured).
type CTTables struct {
	maps [2]*ebpf.Map
	// stats are the tracker's counters (xfw_ct_stats), nil when the
	// tables were given (NewCTTables).
	stats *ebpf.Map
}

// OpenCT opens the connection tables of the xfw running in this network
// namespace (the caller closes them). It fails with ErrNoConntrack when the
// running build has none.
func OpenCT() (*CTTables, error) {
	cur, err := Current()
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, errors.New("xfw is not loaded in this network namespace")
	}
	defer cur.Close()
	t := &CTTables{}
	for i, name := range []string{ctMainMap, ctNewMap} {
		m := cur.maps[name]
		if m == nil {
			t.Close()
			return nil, ErrNoConntrack
		}
		if t.maps[i], err = m.Clone(); err != nil {
			t.Close()
			return nil, fmt.Errorf("open connection table %s: %w", name, err)
		}
	}
	if m := cur.maps[ctStatsMap]; m != nil {
		if t.stats, err = m.Clone(); err != nil {
			t.Close()
			return nil, fmt.Errorf("open %s: %w", ctStatsMap, err)
		}
	}
	return t, nil
}

// NewCTTables serves the given maps (of xfw_ct's and xfw_ct_new's specs)
// as connection tables; Close closes them.
func NewCTTables(assured, fresh *ebpf.Map) *CTTables {
	return &CTTables{maps: [2]*ebpf.Map{assured, fresh}}
}

// Close closes the tables' descriptors.
func (t *CTTables) Close() {
	for _, m := range append(t.maps[:], t.stats) {
		if m != nil {
			m.Close()
		}
	}
}

// CTEntry is one connection read from a table.
type CTEntry struct {
	// Conn is the connection as conntrack shows it (Timeout in seconds
	// from the now and hz given to Entries).
	Conn conntrack.Conn
	// Expires is the jiffies when the data plane lets it die.
	Expires uint64
	key     bpfCTKey
	table   int
}

// Entries reads both tables and returns the connections alive at now (in
// jiffies): those whose expiry is later. Timeouts are in seconds at hz
// jiffies per second.
func (t *CTTables) Entries(now, hz uint64) ([]CTEntry, error) {
	if hz == 0 {
		return nil, errors.New("read connections: zero clock rate")
	}
	var out []CTEntry
	at := make(map[bpfCTKey]int)
	for _, ti := range ctReadOrder {
		keys, vals, err := readCTTable(t.maps[ti])
		if err != nil {
			return nil, fmt.Errorf("read connection table %d: %w", ti, err)
		}
		for i, k := range keys {
			v := vals[i]
			if v.V.Expires <= now || (ti == ctNew && v.Head == ctLockMoved) {
				// Expired (the kernel's nf_ct_is_expired), or killed and
				// kept for a loopback INPUT (bpf/ct_track.h), or moved
				// to xfw_ct (read there).
				continue
			}
			e := CTEntry{
				Conn:    ctConn(k, v.V, now, hz),
				Expires: v.V.Expires,
				key:     k,
				table:   ti,
			}
			if j, ok := at[k]; ok {
				// Moving while read: xfw_ct's copy is the connection.
				out[j] = e
				continue
			}
			at[k] = len(out)
			out = append(out, e)
		}
	}
	return out, nil
}

// LiveEntries is Entries now: the connections alive at the data plane's
// clock (Jiffies), their timeouts at the kernel's HZ.
func (t *CTTables) LiveEntries() ([]CTEntry, error) {
	now, err := Jiffies()
	if err != nil {
		return nil, err
	}
	hz, err := HZ()
	if err != nil {
		return nil, err
	}
	return t.Entries(now, hz)
}

// ctBatch is how many connections one batch lookup reads.
const ctBatch = 4096

// readCTTable reads every entry of a connection table with batch lookups,
// which walk the hash's buckets: unlike a key-by-key iteration, a walk is
// not restarted (and given up) when the data plane evicts or deletes the
// entry it stands on, as under a flood.
func readCTTable(m *ebpf.Map) ([]bpfCTKey, []bpfCTEntry, error) {
	var keys []bpfCTKey
	var vals []bpfCTEntry
	var cursor ebpf.MapBatchCursor
	kb, vb := make([]bpfCTKey, ctBatch), make([]bpfCTEntry, ctBatch)
	for {
		n, err := m.BatchLookup(&cursor, kb, vb, nil)
		keys, vals = append(keys, kb[:n]...), append(vals, vb[:n]...)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys, vals, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// Delete removes e's connection from both tables (xfw_ct_new first:
// ctReadOrder), wherever a promotion may have moved it since it was read;
// false when it was gone already.
func (t *CTTables) Delete(e CTEntry) (bool, error) {
	found := false
	for _, ti := range ctReadOrder {
		err := t.maps[ti].Delete(e.key)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return found, fmt.Errorf("delete connection: %w", err)
		}
		found = true
		if err := t.countUserDeletes(ti, 1); err != nil {
			return found, err
		}
	}
	return found, nil
}

// Flush deletes every connection of both tables, xfw_ct_new first
// (ctReadOrder).
func (t *CTTables) Flush() error {
	for _, ti := range ctReadOrder {
		m := t.maps[ti]
		// Collect, then delete: deleting while iterating a hash map
		// restarts the walk. Connections created meanwhile are taken by
		// the next round.
		for round := 0; round < 8; round++ {
			keys, _, err := readCTTable(m)
			if err != nil {
				return fmt.Errorf("read connection table %d: %w", ti, err)
			}
			if len(keys) == 0 {
				break
			}
			deleted := uint64(0)
			for _, k := range keys {
				err := m.Delete(k)
				if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return fmt.Errorf("delete connection: %w", err)
				}
				if err == nil {
					deleted++
				}
			}
			if err := t.countUserDeletes(ti, deleted); err != nil {
				return err
			}
		}
	}
	return nil
}

// ctConn turns a table entry into the connection conntrack shows.
func ctConn(k bpfCTKey, v bpfCTVal, now, hz uint64) conntrack.Conn {
	c := conntrack.Conn{
		IPv6:     k.Fam == 1,
		Proto:    k.Proto,
		Src:      ctAddr(k.Fam, k.AHi, k.ALo),
		Dst:      ctAddr(k.Fam, k.BHi, k.BLo),
		SPort:    k.APort,
		DPort:    k.BPort,
		ICMPType: v.ICMPType,
		ICMPCode: v.ICMPCode,
		TCPState: v.TCPState,
		Status:   v.Status,
		Packets:  v.Packets,
		Bytes:    v.Bytes,
		Mark:     v.Mark,
	}
	if v.Status&conntrack.StatusOrigB != 0 {
		c.Src, c.Dst = c.Dst, c.Src
		c.SPort, c.DPort = c.DPort, c.SPort
	}
	if v.NatFlags&ctNatDst != 0 {
		// The key holds the translated tuple (bpf/nat.h).
		c.DNAT, c.ReplSrc, c.ReplSPort = true, c.Dst, c.DPort
		c.Dst = ctAddr(k.Fam, v.NatAddrHi, v.NatAddr)
		c.DPort = v.NatPort
	}
	if v.NatFlags&ctNatClash != 0 {
		// The key holds the new source port (bpf/nat_clash.h).
		c.SNAT, c.ReplDst, c.ReplDPort = true, c.Src, c.SPort
		c.SPort = v.NatSPort
	}
	if v.NatFlags&ctNatSrc != 0 {
		// The key holds the original source (bpf/nat_snat.h).
		c.SNAT, c.ReplDst, c.ReplDPort = true, ctAddr(k.Fam, v.SNatAddrHi, v.SNatAddr), v.SNatPort
	}
	if v.Expires > now {
		c.Timeout = (v.Expires - now) / hz
	}
	return c
}

// ctNatDst is XFW_NAT_F_DST of bpfCTVal.NatFlags: a translated
// destination.
const ctNatDst = 0x1

// ctNatSrc is XFW_NAT_F_SRC: a translated source.
const ctNatSrc = 0x2

// ctNatClash is XFW_NAT_F_CLASH: a DNAT whose translated tuple was taken
// also changed the source port.
const ctNatClash = 0x4

// ctAddr is a key's address: its numeric value in two host-order halves
// (IPv4: hi 0, lo the address).
func ctAddr(fam uint8, hi, lo uint64) netip.Addr {
	if fam != 1 {
		return netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

// clock is the loaded clock program (bpf/ct_clock.c), loaded on first use
// and kept for the process.
var clock struct {
	mu   sync.Mutex
	prog *ebpf.Program
	now  *ebpf.Map
	hz   uint64
}

// Jiffies returns the kernel's jiffies as the data plane reads them
// (bpf_jiffies64), by running xfw_ct_clock once (BPF_PROG_TEST_RUN). The
// program is loaded on first use, on its own: it is attached nowhere and
// needs no running xfw.
func Jiffies() (uint64, error) {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	return jiffiesLocked()
}

func jiffiesLocked() (uint64, error) {
	if clock.prog == nil {
		spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(clockObjectBytes))
		if err != nil {
			return 0, fmt.Errorf("load the connection tracking clock's object: %w", err)
		}
		if spec.Programs[ctClockProg] == nil || spec.Maps[ctClockMap] == nil {
			return 0, errors.New("BPF object lacks the connection tracking clock")
		}
		var objs struct {
			Prog *ebpf.Program `ebpf:"xfw_ct_clock"`
			Now  *ebpf.Map     `ebpf:"xfw_ct_now"`
		}
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			return 0, fmt.Errorf("load the connection tracking clock: %w", err)
		}
		clock.prog, clock.now = objs.Prog, objs.Now
	}
	// XDP's test run wants at least an Ethernet header.
	if _, err := clock.prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		return 0, fmt.Errorf("run the connection tracking clock: %w", err)
	}
	var j uint64
	if err := clock.now.Lookup(uint32(0), &j); err != nil {
		return 0, fmt.Errorf("read the connection tracking clock: %w", err)
	}
	return j, nil
}

// HZ returns the kernel's jiffies per second: jiffies sampled about 100 ms
// apart, rounded to the nearest of the rates Linux is built with (100,
// 250, 300, 1000). Measured once per process.
func HZ() (uint64, error) {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.hz != 0 {
		return clock.hz, nil
	}
	// The running programs were configured with it (ctcfg.go).
	if cur, err := Current(); err == nil && cur != nil {
		hz := runningHZ(cur.maps[ctCfgMap])
		cur.Close()
		if hz != 0 {
			clock.hz = hz
			return hz, nil
		}
	}
	if hz := configHZ(); hz != 0 {
		clock.hz = hz
		return hz, nil
	}
	j0, err := jiffiesLocked()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	time.Sleep(100 * time.Millisecond)
	j1, err := jiffiesLocked()
	if err != nil {
		return 0, err
	}
	clock.hz = nearestHZ(float64(j1-j0) / time.Since(t0).Seconds())
	return clock.hz, nil
}

// nearestHZ rounds a measured jiffies rate to a kernel's CONFIG_HZ.
func nearestHZ(rate float64) uint64 {
	best, bestd := uint64(0), math.Inf(1)
	for _, hz := range []uint64{100, 250, 300, 1000} {
		if d := math.Abs(rate - float64(hz)); d < bestd {
			best, bestd = hz, d
		}
	}
	return best
}
