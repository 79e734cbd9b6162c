package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The rt match (libip6t_rt.c): IPv6 routing header fields.

// rt guided option ids (O_RT_TYPE …).
const (
	rtOptType = iota
	rtOptSegsLeft
	rtOptLen
	rtOptRes
	rtOptAddrs
	rtOptNotStrict
)

// rtExt is the rt match module.
var rtExt = registerMatch(&extension{
	name:   "rt",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "rt-type", id: rtOptType, typ: xtUint32, flags: xtInvert},
		{name: "rt-segsleft", id: rtOptSegsLeft, typ: xtUint32RC, flags: xtInvert},
		{name: "rt-len", id: rtOptLen, typ: xtUint32, flags: xtInvert},
		{name: "rt-0-res", id: rtOptRes, typ: xtNone},
		{name: "rt-0-addrs", id: rtOptAddrs, typ: xtString},
		{name: "rt-0-not-strict", id: rtOptNotStrict, typ: xtNone},
	},
	newMatch: func(*parseCtx) matchState {
		return &rtState{m: ir.RTMatch{SegsLeft: [2]uint32{0, math.MaxUint32}}}
	},
})

// rtState is one rt match being parsed.
type rtState struct {
	m     ir.RTMatch
	flags x6flags
}

// parseXTUint32 is xtopt_parse_int for an XTTYPE_UINT32 option of ext.
func parseXTUint32(ext string, o *x6opt, arg string) (uint32, *failure) {
	v, ok := xtStrtoui(arg, 0, math.MaxUint32)
	if !ok {
		return 0, paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", ext, o.name, 0, uint64(math.MaxUint32))
	}
	return uint32(v), nil
}

// parseXTUint32Range is xtopt_parse_mint for an XTTYPE_UINT32RC option
// with libxt's single-value convention: "a" stands for a:a.
func parseXTUint32Range(ext string, o *x6opt, arg string) ([2]uint32, *failure) {
	lo, hi, n, f := o.parseUint32Range(ext, arg)
	if f != nil {
		return [2]uint32{}, f
	}
	if n == 1 {
		hi = lo
	}
	return [2]uint32{lo, hi}, nil
}

// rtType0Given is rt_parse's test before the type-0 options.
func (s *rtState) rtType0Given() bool {
	return s.flags.has(rtOptType) && s.m.Type == 0 && !s.m.InvType
}

// parseRTAddrs is parse_addresses: up to IP6T_RT_HOPS comma-separated
// IPv6 addresses.
func parseRTAddrs(arg string) ([][16]byte, *failure) {
	var out [][16]byte
	rest := arg
	for {
		if len(out) == ir.RTMaxAddrs {
			return nil, paramErr("too many addresses specified")
		}
		word, next, more := strings.Cut(rest, ",")
		a, ok := inetPton6(word)
		if !ok {
			return nil, paramErr("bad address: %s", word)
		}
		out = append(out, a)
		if !more {
			return out, nil
		}
		rest = next
	}
}

