package iptables

import (
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The iprange, comment, length, ttl, hl and mac matches.

// iprange guided option ids.
const (
	iprangeOptSrc = iota
	iprangeOptDst
)

// iprangeExt is the iprange match module.
var iprangeExt = registerMatch(&extension{
	name: "iprange",
	x6: []x6opt{
		{name: "src-range", id: iprangeOptSrc, typ: xtString, flags: xtInvert},
		{name: "dst-range", id: iprangeOptDst, typ: xtString, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &iprangeState{} },
})

// iprangeState is one iprange match being parsed.
type iprangeState struct {
	m     ir.IPRangeMatch
	flags x6flags
}

// parseIPRangeAddr parses one end of a range: libxtables' numeric address
// parsers (IPv4 autocompletes "10.1" to 10.1.0.0; IPv6 uses inet_pton).
func parseIPRangeAddr(fam ir.Family, s, optname string) (netip.Addr, *failure) {
	if fam == ir.IPv6 {
		if a, ok := inetPton6(s); ok {
			return netip.AddrFrom16(a), nil
		}
	} else if a, ok := numericToIPv4(s, false); ok {
		return netip.AddrFrom4(a), nil
	}
	return netip.Addr{}, paramErr("iprange: Bad value for \"%s\" option: \"%s\"", optname, s)
}

// parse implements matchState.
func (s *iprangeState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(iprangeExt, o.id, invert)
	if f != nil {
		return f
	}
	from, to, ok := strings.Cut(arg, "-")
	if !ok {
		to = from
	}
	r := ir.AddrRange{Set: true, Invert: invert}
	optname := "--" + x.name
	if r.From, f = parseIPRangeAddr(c.fam, from, optname); f != nil {
		return f
	}
	if r.To, f = parseIPRangeAddr(c.fam, to, optname); f != nil {
		return f
	}
	if ok && r.From.Compare(r.To) > 0 {
		c.notice("xt_iprange: range " + from + "-" + to + " is reversed and will never match")
	}
	if o.id == iprangeOptSrc {
		s.m.Src = r
	} else {
		s.m.Dst = r
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *iprangeState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("iprange match: You must specify `--src-range' or `--dst-range'")
	}
	return s.flags.fcheck(iprangeExt)
}

// build implements matchState.
func (s *iprangeState) build() ir.Match { m := s.m; return &m }

// maxCommentLen is XT_MAX_COMMENT_LEN (with the NUL): longer comments are
// cut to maxCommentLen-1 bytes, as iptables 1.8.9 does.
const maxCommentLen = 256

// commentExt is the comment match module.
var commentExt = registerMatch(&extension{
	name: "comment",
	x6: []x6opt{
		{name: "comment", id: 0, typ: xtString, flags: xtMand, size: maxCommentLen},
	},
	newMatch: func(c *parseCtx) matchState { return c.commentSlab().next() },
})

// commentState is one comment match being parsed.
type commentState struct {
	m     ir.CommentMatch
	flags x6flags
}

// parse implements matchState.
func (s *commentState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(commentExt, o.id, invert)
	if f != nil {
		return f
	}
	if s.m.Text, f = x.parseString(arg); f != nil {
		return f
	}
	if c.slabs != nil {
		s.m.Text = c.slabs.comments.keep(s.m.Text)
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *commentState) final(*parseCtx) *failure { return s.flags.fcheck(commentExt) }

// build implements matchState.
// The state is built once and dropped: the match is its own.
func (s *commentState) build() ir.Match { return &s.m }

// lengthExt is the length match module.
var lengthExt = registerMatch(&extension{
	name: "length",
	x6: []x6opt{
		{name: "length", id: 0, typ: xtUint16RC, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &lengthState{} },
})

// lengthState is one length match being parsed.
type lengthState struct {
	m     ir.LengthMatch
	flags x6flags
}

// parse implements matchState.
func (s *lengthState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(lengthExt, o.id, invert)
	if f != nil {
		return f
	}
	lo, hi, n, f := x.parseUint16Range(lengthExt.name, arg)
	if f != nil {
		return f
	}
	if n == 1 {
		hi = lo
	}
	s.m = ir.LengthMatch{Invert: invert, Min: lo, Max: hi}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *lengthState) final(*parseCtx) *failure { return s.flags.fcheck(lengthExt) }

// build implements matchState.
func (s *lengthState) build() ir.Match { m := s.m; return &m }

// ttl and hl guided option ids (enum order of libipt_ttl/libip6t_hl).
const (
	ttlOptEq = iota
	ttlOptLt
	ttlOptGt
)

// ttlExclAll makes the three comparisons mutually exclusive.
const ttlExclAll = 1<<ttlOptEq | 1<<ttlOptLt | 1<<ttlOptGt

// ttlExt is the ttl match module (IPv4).
var ttlExt = registerMatch(&extension{
	name:   "ttl",
	family: ir.IPv4,
	x6: []x6opt{
		{name: "ttl-lt", id: ttlOptLt, typ: xtUint8, excl: ttlExclAll},
		{name: "ttl-gt", id: ttlOptGt, typ: xtUint8, excl: ttlExclAll},
		{name: "ttl-eq", id: ttlOptEq, typ: xtUint8, flags: xtInvert, excl: ttlExclAll},
		{name: "ttl", id: ttlOptEq, typ: xtUint8, excl: ttlExclAll},
	},
	newMatch: func(*parseCtx) matchState { return &ttlState{} },
})

// hlExt is the hl match module (IPv6).
var hlExt = registerMatch(&extension{
	name:   "hl",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "hl-lt", id: ttlOptLt, typ: xtUint8, excl: ttlExclAll},
		{name: "hl-gt", id: ttlOptGt, typ: xtUint8, excl: ttlExclAll},
		{name: "hl-eq", id: ttlOptEq, typ: xtUint8, flags: xtInvert, excl: ttlExclAll},
		{name: "hl", id: ttlOptEq, typ: xtUint8, excl: ttlExclAll},
	},
	newMatch: func(*parseCtx) matchState { return &ttlState{hl: true} },
})

// ttlState is one ttl or hl match being parsed.
type ttlState struct {
	hl    bool
	m     ir.TTLMatch
	flags x6flags
}

// ext returns the module of the match.
func (s *ttlState) ext() *extension {
	if s.hl {
		return hlExt
	}
	return ttlExt
}

// parse implements matchState.
func (s *ttlState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	e := s.ext()
	x, f := s.flags.begin(e, o.id, invert)
	if f != nil {
		return f
	}
	v, f := x.parseUint8(e.name, arg)
	if f != nil {
		return f
	}
	s.m = ir.TTLMatch{HL: s.hl, Value: v}
	switch o.id {
	case ttlOptEq:
		s.m.Op = ir.CmpEq
		if invert {
			s.m.Op = ir.CmpNe
		}
	case ttlOptLt:
		s.m.Op = ir.CmpLt
	case ttlOptGt:
		s.m.Op = ir.CmpGt
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *ttlState) final(*parseCtx) *failure {
	if s.flags == 0 {
		if s.hl {
			return paramErr("HL match: You must specify one of `--hl-eq', `--hl-lt', `--hl-gt'")
		}
		return paramErr("TTL match: You must specify one of `--ttl-eq', `--ttl-lt', `--ttl-gt")
	}
	return s.flags.fcheck(s.ext())
}

// build implements matchState.
func (s *ttlState) build() ir.Match { m := s.m; return &m }

// macExt is the mac match module.
var macExt = registerMatch(&extension{
	name: "mac",
	x6: []x6opt{
		{name: "mac-source", id: 0, typ: xtEtherMAC, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &macState{} },
})

// macState is one mac match being parsed.
type macState struct {
	m     ir.MACMatch
	flags x6flags
}

// parseEtherMAC is xtopt_parse_ethermac: six colon-separated hexadecimal
// bytes, each read with strtoul and at most two characters long.
func parseEtherMAC(s string) ([6]byte, *failure) {
	var mac [6]byte
	bad := paramErr("Invalid MAC address specified.")
	for i := range mac {
		const maxDigits = 2 // characters per byte, sign and blanks included
		v, n, _ := cStrtoul(s, hexadecimal)
		if n > maxDigits {
			return mac, bad
		}
		mac[i] = byte(v)
		rest := s[n:]
		if i < len(mac)-1 {
			if !strings.HasPrefix(rest, ":") {
				return mac, bad
			}
			s = rest[1:]
		} else if rest != "" {
			return mac, bad
		}
	}
	return mac, nil
}

// parse implements matchState.
func (s *macState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(macExt, o.id, invert); f != nil {
		return f
	}
	mac, f := parseEtherMAC(arg)
	if f != nil {
		return f
	}
	s.m = ir.MACMatch{Invert: invert, Addr: mac}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *macState) final(*parseCtx) *failure { return s.flags.fcheck(macExt) }

// build implements matchState.
func (s *macState) build() ir.Match { m := s.m; return &m }
