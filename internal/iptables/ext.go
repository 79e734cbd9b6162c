package iptables

import (
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file is the extension framework: the match and target modules xfw
// supports, described the way libxtables describes them (name, family, long
// options, parse and final-check callbacks), plus an emulation of libxtables'
// "guided" option parser (xtables_option_parse / xtables_options_fcheck)
// whose checks and messages most extensions rely on.

// extension is one match or target module.
type extension struct {
	name string
	// family is the only family the module exists for, or 0 for both
	// (libxt_* modules).
	family ir.Family
	// x6 lists the guided options in table order; old-style modules (tcp)
	// leave it nil and set opts.
	x6   []x6opt
	opts []*optDef
	// newMatch or newTarget creates the per-rule state of one instance.
	newMatch  func(c *parseCtx) matchState
	newTarget func(c *parseCtx) targetState
}

// matchState is one instance of a match module in a rule being parsed.
type matchState interface {
	parse(c *parseCtx, o *optDef, arg string, invert bool) *failure
	final(c *parseCtx) *failure
	build() ir.Match
}

// targetState is the instance of a target module in a rule being parsed.
type targetState interface {
	parse(c *parseCtx, o *optDef, arg string, invert bool) *failure
	final(c *parseCtx) *failure
	build(t *ir.Target)
}

// parseCtx is what extension callbacks may look at: the rule's family and
// protocol so far, and the argument vector (tcp's --tcp-flags takes a
// second word).
type parseCtx struct {
	fam   ir.Family
	proto uint8
	// protoInvert is the "! -p" flag.
	protoInvert bool
	g           *getopt
	// notice records a warning iptables prints on standard error.
	notice func(string)
	// sets looks up the ipsets the set match names (nil: no set exists).
	sets SetLookup
	// slabs hands out the states of the most common modules; it
	// outlives a parse (parser.release).
	slabs *stateSlabs
}

// stateSlabs holds the states of the modules every kube-proxy rule has,
// cut from slabs instead of allocated one by one (a restore parses
// hundreds of thousands of them). A state becomes its rule's match or
// target (build), so a slab lives as long as any rule built from it.
type stateSlabs struct {
	comment   slab[commentState]
	tcp       slab[tcpState]
	statistic slab[statisticState]
	nat       slab[natState]
	// comments keeps the comments' text apart from the lines read ahead.
	comments keptText
}

// keptTextBlock is the size of the blocks keptText copies texts into.
const keptTextBlock = 16 << 10

// keptText copies short texts a rule keeps (comments) out of the line
// they were read from into blocks of their own, so that the rules do not
// hold the restore's line blocks (lineText): a kube-proxy restore of
// 10,000 services kept 47 MB of lines alive through its compile for 3 MB
// of comments. Consecutive equal texts (the rules of one service) share
// one copy. A block is only appended to, so a kept text never changes.
type keptText struct {
	block strings.Builder
	last  string
}

// keep returns a copy of s that shares no memory with s.
func (k *keptText) keep(s string) string {
	switch {
	case s == k.last && len(s) > 0:
		return k.last
	case len(s) == 0:
		return ""
	case len(s) > keptTextBlock/4:
		k.last = strings.Clone(s)
		return k.last
	}
	if k.block.Cap()-k.block.Len() < len(s) {
		k.block = strings.Builder{}
		k.block.Grow(keptTextBlock)
	}
	k.block.WriteString(s)
	b := k.block.String()
	k.last = b[len(b)-len(s):]
	return k.last
}

// slabLen is the number of states a slab holds.
const slabLen = 32

// slab cuts zero values of T from arrays of slabLen.
type slab[T any] struct{ free []T }

// next returns a zero T; s nil allocates it alone.
func (s *slab[T]) next() *T {
	if s == nil {
		return new(T)
	}
	if len(s.free) == 0 {
		s.free = make([]T, slabLen)
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

// commentSlab and the others are c's slabs of each state, nil (one
// allocation per state) for a context without slabs.
func (c *parseCtx) commentSlab() *slab[commentState] {
	if c.slabs == nil {
		return nil
	}
	return &c.slabs.comment
}

func (c *parseCtx) tcpSlab() *slab[tcpState] {
	if c.slabs == nil {
		return nil
	}
	return &c.slabs.tcp
}

func (c *parseCtx) statisticSlab() *slab[statisticState] {
	if c.slabs == nil {
		return nil
	}
	return &c.slabs.statistic
}

func (c *parseCtx) natSlab() *slab[natState] {
	if c.slabs == nil {
		return nil
	}
	return &c.slabs.nat
}

// Guided option types (enum xt_option_type), as far as xfw's modules use them.
type x6type uint8

// The option types.
const (
	xtNone x6type = iota
	xtString
	xtUint8
	xtUint16RC
	xtSyslogLevel
	xtPortRC
	xtEtherMAC
	xtUint32RC
	xtProtocol
	xtHostMask
	xtUint32
)

// Guided option flags (XTOPT_*).
const (
	xtInvert = 1 << iota
	xtMand
	xtMulti
)

// x6opt is one entry of a guided option table (struct xt_option_entry).
type x6opt struct {
	name  string
	id    int
	typ   x6type
	flags int
	// excl and also are bit sets of option ids.
	excl, also uint32
	// min and max bound numbers or, for strings, lengths (0 = unset).
	min, max uint64
	// size is the destination size for strings (truncation) in bytes,
	// including the terminating NUL.
	size int
	// keepMin bounds a range's second value by min, not by the first
	// value, as iptables 1.8.9 does (the module checks the order).
	keepMin bool
}

// initOpts fills in the getopt table of an extension from its guided
// options, as xtables_options_xfrm does.
func (e *extension) initOpts() {
	if e.x6 == nil {
		for _, o := range e.opts {
			o.ext = e
		}
		return
	}
	e.opts = nil
	for _, x := range e.x6 {
		has := argRequired
		if x.typ == xtNone {
			has = argNone
		}
		e.opts = append(e.opts, &optDef{name: x.name, hasArg: has, ext: e, id: x.id})
	}
}

// lookup returns the first guided option with the id, as
// xtables_option_lookup does; messages therefore name the first spelling.
func (e *extension) lookup(id int) *x6opt {
	for i := range e.x6 {
		if e.x6[i].id == id {
			return &e.x6[i]
		}
	}
	return nil
}

// x6flags tracks which guided options an instance has seen (xflags).
type x6flags uint32

// begin performs xtables_option_parse's checks before an option's value is
// parsed: single use and inversion.
func (f *x6flags) begin(e *extension, id int, invert bool) (*x6opt, *failure) {
	o := e.lookup(id)
	bit := uint32(1) << id
	if (o.flags&xtMulti == 0 || o.excl&bit != 0) && uint32(*f)&bit != 0 {
		return o, paramErr("%s: option \"--%s\" can only be used once.\n", e.name, o.name)
	}
	if invert && o.flags&xtInvert == 0 {
		return o, paramErr("%s: option \"--%s\" cannot be inverted.\n", e.name, o.name)
	}
	return o, nil
}

// done records that option id was parsed.
func (f *x6flags) done(id int) { *f |= x6flags(1) << id }

// has reports whether option id was given.
func (f x6flags) has(id int) bool { return uint32(f)&(1<<id) != 0 }

// fcheck is xtables_options_fcheck: mandatory options, "also" requirements
// and mutual exclusions.
func (f x6flags) fcheck(e *extension) *failure {
	const maxIDs = 32 // bits in the xflags word
	for _, o := range e.x6 {
		if o.flags&xtMand != 0 && !f.has(o.id) {
			return paramErr("%s: option \"--%s\" must be specified\n", e.name, o.name)
		}
		if !f.has(o.id) {
			continue
		}
		// Only the ids o names in also or excl can fail (xflags'
		// loop over every id checks nothing else).
		for i := 0; i < maxIDs; i++ {
			if i == o.id || (o.also|o.excl)&(uint32(1)<<i) == 0 {
				continue
			}
			other := e.lookup(i)
			if other == nil {
				continue
			}
			of := uint32(1) << i
			if o.also&of != 0 && uint32(f)&of == 0 {
				return paramErr("%s: option \"--%s\" also requires \"--%s\".\n", e.name, o.name, other.name)
			}
			if o.excl&of != 0 && f.has(o.id) && f.has(i) {
				return paramErr("%s: option \"--%s\" cannot be used together with \"--%s\".\n", e.name, o.name, other.name)
			}
		}
	}
	return nil
}

// parseString applies xtopt_parse_string: length limits, then truncation
// to the destination size.
func (o *x6opt) parseString(arg string) (string, *failure) {
	if o.min != 0 && uint64(len(arg)) < o.min {
		return "", paramErr("Argument must have a minimum length of %d characters\n", o.min)
	}
	if o.max != 0 && uint64(len(arg)) > o.max {
		return "", paramErr("Argument must have a maximum length of %d characters\n", o.max)
	}
	if o.size > 0 && len(arg) >= o.size {
		arg = arg[:o.size-1]
	}
	return arg, nil
}

// parseUint8 applies xtopt_parse_int for an XTTYPE_UINT8 option.
func (o *x6opt) parseUint8(ext, arg string) (uint8, *failure) {
	lo, hi := o.min, o.max
	if hi == 0 {
		hi = maxUint8
	}
	v, _, ok := xtStrtoul(arg, 0, lo, hi, true)
	if !ok {
		return 0, paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", ext, o.name, lo, hi)
	}
	return uint8(v), nil
}

// parseUint16Range applies xtopt_parse_mint for an XTTYPE_UINT16RC option:
// "a", "a:b", ":b", "a:", ":" or "". Deviation from 1.8.9: a second value
// below the first is rejected (later iptables releases raise the lower bound
// after the first component, and the conformance suite expects "4:3" to
// fail).
func (o *x6opt) parseUint16Range(ext, arg string) (lo, hi uint16, n int, f *failure) {
	lmax := uint64(maxUint16)
	if o.max != 0 && o.max < lmax {
		lmax = o.max
	}
	l, h, n, f := o.parseUintRange(ext, arg, lmax)
	return uint16(l), uint16(h), n, f
}

// parseUint32Range applies xtopt_parse_mint for an XTTYPE_UINT32RC option,
// with the same deviation as parseUint16Range.
func (o *x6opt) parseUint32Range(ext, arg string) (lo, hi uint32, n int, f *failure) {
	l, h, n, f := o.parseUintRange(ext, arg, math.MaxUint32)
	return uint32(l), uint32(h), n, f
}

// parseUintRange is xtopt_parse_mint for values up to lmax.
func (o *x6opt) parseUintRange(ext, arg string, lmax uint64) (lo, hi uint64, n int, f *failure) {
	const maxComponents = 2
	lmin := o.min
	var vals [maxComponents]uint64
	rest := arg
	for {
		if n == maxComponents {
			return 0, 0, 0, paramErr("%s: Too many components for option \"--%s\" (max: %d)\n", ext, o.name, maxComponents)
		}
		var value uint64
		end := 0
		if rest == "" || rest[0] == ':' {
			if n == 1 {
				value = lmax
			} else {
				value = lmin
			}
		} else {
			v, e, ok := xtStrtoul(rest, 0, lmin, lmax, false)
			if !ok {
				return 0, 0, 0, paramErr("%s: bad value for option \"--%s\" near \"%s\", or out of range (%d-%d).\n", ext, o.name, rest, lmin, lmax)
			}
			if e < len(rest) && rest[e] != ':' {
				return 0, 0, 0, paramErr("%s: Argument to \"--%s\" has unexpected characters near \"%s\".\n", ext, o.name, rest[e:])
			}
			value, end = v, e
			if !o.keepMin {
				lmin = v
			}
		}
		vals[n] = value
		n++
		if end >= len(rest) {
			break
		}
		rest = rest[end+1:]
	}
	return vals[0], vals[1], n, nil
}

// supported lists the modules xfw supports, by kind and name.
var (
	matchExts = map[string]*extension{}
	// matchExts6 holds IPv6 modules whose name an IPv4 module also has
	// (libip6t_ah beside libipt_ah): registerMatch6.
	matchExts6 = map[string]*extension{}
	targetExts = map[string]*extension{}
)

// registerMatch adds a match module.
func registerMatch(e *extension) *extension {
	e.initOpts()
	matchExts[e.name] = e
	return e
}

// registerMatch6 adds an IPv6-only match module that shares its name with
// an IPv4 one; findMatch prefers it in IPv6.
func registerMatch6(e *extension) *extension {
	e.initOpts()
	matchExts6[e.name] = e
	return e
}

// registerTarget adds a target module.
func registerTarget(e *extension) *extension {
	e.initOpts()
	targetExts[e.name] = e
	return e
}

// otherTargets are the target modules iptables 1.8.9 ships that xfw does not
// support, by family (0 for both). A new chain may not take their names,
// exactly as with iptables, so that rulesets stay loadable by it; naming
// one fails as a missing module does (missingTarget).
var otherTargets = map[string]ir.Family{
	"AUDIT": 0, "CHECKSUM": 0, "CLASSIFY": 0, "CONNSECMARK": 0,
	"HMARK": 0, "IDLETIMER": 0, "LED": 0,
	"NFQUEUE": 0,
	"RATEEST": 0, "SECMARK": 0,
	"SYNPROXY": 0, "TCPOPTSTRIP": 0, "TEE": 0,
	"TPROXY": 0, "TRACE": 0, "NETMAP": 0,
	"CLUSTERIP": ir.IPv4, "ECN": ir.IPv4, "ULOG": ir.IPv4,
	"DNPT": ir.IPv6, "SNPT": ir.IPv6,
}

// iptablesMatches are the match modules iptables 1.8.9 ships, by family (0
// for both): those xfw does not support are refused as "not supported by
// xfw" (missingMatch), other names as iptables refuses a name it has no
// module for.
var iptablesMatches = map[string]ir.Family{
	"addrtype": 0, "bpf": 0, "cgroup": 0, "cluster": 0, "comment": 0, "connbytes": 0,
	"connlabel": 0, "connlimit": 0, "connmark": 0, "conntrack": 0, "cpu": 0, "dccp": 0,
	"devgroup": 0, "dscp": 0, "ecn": 0, "esp": 0, "hashlimit": 0, "helper": 0, "ipcomp": 0,
	"iprange": 0, "ipvs": 0, "length": 0, "limit": 0, "mac": 0, "mark": 0, "multiport": 0,
	"nfacct": 0, "osf": 0, "owner": 0, "physdev": 0, "pkttype": 0, "policy": 0, "quota": 0,
	"rateest": 0, "recent": 0, "rpfilter": 0, "sctp": 0, "set": 0, "socket": 0, "state": 0,
	"statistic": 0, "string": 0, "tcp": 0, "tcpmss": 0, "time": 0, "tos": 0, "u32": 0, "udp": 0,
	"ah":   0,
	"icmp": ir.IPv4, "realm": ir.IPv4, "ttl": ir.IPv4,
	"dst": ir.IPv6, "eui64": ir.IPv6, "frag": ir.IPv6, "hbh": ir.IPv6, "hl": ir.IPv6,
	"icmp6": ir.IPv6, "ipv6header": ir.IPv6, "mh": ir.IPv6, "rt": ir.IPv6, "srh": ir.IPv6,
}

// shipped reports whether iptables 1.8.9 has module name (in table, by
// family) for family fam.
func shipped(table map[string]ir.Family, fam ir.Family, name string) bool {
	f, ok := table[name]
	return ok && (f == 0 || f == fam)
}

// Why a module cannot be loaded: libxtables appends strerror(errno) to
// "Couldn't load match `NAME':" for a name it has no library for; xfw
// says why for the modules iptables has and xfw does not.
const (
	noSuchModule   = "No such file or directory"
	notSupported   = " not supported by xfw"
	helpersMissing = " connection tracking helpers (FTP, SIP, ...) are not supported by xfw"
	// rpfilterMissing: the route lookup BPF programs may make
	// (bpf_fib_lookup) fails on interfaces that do not forward
	// (docs/differences.md).
	rpfilterMissing = " reverse path filtering is not supported by xfw (BPF route lookups need forwarding on)"
)

// missingMatch is the failure of -m name (or of the protocol match -p
// name would load) when xfw has no such match module.
func missingMatch(fam ir.Family, name string) *failure {
	why := noSuchModule
	switch {
	case name == "helper":
		why = helpersMissing
	case name == "rpfilter":
		why = rpfilterMissing
	case shipped(iptablesMatches, fam, name):
		why = notSupported
	}
	return paramErr("Couldn't load match `%s':%s\n", name, why)
}

// missingTarget is the failure of -j name when name is neither a chain nor
// a target module xfw has.
func missingTarget(fam ir.Family, name string) *failure {
	why := noSuchModule
	switch {
	case name == "QUEUE" || shipped(otherTargets, fam, name):
		why = notSupported
	}
	return paramErr("Couldn't load target `%s':%s\n", name, why)
}

// findMatch is xtables_find_match's name resolution for family fam: the
// module, the name it is known by (aliases of icmp6 are mapped), or nil.
func findMatch(fam ir.Family, name string) (*extension, string) {
	if name == "icmpv6" || name == "ipv6-icmp" {
		name = "icmp6"
	}
	if e := matchExts6[name]; e != nil && fam == ir.IPv6 {
		return e, name
	}
	e := matchExts[name]
	if e == nil || (e.family != 0 && e.family != fam) {
		return nil, name
	}
	return e, name
}

// findTarget is xtables_find_target for family fam: the standard verdicts
// map to the standard target (nil extension, ok true).
func findTarget(fam ir.Family, name string) (e *extension, standard bool) {
	switch name {
	case "", "ACCEPT", "DROP", "RETURN", "QUEUE", "standard":
		return nil, true
	}
	e = targetExts[name]
	if e == nil || (e.family != 0 && e.family != fam) {
		return nil, false
	}
	return e, false
}
