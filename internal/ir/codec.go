package ir

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unsafe"

	"github.com/xfw-dev/xfw/internal/prefault"
)

// The binary form of a ruleset: what the control plane keeps in the
// kernel with a running ruleset, so the next command reads it back in
// microseconds per rule instead of parsing iptables-save text (≈8 µs per
// rule). Only the build that wrote it uses it, but for `xfw takeover` (an
// upgrade: the new build reads the old one's rulesets, and refuses a
// version it does not know), so it has no compatibility promises beyond a
// version byte, which every change to the layout must bump.
//
// Layout: the version byte, the family, the chain count, then each chain
// (name, built-in flag, policy, rule count, rules), then the other tables
// (their count, then each table's name, chain count and chains). A rule is its fixed
// IP-level fields, its matches (a tag byte each, then the match's fields)
// and its target. Integers are unsigned varints, strings a length and the
// bytes, addresses a family byte (0 none, 4, 6) and the address bytes.
// Counters and Handle are not kept: the data plane holds the counters.

// codecVersion is the first byte of every encoded ruleset.
// Version 2 added the tables besides filter (after filter's chains) and
// the NAT targets' ranges; version 3 the MARK target's values; version 4
// the CONNMARK target's (connmark.go); version 5 the packet-rewriting
// targets' options (mangle.go); version 6 the NFLOG target's (nflog.go);
// version 7 the SET target's (settarget.go).
const codecVersion = 7

// Match tags of the binary form. Tags defined beside their matches take
// ranges of their own: limit 64, hashlimit 65, recent 72, the IPv6
// extension headers 80-82 (ip6ext.go) and 90-92 (ip6hdr.go), connlimit
// 84, cpu 85, the predicates 96-98 (pred.go), sctp, dccp, esp and ah
// 100-103 (hdr4.go), statistic and mark 112-113 (mark.go), connmark 120 (connmark.go), owner 121 (owner.go), devgroup 122 (devgroup.go), physdev 123 (physdev.go). A new file picks a free range, adds it here and to
// TestMatchTagsDistinct.
const (
	tagTCP = iota + 1
	tagUDP
	tagMultiport
	tagICMP
	tagIPRange
	tagComment
	tagLength
	tagTTL
	tagMAC
	tagSet
	tagConntrack
	tagAddrType
	tagPktType
	// header.go's matches.
	tagDSCP
	tagTOS
	tagECN
	tagTCPMSS
)

// encoder appends the binary form to buf.
type encoder struct {
	buf []byte
	// index, when not nil, records where each chain's rules lie in buf
	// (MarshalBinaryIndexed).
	index *Encoded
}