// parse implements matchState (rt_parse).
func (s *rtState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(rtExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case rtOptType:
		if s.m.Type, f = parseXTUint32(rtExt.name, x, arg); f != nil {
			return f
		}
		s.m.HasType, s.m.InvType = true, s.m.InvType || invert
	case rtOptSegsLeft:
		if s.m.SegsLeft, f = parseXTUint32Range(rtExt.name, x, arg); f != nil {
			return f
		}
		s.m.HasSegs, s.m.InvSegs = true, s.m.InvSegs || invert
	case rtOptLen:
		if s.m.Len, f = parseXTUint32(rtExt.name, x, arg); f != nil {
			return f
		}
		s.m.HasLen, s.m.InvLen = true, s.m.InvLen || invert
	case rtOptRes:
		if !s.rtType0Given() {
			return paramErr("`--rt-type 0' required before `--rt-0-res'")
		}
		s.m.Res = true
	case rtOptAddrs:
		if !s.rtType0Given() {
			return paramErr("`--rt-type 0' required before `--rt-0-addrs'")
		}
		if s.m.Addrs, f = parseRTAddrs(arg); f != nil {
			return f
		}
		s.m.HasAddrs = true
	case rtOptNotStrict:
		if !s.flags.has(rtOptAddrs) {
			return paramErr("`--rt-0-addr ...' required before `--rt-0-not-strict'")
		}
		s.m.NotStrict = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *rtState) final(*parseCtx) *failure { return s.flags.fcheck(rtExt) }

// build implements matchState.
func (s *rtState) build() ir.Match { m := s.m; return m.CloneMatch() }

// writeRTAddrs is print_addresses.
func writeRTAddrs(b *strings.Builder, addrs [][16]byte) {
	for i, a := range addrs {
		if i == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(inetNtop6(a))
	}
}

// writeRT prints the match as rt_save does. Deviation from 1.8.9: an
// inverted 0:4294967295 range is saved (1.8.9 drops it, and with it the
// inversion; later releases and the conformance suite keep it).
func writeRT(b *strings.Builder, m *ir.RTMatch) {
	if m.HasType {
		fmt.Fprintf(b, "%s --rt-type %d", bangIf(m.InvType), m.Type)
	}
	if !(m.SegsLeft[0] == 0 && m.SegsLeft[1] == math.MaxUint32 && !m.InvSegs) {
		fmt.Fprintf(b, "%s --rt-segsleft %s", bangIf(m.InvSegs), rangeText(m.SegsLeft))
	}
	if m.HasLen {
		fmt.Fprintf(b, "%s --rt-len %d", bangIf(m.InvLen), m.Len)
	}
	if m.Res {
		b.WriteString(" --rt-0-res")
	}
	if m.HasAddrs {
		b.WriteString(" --rt-0-addrs")
	}
	writeRTAddrs(b, m.Addrs)
	if m.NotStrict {
		b.WriteString(" --rt-0-not-strict")
	}
}

// listRT prints the match as rt_print does (-L).
func listRT(b *strings.Builder, m *ir.RTMatch) {
	b.WriteString(" rt")
	if m.HasType {
		fmt.Fprintf(b, " type:%s%d", invString(m.InvType), int32(m.Type))
	}
	listNums(b, "segsleft", m.SegsLeft, m.InvSegs)
	if m.HasLen {
		fmt.Fprintf(b, " length:%s%d", invString(m.InvLen), m.Len)
	}
	if m.Res {
		b.WriteString(" reserved")
	}
	if m.HasAddrs {
		b.WriteString(" 0-addrs")
	}
	writeRTAddrs(b, m.Addrs)
	if m.NotStrict {
		b.WriteString(" 0-not-strict")
	}
}

// bangIf is the " !" save functions print before an inverted option.
func bangIf(inv bool) string {
	if inv {
		return " !"
	}
	return ""
}

// rangeText prints an inclusive range as the save functions do: "a" or
// "a:b".
func rangeText(r [2]uint32) string {
	if r[0] == r[1] {
		return fmt.Sprintf("%d", r[0])
	}
	return fmt.Sprintf("%d:%d", r[0], r[1])
}

// listNums is print_nums of libip6t_rt (and print_ids of libip6t_frag,
// print_spis of libip6t_ah, with their own spacing): " NAME:[!]a" or
// " NAMEs:[!]a:b", nothing for the whole range uninverted.
func listNums(b *strings.Builder, name string, r [2]uint32, inv bool) {
	if r[0] == 0 && r[1] == math.MaxUint32 && !inv {
		return
	}
	b.WriteString(" " + name)
	if r[0] == r[1] {
		fmt.Fprintf(b, ":%s%d", invString(inv), r[0])
	} else {
		fmt.Fprintf(b, "s:%s%d:%d", invString(inv), r[0], r[1])
	}
}
