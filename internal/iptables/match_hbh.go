package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The hbh and dst matches (libip6t_hbh.c, libip6t_dst.c): the hop-by-hop
// and destination options headers' length and options.

// hbh/dst guided option ids (O_HBH_LEN …).
const (
	optsOptLen = iota
	optsOptOpts
)

// optsExt returns the module of -m hbh (dst false) or -m dst.
func optsExt(dst bool) *extension {
	name := "hbh"
	if dst {
		name = "dst"
	}
	var e *extension
	e = &extension{
		name:   name,
		family: ir.IPv6,
		x6: []x6opt{
			{name: name + "-len", id: optsOptLen, typ: xtUint32, flags: xtInvert},
			{name: name + "-opts", id: optsOptOpts, typ: xtString},
		},
		newMatch: func(*parseCtx) matchState { return &optsState{ext: e, m: ir.OptsMatch{Dst: dst}} },
	}
	return e
}

// The two modules, registered at start.
var (
	hbhExt = registerMatch(optsExt(false))
	dstExt = registerMatch(optsExt(true))
)

// optsState is one hbh or dst match being parsed.
type optsState struct {
	ext   *extension
	m     ir.OptsMatch
	flags x6flags
}

// parseOptsNum is parse_opts_num: strtoul in base 0, what names the number
// (typ: "opt" or "length") in the messages.
func parseOptsNum(ext, s, typ string) (uint64, *failure) {
	v, n, overflow := cStrtoul(s, 0)
	switch {
	case n == 0:
		return 0, paramErr("%s: no valid digits in %s `%s'", ext, typ, s)
	case overflow:
		return 0, paramErr("%s `%s' specified too big: would overflow", typ, s)
	case n != len(s):
		return 0, paramErr("%s: error parsing %s `%s'", ext, typ, s)
	}
	return v, nil
}

// parseOptsList is parse_options: up to IP6T_OPTS_OPTSNR comma-separated
// TYPE[:LEN], each type << 8 | length (ir.OptsAnyLen without one); types
// and lengths keep their low 8 bits.
func parseOptsList(ext, arg string) ([]uint16, *failure) {
	var out []uint16
	rest, more := arg, true
	for more && len(out) < ir.OptsMaxOpts {
		var item string
		item, rest, more = strings.Cut(rest, ",")
		typ, length, hasLen := strings.Cut(item, ":")
		if hasLen && len(out) == ir.OptsMaxOpts-1 {
			return nil, paramErr("too many ports specified")
		}
		t, f := parseOptsNum(ext, typ, "opt")
		if f != nil {
			return nil, f
		}
		o := uint16(t&0xff) << 8
		if !hasLen {
			out = append(out, o|ir.OptsAnyLen)
			continue
		}
		if o == 0 {
			// The two libraries word it differently.
			if ext == "hbh" {
				return nil, paramErr("PAD0 has not got length")
			}
			return nil, paramErr("PAD0 hasn't got length")
		}
		l, f := parseOptsNum(ext, length, "length")
		if f != nil {
			return nil, f
		}
		out = append(out, o|uint16(l&0xff))
	}
	if more {
		return nil, paramErr("too many addresses specified")
	}
	return out, nil
}

// parse implements matchState (hbh_parse, dst_parse).
func (s *optsState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(s.ext, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case optsOptLen:
		if s.m.Len, f = parseXTUint32(s.ext.name, x, arg); f != nil {
			return f
		}
		s.m.HasLen, s.m.InvLen = true, s.m.InvLen || invert
	case optsOptOpts:
		if s.m.Opts, f = parseOptsList(s.ext.name, arg); f != nil {
			return f
		}
		s.m.HasOpts = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *optsState) final(*parseCtx) *failure { return s.flags.fcheck(s.ext) }

// build implements matchState.
func (s *optsState) build() ir.Match { m := s.m; return m.CloneMatch() }

// optsText is print_options: "TYPE[:LEN]" joined by commas.
func optsText(opts []uint16) string {
	words := make([]string, len(opts))
	for i, o := range opts {
		words[i] = fmt.Sprintf("%d", o>>8)
		if o&0xff != ir.OptsAnyLen {
			words[i] += fmt.Sprintf(":%d", o&0xff)
		}
	}
	return strings.Join(words, ",")
}

// writeOpts prints the match as hbh_save / dst_save do.
func writeOpts(b *strings.Builder, m *ir.OptsMatch) {
	name := m.ModuleName()
	if m.HasLen {
		fmt.Fprintf(b, "%s --%s-len %d", bangIf(m.InvLen), name, m.Len)
	}
	if m.HasOpts {
		fmt.Fprintf(b, " --%s-opts %s", name, optsText(m.Opts))
	}
}

// listOpts prints the match as hbh_print / dst_print do (-L).
func listOpts(b *strings.Builder, m *ir.OptsMatch) {
	b.WriteString(" " + m.ModuleName())
	if m.HasLen {
		fmt.Fprintf(b, " length:%s%d", invString(m.InvLen), m.Len)
	}
	if m.HasOpts {
		b.WriteString(" opts " + optsText(m.Opts))
	}
}