func (e *encoder) u8(v uint8)      { e.buf = append(e.buf, v) }
func (e *encoder) uv(v uint64)     { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) str(s string)    { e.uv(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) u16(v uint16)    { e.uv(uint64(v)) }
func (e *encoder) flags(b ...bool) { e.u8(packBools(b...)) }

func (e *encoder) addr(a netip.Addr) error {
	switch {
	case !a.IsValid():
		e.u8(0)
	case a.Zone() != "":
		return fmt.Errorf("address %s has a zone", a)
	case a.Is4():
		e.u8(4)
		b := a.As4()
		e.buf = append(e.buf, b[:]...)
	default:
		e.u8(6)
		b := a.As16()
		e.buf = append(e.buf, b[:]...)
	}
	return nil
}

func (e *encoder) port(p PortMatch) {
	e.flags(p.Set, p.Invert)
	e.u16(p.Range.First)
	e.u16(p.Range.Last)
}

// packBools packs up to 8 flags into a byte, the first in bit 0.
func packBools(b ...bool) uint8 {
	var v uint8
	for i, x := range b {
		if x {
			v |= 1 << i
		}
	}
	return v
}

// rulesetHeader writes what precedes rs's chains: the codec version, the
// family and the chain count.
func (e *encoder) rulesetHeader(rs *Ruleset) {
	e.u8(codecVersion)
	e.u8(uint8(rs.Family))
	e.uv(uint64(len(rs.Chains)))
}

// chainHeader writes what precedes c's rules: name, builtin flag, policy
// and rule count.
func (e *encoder) chainHeader(c *Chain) {
	e.str(c.Name)
	e.flags(c.Builtin)
	e.u8(uint8(c.Policy))
	e.uv(uint64(len(c.Rules)))
}

// MarshalBinary returns the binary form of rs (without counters).
func (rs *Ruleset) MarshalBinary() ([]byte, error) {
	e := &encoder{buf: make([]byte, 0, rs.encodedSizeEstimate())}
	e.rulesetHeader(rs)
	for _, c := range rs.Chains {
		e.chainHeader(c)
		if err := e.rulesReusing(c, nil); err != nil {
			return nil, err
		}
	}
	if err := e.tables(rs, nil); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// MarshalBinaryIndexed is MarshalBinaryReusing (enc may be nil) that also
// returns where rs's rules lie in the binary form: an Encoded for a caller
// that keeps rs, as it is, with that form (the agent's cache), so that the
// next MarshalBinaryReusing of a ruleset sharing rules with rs copies
// their bytes as after a decode. The Encoded refers to rs's chains' rule
// slices: a rule replaced in them (a *Rule stored at an index) is taken
// for one encoded there, so the caller replaces rules only by ones that
// encode the same (Rule.RoundTrip).
func (rs *Ruleset) MarshalBinaryIndexed(enc *Encoded) ([]byte, *Encoded, error) {
	// The estimate walks every rule: with enc, its data's size is as good.
	var size int
	if enc != nil {
		size = len(enc.data) + 1024
	} else {
		size = rs.encodedSizeEstimate()
	}
	index := &Encoded{kept: true}
	e := &encoder{buf: make([]byte, 0, size), index: index}
	prefault.Slice(e.buf[:cap(e.buf)])
	e.rulesetHeader(rs)
	for _, c := range rs.Chains {
		e.chainHeader(c)
		if err := e.rulesReusing(c, enc); err != nil {
			return nil, nil, err
		}
	}
	if err := e.tables(rs, enc); err != nil {
		return nil, nil, err
	}
	index.data = e.buf
	return e.buf, index, nil
}

// MarshalBinaryReusing returns the binary form of rs, as MarshalBinary
// does, copying the bytes of every rule rs shares with the ruleset enc was
// decoded from (the same *Rule, in runs) instead of encoding it again. The
// shared rules must be unchanged since they were decoded: commands that
// add, remove or replace whole rules leave them so
// (iptables.Command.LeavesRulesAlone). enc nil encodes every rule.
func (rs *Ruleset) MarshalBinaryReusing(enc *Encoded) ([]byte, error) {
	if enc == nil {
		return rs.MarshalBinary()
	}
	e := &encoder{buf: make([]byte, 0, len(enc.data)+1024)}
	prefault.Slice(e.buf[:cap(e.buf)])
	e.rulesetHeader(rs)
	for _, c := range rs.Chains {
		e.chainHeader(c)
		if err := e.rulesReusing(c, enc); err != nil {
			return nil, err
		}
	}
	if err := e.tables(rs, enc); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// rulesReusing writes chain c's rules, copying the bytes of those decoded
// from enc (in runs) and encoding the others; enc nil encodes every rule.
func (e *encoder) rulesReusing(c *Chain, enc *Encoded) error {
	var ec *encodedChain
	if e.index != nil {
		e.index.chains = append(e.index.chains, encodedChain{ptrs: c.Rules, start: uint32(len(e.buf)), ends: make([]uint32, 0, len(c.Rules))})
		ec = &e.index.chains[len(e.index.chains)-1]
	}
	// Where the last run copied ended (a kept Encoded finds a chain's
	// rules past its first two only from there).
	lastCi, lastEnd := -1, 0
	for i := 0; i < len(c.Rules); {
		ci, from, ok := 0, 0, false
		if enc != nil {
			ci, from, ok = enc.locate(c.Rules[i])
			if !ok && enc.kept && lastCi >= 0 {
				ci, from, ok = enc.after(lastCi, lastEnd, c.Rules[i])
			}
		}
		if !ok {
			if err := e.rule(c.Rules[i]); err != nil {
				return fmt.Errorf("encode rule %d of chain %s: %w", i+1, c.Name, err)
			}
			if ec != nil {
				ec.ends = append(ec.ends, uint32(len(e.buf)))
			}
			i++
			continue
		}
		// The run of rules that follow each other in both.
		n := 1
		for i+n < len(c.Rules) && from+n < enc.chains[ci].count() && c.Rules[i+n] == enc.chains[ci].rule(from+n) {
			n++
		}
		lastCi, lastEnd = ci, from+n
		at := len(e.buf)
		span := enc.span(ci, from, from+n)
		e.buf = append(e.buf, span...)
		if ec != nil {
			// The copied rules' ends, moved from where they were.
			shift := int64(at) - int64(enc.chains[ci].start)
			if from > 0 {
				shift = int64(at) - int64(enc.chains[ci].ends[from-1])
			}
			for _, end := range enc.chains[ci].ends[from : from+n] {
				ec.ends = append(ec.ends, uint32(int64(end)+shift))
			}
		}
		i += n
	}
	return nil
}

// tables writes rs's other tables: their count, then each one's name,
// chain count and chains.
func (e *encoder) tables(rs *Ruleset, enc *Encoded) error {
	e.uv(uint64(len(rs.Tables)))
	for _, t := range rs.Tables {
		e.str(t.Table)
		e.uv(uint64(len(t.Chains)))
		for _, c := range t.Chains {
			e.chainHeader(c)
			if err := e.rulesReusing(c, enc); err != nil {
				return fmt.Errorf("table %s: %w", t.Table, err)
			}
		}
	}
	return nil
}

// Bytes of the binary form that encodedSizeEstimate reckons with: a
// rule's fields and matches other than comments (a 5-tuple rule with a
// tcp match takes 59 bytes), and a chain header's besides its name.
const (
	encodedBytesPerRule  = 64
	encodedBytesPerChain = 8
)

// encodedSizeEstimate is the capacity the encoder's buffer starts with:
// the rules and chains of every table, a rule at encodedBytesPerRule and
// its comments' text, a chain at encodedBytesPerChain and its name.
// Reckoning with the filter table's rules alone left the buffer to grow
// by copies from a fraction of its size (kube-proxy's 10K services: 30.8
// MB of binary form, most of it nat's, and about 150 MB allocated on the
// way); its comments are a third of it.
func (rs *Ruleset) encodedSizeEstimate() int {
	n := 64
	for _, t := range append([]*Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			n += encodedBytesPerChain + len(c.Name) + encodedBytesPerRule*len(c.Rules)
			for _, r := range c.Rules {
				for _, m := range r.Matches {
					if cm, ok := m.(*CommentMatch); ok {
						n += len(cm.Text)
					}
				}
			}
		}
	}
	return n
}

func (e *encoder) rule(r *Rule) error {
	for _, a := range []AddrMatch{r.Src, r.Dst} {
		e.flags(a.Set, a.Invert)
		if err := e.addr(a.Addr); err != nil {
			return err
		}
		if err := e.addr(a.Mask); err != nil {
			return err
		}
	}
	for _, m := range []IfaceMatch{r.InIface, r.OutIface} {
		e.flags(m.Set, m.Invert)
		e.str(m.Name)
	}
	e.flags(r.Proto.Set, r.Proto.Invert, r.Fragment.Set, r.Fragment.Invert)
	e.u8(r.Proto.Num)
	e.str(r.Proto.Spelling)
	e.uv(uint64(len(r.Matches)))
	for _, m := range r.Matches {
		if err := e.match(m); err != nil {
			return err
		}
	}
	t := r.Target
	e.u8(uint8(t.Kind))
	e.str(t.Chain)
	e.str(t.RejectWith)
	if t.Log == nil {
		e.u8(0)
	} else {
		e.u8(1 | packBools(false, t.Log.LevelSet)) // bit 0: present
		e.u8(t.Log.Level)
		e.u8(t.Log.Flags)
		e.str(t.Log.Prefix)
	}
	if err := e.natRange(t.Nat); err != nil {
		return err
	}
	e.markTarget(t.Mark)
	e.connmarkTarget(t.Connmark)
	e.mangleTarget(t.Mangle)
	e.nflogTarget(t.NFLog)
	e.setTarget(t.Set)
	return nil
}

// natRange writes a NAT target's range: a presence byte, then the flags,
// the addresses and the ports.
func (e *encoder) natRange(n *NatRange) error {
	if n == nil {
		e.u8(0)
		return nil
	}
	e.u8(1)
	e.u8(uint8(n.Flags))
	if err := e.addr(n.MinAddr); err != nil {
		return err
	}
	if err := e.addr(n.MaxAddr); err != nil {
		return err
	}
	e.u16(n.MinPort)
	e.u16(n.MaxPort)
	e.u16(n.BasePort)
	return nil
}

// natRange reads what encoder.natRange wrote.
func (d *decoder) natRange() *NatRange {
	if d.u8() == 0 {
		return nil
	}
	n := &NatRange{Flags: NatFlags(d.u8())}
	n.MinAddr = d.addr()
	n.MaxAddr = d.addr()
	n.MinPort = d.u16()
	n.MaxPort = d.u16()
	n.BasePort = d.u16()
	return n
}

// chainHeader reads what encoder.chainHeader wrote: the chain (without
// rules) and its rule count.
func (d *decoder) chainHeader() (*Chain, uint64) {
	c := &Chain{Name: d.str()}
	d.flags(&c.Builtin)
	c.Policy = Verdict(d.u8())
	n := d.uv()
	if n > uint64(len(d.buf)) {
		d.fail(errTruncated)
		return c, 0
	}
	return c, n
}

// chainRules reads chain c's nrules rules into one slab and records in
// enc where they lie in enc.data.
func (d *decoder) chainRules(c *Chain, nrules uint64, enc *Encoded) {
	ec := encodedChain{start: uint32(len(enc.data) - len(d.buf))}
	if nrules > 0 {
		slab := make([]Rule, nrules)
		prefault.Slice(slab)
		c.Rules = make([]*Rule, nrules)
		prefault.Slice(c.Rules)
		ec.rules, ec.ends = slab, make([]uint32, nrules)
		for j := range slab {
			d.rule(&slab[j])
			c.Rules[j] = &slab[j]
			ec.ends[j] = uint32(len(enc.data) - len(d.buf))
		}
	}
	enc.chains = append(enc.chains, ec)
}

// skipChainRules steps over chain c's nrules rules (a table the caller
// drops, Skip.Tables): each is decoded into one scratch rule,
// which is dropped, and c keeps none; enc records where they lie (their
// count is the chain's, RuleCounts) but holds none of them.
func (d *decoder) skipChainRules(nrules uint64, enc *Encoded) {
	ec := encodedChain{start: uint32(len(enc.data) - len(d.buf))}
	d.skipping = true
	if d.scratch == nil {
		d.scratch = new(skipScratch)
	}
	s := d.scratch
	// The rules' matches are cut from the scratch's slabs, cleared for
	// each rule, not from the decoder's.
	match, udp, tcp, comment := d.matchSlab, d.udpSlab, d.tcpSlab, d.commentSlab
	ec.ends = make([]uint32, 0, nrules)
	for range nrules {
		if d.err != nil {
			break
		}
		*s = skipScratch{}
		d.matchSlab, d.udpSlab, d.tcpSlab, d.commentSlab = s.match[:], s.udp[:], s.tcp[:], s.comment[:]
		d.rule(&s.rule)
		ec.ends = append(ec.ends, uint32(len(enc.data)-len(d.buf)))
	}
	d.matchSlab, d.udpSlab, d.tcpSlab, d.commentSlab = match, udp, tcp, comment
	d.skipping = false
	enc.chains = append(enc.chains, ec)
}

// skipSlab is how many of each slabbed match a skipped rule's scratch
// holds; a rule with more takes fresh slabs (newMatches, cutOne).
const skipSlab = 8

// skipScratch is what a skipped rule is decoded into (skipChainRules).
type skipScratch struct {
	rule    Rule
	match   [skipSlab]Match
	udp     [skipSlab]UDPMatch
	tcp     [skipSlab]TCPMatch
	comment [skipSlab]CommentMatch
}

// chain reads one chain's header and rules, or steps over its rules when
// skip (skipChainRules): then a user chain's name is a view of the data
// (the restore deletes the chain), a built-in chain's a copy.
//
// Of a table not skipped whole, a user chain with rules that the caller
// flushes before using it (Skip.Rules, asked for table) has its rules
// stepped over too; its name is a copy (the chain stays).
func (d *decoder) chain(enc *Encoded, skip bool, table string) *Chain {
	d.skipping = skip
	c, nrules := d.chainHeader()
	d.skipping = false
	if d.err != nil {
		return c
	}
	switch {
	case skip:
		if c.Builtin {
			c.Name = strings.Clone(c.Name)
		}
		d.skipChainRules(nrules, enc)
	case nrules > 0 && !c.Builtin && d.flushed(table, c.Name):
		d.skipChainRules(nrules, enc)
	default:
		d.chainRules(c, nrules, enc)
	}
	return c
}

// flushed reports whether the caller flushes user chain chain of table
// before using it (Skip.Rules), asking once per table.
func (d *decoder) flushed(table, chain string) bool {
	if d.rulesOf == nil {
		return false
	}
	if !d.flushAsked || d.flushTable != table {
		d.flushTable, d.flushAsked = table, true
		d.flushes = d.rulesOf(table)
	}
	return d.flushes != nil && d.flushes(chain)
}

// growChains makes room in enc for n more chains (at most one per four
// bytes left: a chain's header is longer).
func (d *decoder) growChains(enc *Encoded, n uint64) {
	enc.chains = slices.Grow(enc.chains, int(min(n, uint64(len(d.buf)/4))))
}

// tables reads what encoder.tables wrote into rs.Tables.
func (d *decoder) tables(rs *Ruleset, enc *Encoded) {
	n := d.uv()
	if n > uint64(len(d.buf)) {
		d.fail(errTruncated)
		return
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		t := &Ruleset{Family: rs.Family, Table: d.str()}
		nchains := d.uv()
		if nchains > uint64(len(d.buf)) {
			d.fail(errTruncated)
			return
		}
		skip := d.skip != nil && d.skip(t.Table)
		d.growChains(enc, nchains)
		for j := uint64(0); j < nchains && d.err == nil; j++ {
			t.Chains = append(t.Chains, d.chain(enc, skip, t.Table))
		}
		rs.Tables = append(rs.Tables, t)
	}
}

// newMatches returns a match list of n elements cut from the slab, with
// capacity n (appending to it reallocates, as for any other list).
func (d *decoder) newMatches(n int) []Match {
	if n > len(d.matchSlab) || d.matchSlab == nil {
		d.matchSlab = make([]Match, max(n, slabSize))
	}
	m := d.matchSlab[:n:n]
	d.matchSlab = d.matchSlab[n:]
	return m
}

// cutOne returns a zero element cut from *slab, refilled with slabSize
// fresh elements when empty.
func cutOne[T any](slab *[]T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, slabSize)
	}
	m := &(*slab)[0]
	*slab = (*slab)[1:]
	return m
}

