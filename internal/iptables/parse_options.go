package iptables

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/xfw-dev/xfw/internal/ir"
)

// do_parse's handling of the rule options (-p, -s, -i, -j, -m, -c, …) and
// the loading of match and target modules.

// parseTargetName is xshared.c's xt_parse_target.
func parseTargetName(name string) (string, *failure) {
	if name == "" {
		return "", paramErr("Invalid target name (too short)")
	}
	if len(name) >= maxNameLen {
		return "", paramErr("Invalid target name `%s' (%d chars max)", name, maxNameLen-1)
	}
	if strings.IndexFunc(name, isSpaceRune) >= 0 {
		return "", paramErr("Invalid target name `%s'", name)
	}
	return name, nil
}

// optProtocol handles -p.
func (p *parser) optProtocol(arg string, invert bool) *failure {
	if f := p.setOption(optProtocol, invert); f != nil {
		return f
	}
	arg = strings.Map(asciiLower, arg)
	p.protoSpelling, p.protoSet = arg, true
	num, f := parseProtocol(arg)
	if f != nil {
		return f
	}
	if num > maxUint8 {
		// Deviation from 1.8.9: /etc/protocols knows numbers beyond the
		// 8-bit protocol field (mptcp is 262); iptables stores them in
		// its 16-bit field and the rule never matches. xfw refuses them.
		return paramErr("protocol \"%s\" (%d) does not fit the 8-bit protocol field", arg, num)
	}
	// The protocol field is 8 bits wide; libxtables returns 16.
	p.ctx.proto = uint8(num)
	p.ctx.protoInvert = invert
	if p.ctx.proto == 0 && invert {
		return paramErr("rule would never match protocol")
	}
	if p.fam == ir.IPv6 && isExtHeader(p.ctx.proto) && !invert {
		p.cmd.Notices = append(p.cmd.Notices, "Warning: never matched protocol: "+arg+". use extension match instead.")
	}
	return nil
}

// asciiLower is tolower() in the C locale.
func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// isExtHeader reports whether an IPv6 next-header value is an extension
// header, which "-p" can never match.
func isExtHeader(proto uint8) bool {
	const (
		ipprotoRouting  = 43
		ipprotoFragment = 44
		ipprotoAH       = 51
		ipprotoDstOpts  = 60
	)
	switch proto {
	case ipprotoRouting, ipprotoFragment, ipprotoAH, ipprotoDstOpts:
		return true
	}
	return false
}

// ifNameSize is IFNAMSIZ: interface names are at most IFNAMSIZ-1 bytes.
const ifNameSize = 16

// optIface handles -i and -o (xtables_parse_interface).
func (p *parser) optIface(which byte, arg string, invert bool) *failure {
	if arg == "" {
		return paramErr("Empty interface is likely to be undesired")
	}
	opt := optViaIn
	if which == 'o' {
		opt = optViaOut
	}
	if f := p.setOption(opt, invert); f != nil {
		return f
	}
	if len(arg)+1 > ifNameSize {
		return paramErr("interface name `%s' must be shorter than IFNAMSIZ (%d)", arg, ifNameSize-1)
	}
	m := ir.IfaceMatch{Set: true, Invert: invert, Name: arg}
	if arg == "+" && !invert {
		// "+" matches every interface: the kernel sees no condition.
		m = ir.IfaceMatch{}
	}
	if !strings.HasSuffix(arg, "+") && strings.ContainsAny(arg, "/ ") {
		p.cmd.Notices = append(p.cmd.Notices, "Warning: weird character in interface `"+arg+"' ('/' and ' ' are not allowed by the kernel).")
	}
	if which == 'i' {
		p.inIface = m
	} else {
		p.outIface = m
	}
	return nil
}

// optCounters handles -c PKTS BYTES (also "-c PKTS,BYTES").
func (p *parser) optCounters(arg string, invert bool) *failure {
	if f := p.setOption(optCounters, invert); f != nil {
		return f
	}
	pcnt, bcnt, haveB := arg, "", false
	if len(arg) > 1 {
		if i := strings.IndexByte(arg[1:], ','); i >= 0 {
			bcnt, haveB = arg[i+2:], true
		}
	}
	if !haveB && p.g.hasArg() {
		bcnt, haveB = p.g.args[p.g.optind], true
		p.g.optind++
	}
	if !haveB {
		return paramErr("-%c requires packet and byte counter", optChar(optCounters))
	}
	pv, ok := scanULL(pcnt)
	if !ok {
		return paramErr("-%c packet counter not numeric", optChar(optCounters))
	}
	bv, ok := scanULL(bcnt)
	if !ok {
		return paramErr("-%c byte counter not numeric", optChar(optCounters))
	}
	p.counters = ir.Counters{Packets: pv, Bytes: bv}
	return nil
}