// newUDP returns a zero UDPMatch cut from the slab.
func (d *decoder) newUDP() *UDPMatch { return cutOne(&d.udpSlab) }

// newTCP returns a zero TCPMatch cut from the slab.
func (d *decoder) newTCP() *TCPMatch { return cutOne(&d.tcpSlab) }

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) u8() uint8 {
	if len(d.buf) < 1 {
		d.fail(errTruncated)
		return 0
	}
	v := d.buf[0]
	d.buf = d.buf[1:]
	return v
}

func (d *decoder) uv() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(errTruncated)
		d.buf = nil
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) u16() uint16 {
	v := d.uv()
	if v > 0xffff {
		d.fail(fmt.Errorf("value %d out of range", v))
	}
	return uint16(v)
}

func (d *decoder) bytes(n int) []byte {
	if n < 0 || len(d.buf) < n {
		d.fail(errTruncated)
		d.buf = nil
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) str() string {
	n := d.uv()
	if n > uint64(len(d.buf)) {
		d.fail(errTruncated)
		return ""
	}
	b := d.bytes(int(n))
	if len(b) == 0 {
		return ""
	}
	if d.skipping {
		// A rule stepped over (skipChainRules) is dropped: its strings
		// may be views of the data, not interned.
		return unsafe.String(&b[0], len(b))
	}
	slot := &d.recentStr[(len(b)*31+int(b[0])+int(b[len(b)-1])*7)&(recentStrs-1)]
	if *slot == string(b) {
		return *slot
	}
	s, ok := d.strs[string(b)]
	if !ok {
		s = string(b)
		d.strs[s] = s
	}
	*slot = s
	return s
}

// flags unpacks n flags packed by packBools.
func (d *decoder) flags(out ...*bool) {
	v := d.u8()
	for i, p := range out {
		*p = v&(1<<i) != 0
	}
}

func (d *decoder) addr() netip.Addr {
	switch k := d.u8(); k {
	case 0:
		return netip.Addr{}
	case 4:
		var b [4]byte
		copy(b[:], d.bytes(4))
		return netip.AddrFrom4(b)
	case 6:
		var b [16]byte
		copy(b[:], d.bytes(16))
		return netip.AddrFrom16(b)
	default:
		d.fail(fmt.Errorf("bad address kind %d", k))
		return netip.Addr{}
	}
}

func (d *decoder) port(p *PortMatch) {
	d.flags(&p.Set, &p.Invert)
	p.Range.First = d.u16()
	p.Range.Last = d.u16()
}

// UnmarshalRuleset decodes a ruleset MarshalBinary encoded.
func UnmarshalRuleset(data []byte) (*Ruleset, error) {
	rs, _, err := UnmarshalRulesetEncoded(data)
	return rs, err
}

// Encoded is the binary form a ruleset was decoded from and where each of
// its rules lies in it (UnmarshalRulesetEncoded): a ruleset that shares
// those rules, unchanged, is encoded by copying their bytes
// (MarshalBinaryReusing) instead of encoding them again.
type Encoded struct {
	data   []byte
	chains []encodedChain
	// byAddr are the indexes of the chains with rules in the order of
	// their slabs' addresses (locate).
	byAddr []int
	// kept: made by MarshalBinaryIndexed, the chains' rules are ptrs (no
	// slabs), and first indexes the chains by their first rule (made at
	// the first locate).
	kept  bool
	first map[*Rule]int
	// second indexes a kept Encoded's chains by their second rule: a
	// chain whose first rule was deleted (iptables -D) is found too.
	second map[*Rule]int
}

// encodedChain is one chain's rules as decoded: the slab they were decoded
// into (or, in a kept Encoded, the chain's rules) and the offset in
// Encoded.data of each rule's end (its start is the previous rule's end,
// or start).
type encodedChain struct {
	rules []Rule
	ptrs  []*Rule
	start uint32
	ends  []uint32
}

// count is the number of the chain's rules.
func (c *encodedChain) count() int { return len(c.ends) }

// rule returns the chain's rule k.
func (c *encodedChain) rule(k int) *Rule {
	if c.ptrs != nil {
		return c.ptrs[k]
	}
	return &c.rules[k]
}

// RuleCounts returns how many rules each chain had in the binary form, in
// the order the decode returned the chains (the filter table's, then each
// other table's): the count of a chain whose rules were skipped
// (UnmarshalRulesetSkip) too.
func (enc *Encoded) RuleCounts() []int {
	n := make([]int, len(enc.chains))
	for i := range enc.chains {
		n[i] = enc.chains[i].count()
	}
	return n
}

// index sorts the chains with rules by where their slabs lie in memory
// (byAddr), for locate: a kube-proxy ruleset has over 100,000 chains.
func (enc *Encoded) index() {
	enc.byAddr = enc.byAddr[:0]
	for ci, c := range enc.chains {
		if len(c.rules) > 0 {
			enc.byAddr = append(enc.byAddr, ci)
		}
	}
	slices.SortFunc(enc.byAddr, func(a, b int) int {
		return cmp.Compare(enc.slabStart(a), enc.slabStart(b))
	})
}

// slabStart is the address of decoded chain ci's first rule (it has one).
func (enc *Encoded) slabStart(ci int) uintptr {
	return uintptr(unsafe.Pointer(&enc.chains[ci].rules[0]))
}

// locate returns the chain and index of the decoded rule r, if r is one.
// (Go's heap does not move objects: a slab's address is fixed.)
func (enc *Encoded) locate(r *Rule) (chain, index int, ok bool) {
	if enc.kept {
		// A kept ruleset's chains are found by their first or second
		// rule (the first deleted), a rule past them only just after
		// a copied run (after): a chain changed otherwise is encoded
		// again from there.
		if enc.first == nil {
			enc.first = make(map[*Rule]int, len(enc.chains))
			enc.second = map[*Rule]int{}
			for ci, c := range enc.chains {
				if len(c.ptrs) > 0 {
					enc.first[c.ptrs[0]] = ci
				}
				if len(c.ptrs) > 1 {
					enc.second[c.ptrs[1]] = ci
				}
			}
		}
		if ci, ok := enc.first[r]; ok {
			return ci, 0, ok
		}
		ci, ok := enc.second[r]
		return ci, 1, ok
	}
	p := uintptr(unsafe.Pointer(r))
	// The last slab starting at or before p.
	i, found := slices.BinarySearchFunc(enc.byAddr, p, func(ci int, p uintptr) int {
		return cmp.Compare(enc.slabStart(ci), p)
	})
	if !found {
		i--
	}
	if i < 0 {
		return 0, 0, false
	}
	ci := enc.byAddr[i]
	rules := enc.chains[ci].rules
	base := enc.slabStart(ci)
	if size := unsafe.Sizeof(rules[0]); p < base+uintptr(len(rules))*size {
		return ci, int((p - base) / size), true
	}
	return 0, 0, false
}

// after returns where r lies in a kept Encoded when it is the rule of
// chain ci just past end, the end of the run last copied from there
// (the rule at end was deleted: iptables -D in the middle of a chain).
func (enc *Encoded) after(ci, end int, r *Rule) (chain, index int, ok bool) {
	if end+1 < enc.chains[ci].count() && enc.chains[ci].rule(end+1) == r {
		return ci, end + 1, true
	}
	return 0, 0, false
}

// SharedBy reports whether a chain of rs (any table) starts with a rule
// decoded into enc: whether MarshalBinaryReusing would copy anything
// (nearly: a chain changed at its head only is not looked at). A caller
// keeping enc for a ruleset that shares nothing with it keeps every
// decoded rule in memory for nothing.
func (enc *Encoded) SharedBy(rs *Ruleset) bool {
	for _, t := range append([]*Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			if len(c.Rules) > 0 {
				if _, _, ok := enc.locate(c.Rules[0]); ok {
					return true
				}
			}
		}
	}
	return false
}

// Encodes reports whether data is exactly the binary form enc was decoded
// from: the ruleset data encodes is, rule for rule, the one enc's decoding
// returned (the form keeps neither counters nor handles).
func (enc *Encoded) Encodes(data []byte) bool {
	return bytes.Equal(enc.data, data)
}

// span returns where rules from to to-1 of decoded chain ci lie.
func (enc *Encoded) span(ci, from, to int) []byte {
	c := enc.chains[ci]
	start := c.start
	if from > 0 {
		start = c.ends[from-1]
	}
	return enc.data[start:c.ends[to-1]]
}

// bytesPerString sizes the decoder's string table ahead: kube-proxy's
// 10,000 services encode to 30 MB with 235,000 distinct strings (chain
// names, comments), about one per 129 bytes; a table grown from empty is
// rehashed at every doubling.
const bytesPerString = 128

// UnmarshalRulesetEncoded decodes a ruleset MarshalBinary encoded and
// returns it with where its rules lie in data (which it keeps).
func UnmarshalRulesetEncoded(data []byte) (*Ruleset, *Encoded, error) {
	return UnmarshalRulesetSkip(data, Skip{})
}

// Skip says what of a ruleset's binary form a decode steps over
// (UnmarshalRulesetSkip). A zero Skip skips nothing.
type Skip struct {
	// Tables reports the tables whose rules are all stepped over, not
	// kept (asked once per table, in the encoding's order: filter
	// first): those tables have all their chains (names, policies) and
	// no rules; their user chains' names are parts of the data (which
	// must not change while they are used: a restore deletes those
	// chains). A restore that replaces a table throws its rules away
	// (about half a second of decode for kube-proxy's 10,000 services).
	Tables func(table string) bool
	// Rules returns, for a table not skipped whole, which of its user
	// chains' rules are stepped over (nil: none); it is asked at most
	// once per table, when the decode meets the table's first user chain
	// with rules, and may wait (a --noflush restore's ":CHAIN" lines,
	// iptables.RestoreSkipping). Those chains stay, with their names
	// copied and no rules.
	Rules func(table string) func(chain string) bool
}