// scanInt is sscanf(s, "%i", &v) == 1.
func scanInt(s string) (int, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	v, n, _ := cStrtoul(s[i:], 0)
	return int(int32(v)), n > 0
}

// optWait handles -w [SECONDS].
func (p *parser) optWait() *failure {
	if p.restore {
		return paramErr("You cannot use `-w' from %s", p.prog)
	}
	arg, ok := p.g.optarg, p.g.hasOptarg
	if !ok && p.g.hasArg() {
		arg, ok = p.g.args[p.g.optind], true
		p.g.optind++
	}
	p.wait = -1
	if ok {
		v, good := scanInt(arg)
		if !good {
			return paramErr("wait seconds not numeric")
		}
		p.wait = v
	}
	return nil
}

// optWaitInterval handles the deprecated -W USECS.
func (p *parser) optWaitInterval() *failure {
	const maxUsec = 999999
	if p.restore {
		return paramErr("You cannot use `-W' from %s", p.prog)
	}
	arg, ok := p.g.optarg, p.g.hasOptarg
	if !ok && p.g.hasArg() {
		arg, ok = p.g.args[p.g.optind], true
		p.g.optind++
	}
	if !ok {
		return paramErr("wait interval value required")
	}
	v, n, _ := cStrtoul(strings.TrimLeft(arg, " \t\n\v\f\r"), 10)
	if n == 0 {
		return paramErr("wait interval not numeric")
	}
	if uint32(v) > maxUsec {
		return paramErr("too long usec wait %d > 999999 usec", uint32(v))
	}
	p.cmd.Notices = append(p.cmd.Notices, "Ignoring deprecated --wait-interval option.")
	p.waitIntSet = true
	return nil
}

// mergeOpts adds an extension's options to the getopt table, newest first
// after the global options, as xtables_merge_options does.
func (p *parser) mergeOpts(e *extension) {
	for _, l := range p.loaded {
		if l == e {
			return
		}
	}
	p.loaded = append(p.loaded, e)
	key := optTransition{from: unsafe.SliceData(p.opts), n: len(p.opts), ext: e}
	if cached := p.optMemo.find(key); cached != nil {
		p.opts = cached
		p.g.long = cached
		return
	}
	if cached, ok := mergedOptTables.Load(key); ok {
		p.opts = cached.([]*optDef)
		p.g.long = p.opts
		p.optMemo.add(key, p.opts)
		return
	}
	numGlobal := len(globalOptTable)
	merged := append([]*optDef{}, p.opts[:numGlobal]...)
	merged = append(merged, e.opts...)
	merged = append(merged, p.opts[numGlobal:]...)
	if cached, loaded := mergedOptTables.LoadOrStore(key, merged); loaded {
		merged = cached.([]*optDef) // another parser's, the same table
	}
	p.opts = merged
	p.g.long = merged
}

// optTransition names the option table mergeOpts makes of table from
// (its first element and length: the global table or a table of
// mergedOptTables, which are never changed nor freed) when extension ext
// is loaded.
type optTransition struct {
	from **optDef
	n    int
	ext  *extension
}

// optTableMemo remembers a parser's last few mergedOptTables lookups: a
// restore's lines load the same few extensions in the same order, and
// the shared map's lookup costs more than a scan of these.
type optTableMemo struct {
	keys   [optTableMemoSize]optTransition
	tables [optTableMemoSize][]*optDef
	next   int
}

// optTableMemoSize is how many lookups an optTableMemo remembers.
const optTableMemoSize = 8

// find returns the table remembered for key, nil if none.
func (m *optTableMemo) find(key optTransition) []*optDef {
	for i := range m.keys {
		if m.keys[i] == key {
			return m.tables[i]
		}
	}
	return nil
}

// add remembers table for key in place of the oldest.
func (m *optTableMemo) add(key optTransition, table []*optDef) {
	m.keys[m.next], m.tables[m.next] = key, table
	m.next = (m.next + 1) % optTableMemoSize
}

// mergedOptTables caches option tables by the table they extend and the
// extension loaded (optTransition): a table is a function of the order in
// which extensions were loaded, and parsing a large ruleset would
// otherwise build the same tables per rule. Tables are never modified
// once built.
var mergedOptTables sync.Map