// UnmarshalRulesetSkip is UnmarshalRulesetEncoded with what skip says
// stepped over, not kept: the chains whose rules are skipped have none;
// RuleCounts gives how many each had.
func UnmarshalRulesetSkip(data []byte, skip Skip) (*Ruleset, *Encoded, error) {
	enc := &Encoded{data: data}
	d := &decoder{buf: data, strs: make(map[string]string, len(data)/bytesPerString), skip: skip.Tables, rulesOf: skip.Rules}
	if v := d.u8(); d.err == nil && v != codecVersion {
		return nil, nil, fmt.Errorf("binary ruleset version %d, want %d", v, codecVersion)
	}
	rs := &Ruleset{Family: Family(d.u8())}
	nchains := d.uv()
	if nchains > uint64(len(d.buf)) {
		d.fail(errTruncated)
	}
	skipFilter := skip.Tables != nil && skip.Tables(TableFilter)
	d.growChains(enc, nchains)
	for i := uint64(0); i < nchains && d.err == nil; i++ {
		c := d.chain(enc, skipFilter, TableFilter)
		if d.err != nil {
			break
		}
		rs.Chains = append(rs.Chains, c)
	}
	if d.err == nil {
		d.tables(rs, enc)
	}
	enc.index()
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d bytes after the last table", len(d.buf)))
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("decode binary ruleset: %w", d.err)
	}
	return rs, enc, nil
}

func (d *decoder) rule(r *Rule) {
	for _, a := range []*AddrMatch{&r.Src, &r.Dst} {
		d.flags(&a.Set, &a.Invert)
		a.Addr = d.addr()
		a.Mask = d.addr()
	}
	for _, m := range []*IfaceMatch{&r.InIface, &r.OutIface} {
		d.flags(&m.Set, &m.Invert)
		m.Name = d.str()
	}
	d.flags(&r.Proto.Set, &r.Proto.Invert, &r.Fragment.Set, &r.Fragment.Invert)
	r.Proto.Num = d.u8()
	r.Proto.Spelling = d.str()
	n := d.uv()
	if n > uint64(len(d.buf)) {
		d.fail(errTruncated)
		return
	}
	r.Matches = d.newMatches(int(n)) // non-nil, as Rule.Clone leaves it
	for i := range r.Matches {
		r.Matches[i] = d.match()
	}
	r.Target.Kind = TargetKind(d.u8())
	r.Target.Chain = d.str()
	r.Target.RejectWith = d.str()
	if lf := d.u8(); lf&1 != 0 {
		l := &LogOptions{LevelSet: lf&2 != 0}
		l.Level = d.u8()
		l.Flags = d.u8()
		l.Prefix = d.str()
		r.Target.Log = l
	}
	r.Target.Nat = d.natRange()
	r.Target.Mark = d.markTarget()
	r.Target.Connmark = d.connmarkTarget()
	r.Target.Mangle = d.mangleTarget()
	r.Target.NFLog = d.nflogTarget()
	r.Target.Set = d.setTarget()
}

// u32 reads a uvarint that must fit 32 bits.
func (d *decoder) u32() uint32 {
	v := d.uv()
	if v > 0xffffffff {
		d.fail(fmt.Errorf("value %d out of range", v))
	}
	return uint32(v)
}