// addMatch appends an instance of e to the rule's matches; earlier
// instances of the same module stop receiving options.
func (p *parser) addMatch(e *extension) {
	for _, m := range p.matches {
		if m.ext == e {
			m.completed = true
		}
	}
	var m *matchInst
	if n := len(p.matches); n < len(p.matchBuf) {
		m = &p.matchBuf[n]
	} else {
		m = new(matchInst)
	}
	*m = matchInst{ext: e, state: e.newMatch(&p.ctx)}
	p.matches = append(p.matches, m)
	p.mergeOpts(e)
}

// commandMatch handles -m.
func (p *parser) commandMatch(name string, invert bool) *failure {
	if invert {
		return paramErr("unexpected ! flag before --match")
	}
	if len(name) >= maxNameLen {
		return paramErr("Invalid match name \"%s\" (%d chars max)", name, maxNameLen-1)
	}
	e, mapped := findMatch(p.fam, name)
	if e == nil {
		return missingMatch(p.fam, mapped)
	}
	p.addMatch(e)
	return nil
}

// commandJump handles -j.
func (p *parser) commandJump(name string) *failure {
	name, f := parseTargetName(name)
	if f != nil {
		return f
	}
	p.jumpto = name
	e, std := findTarget(p.fam, name)
	if std && name == "QUEUE" {
		// The standard QUEUE verdict needs a userspace queue, which xfw
		// does not provide: report it as a missing target.
		return missingTarget(p.fam, name)
	}
	if e == nil && name == "CT" {
		// Not a chain xfw could jump to either: say why the target is
		// missing before its options are taken for unknown ones.
		return missingTarget(p.fam, name)
	}
	if e == nil {
		return nil
	}
	p.targetExt = e
	p.target = e.newTarget(&p.ctx)
	p.mergeOpts(e)
	return nil
}

// commandDefault is xshared.c's command_default: options of loaded matches
// and the target, implicit loading of the protocol match, and errors.
func (p *parser) commandDefault(c int, invert bool) (again bool, f *failure) {
	if c == optExt {
		def := p.g.def
		if p.target != nil && def.ext == p.targetExt {
			return false, p.target.parse(&p.ctx, def, p.g.optarg, invert)
		}
		for _, m := range p.matches {
			if m.completed || m.ext != def.ext {
				continue
			}
			return false, m.state.parse(&p.ctx, def, p.g.optarg, invert)
		}
	}
	if e := p.loadProto(); e != nil {
		p.addMatch(e)
		p.g.optind--
		return true, nil
	}
	switch c {
	case optMissing:
		return false, paramErr("option \"%s\" requires an argument", p.g.args[p.g.optind-1])
	case optUnknown:
		if f := p.missingModule(); f != nil {
			return false, f
		}
		return false, paramErr("unknown option \"%s\"", p.g.args[p.g.optind-1])
	}
	return false, paramErr("Unknown arg \"(null)\"")
}

// missingModule explains an unknown option by a module iptables 1.8.9 has
// and xfw does not: the rule's -j target (-j MARK --set-mark 1), else its
// protocol's match (-p sctp --dport 5). Deviation from 1.8.9: without the
// module iptables reports the option as unknown; xfw names the module, as
// the option would be known with it. (The -j name may still be a chain of
// that name: then the option is unknown either way.)
func (p *parser) missingModule() *failure {
	if p.target == nil && p.jumpto != "" && shipped(otherTargets, p.fam, p.jumpto) {
		return missingTarget(p.fam, p.jumpto)
	}
	if name := p.protoModuleName(); name != "" && shipped(iptablesMatches, p.fam, name) {
		if e, _ := findMatch(p.fam, name); e == nil {
			return missingMatch(p.fam, name)
		}
	}
	return nil
}

// loadProto is load_proto: the first unknown option after -p loads the
// match named after the protocol, once.
func (p *parser) loadProto() *extension {
	if !p.protoSet || p.protoUsed {
		return nil
	}
	p.protoUsed = true
	name := p.protoModuleName()
	if name == "" {
		return nil
	}
	e, _ := findMatch(p.fam, name)
	return e
}

// protoModuleName is the match load_proto looks for: -p's name, or the
// name of its number ("" without -p or a name).
func (p *parser) protoModuleName() string {
	if !p.protoSet {
		return ""
	}
	name := p.protoSpelling
	if v, ok := xtStrtoui(name, 0, maxUint8); ok {
		name = protoToName(uint8(v))
	}
	return name
}
