package dataplane

import (
	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The IPv6 extension header conditions of a generation (-m rt, -m frag,
// IPv6 -m ah, -m hbh, -m dst, -m mh, -m ipv6header) as the data plane
// evaluates them (bpf/ip6ext.h): struct xfw_ext6cond per condition, in
// xfw_family_cfg.

// ext6MaxAddrs is XFW_EXT6_MAX_ADDRS: -m rt addresses of all conditions.
const ext6MaxAddrs = compiler.Ext6MaxAddrs

// bpfExt6Cond mirrors struct xfw_ext6cond.
type bpfExt6Cond struct {
	Kind, Flags, Inv, NAddr uint8
	Addr0                   uint8
	Pad                     [3]uint8
	Lo, Hi                  uint32
	Type                    uint32
	Len                     uint32
}

// XFW_E6_* flags and XFW_E6I_* inversions of bpfExt6Cond.
const (
	e6Type    = 0x01
	e6Len     = 0x02
	e6Res     = 0x04
	e6Addrs   = 0x08
	e6NStrict = 0x10
	e6First   = 0x20
	e6More    = 0x40
	e6Last    = 0x80
	e6Opts    = 0x08 // hbh, dst
	e6Soft    = 0x10 // ipv6header

	e6InvRange = 0x1
	e6InvType  = 0x2
	e6InvLen   = 0x4
)

// bit returns flag when on, else 0.
func bit(on bool, flag uint8) uint8 {
	if on {
		return flag
	}
	return 0
}

// fillExt6 writes the conditions into c (the compiler allows at most
// compiler.MaxExt6Conds conditions, ext6MaxAddrs addresses and
// compiler.Ext6MaxOpts options).
func fillExt6(c *bpfFamilyCfg, conds []ir.Match) {
	naddr, nopt := 0, 0
	for k, m := range conds {
		if k >= len(c.Ext6) {
			break
		}
		e := &c.Ext6[k]
		if kind, ok := compiler.Ext6Kind(m); ok {
			c.Ext6Kinds |= 1 << kind
		}
		if fillExt6Hdr(c, e, m, &nopt) {
			c.Next6 = uint32(k + 1)
			continue
		}
		switch m := m.(type) {
		case *ir.RTMatch:
			e.Kind = compiler.Ext6KindRT
			e.Flags = bit(m.HasType, e6Type) | bit(m.HasLen, e6Len) | bit(m.Res, e6Res) |
				bit(m.HasAddrs, e6Addrs) | bit(m.NotStrict, e6NStrict)
			e.Inv = bit(m.InvSegs, e6InvRange) | bit(m.InvType, e6InvType) | bit(m.InvLen, e6InvLen)
			e.Lo, e.Hi, e.Type, e.Len = m.SegsLeft[0], m.SegsLeft[1], m.Type, m.Len
			e.Addr0, e.NAddr = uint8(naddr), uint8(len(m.Addrs))
			for _, a := range m.Addrs {
				if naddr < ext6MaxAddrs {
					c.Ext6Addr[naddr] = a
				}
				naddr++
			}
		case *ir.FragMatch:
			e.Kind = compiler.Ext6KindFrag
			e.Flags = bit(m.Res, e6Res) | bit(m.First, e6First) | bit(m.More, e6More) | bit(m.Last, e6Last)
			e.Inv = bit(m.InvIDs, e6InvRange)
			e.Lo, e.Hi = m.IDs[0], m.IDs[1]
		case *ir.AH6Match:
			e.Kind = compiler.Ext6KindAH
			e.Flags = bit(m.Len != 0, e6Len) | bit(m.Res, e6Res)
			e.Inv = bit(m.InvSPIs, e6InvRange) | bit(m.InvLen, e6InvLen)
			e.Lo, e.Hi, e.Len = m.SPIs[0], m.SPIs[1], m.Len
		}
		c.Next6 = uint32(k + 1)
	}
}

// fillExt6Hdr fills e for an hbh, dst, mh or ipv6header condition, its
// options from c.Ext6Opt[*nopt]; false for other matches.
func fillExt6Hdr(c *bpfFamilyCfg, e *bpfExt6Cond, m ir.Match, nopt *int) bool {
	switch m := m.(type) {
	case *ir.OptsMatch:
		e.Kind = compiler.Ext6KindHBH
		if m.Dst {
			e.Kind = compiler.Ext6KindDst
		}
		e.Flags = bit(m.HasLen, e6Len) | bit(m.HasOpts, e6Opts)
		e.Inv = bit(m.InvLen, e6InvLen)
		e.Len = m.Len
		e.Addr0, e.NAddr = uint8(*nopt), uint8(len(m.Opts))
		for _, o := range m.Opts {
			if *nopt < len(c.Ext6Opt) {
				c.Ext6Opt[*nopt] = o
			}
			*nopt++
		}
	case *ir.MHMatch:
		e.Kind = compiler.Ext6KindMH
		e.Inv = bit(m.Invert, e6InvRange)
		e.Lo, e.Hi = uint32(m.Types[0]), uint32(m.Types[1])
	case *ir.IPv6HeaderMatch:
		e.Kind = compiler.Ext6KindIP6Hdr
		e.Flags = bit(m.Soft, e6Soft)
		e.Lo = uint32(m.Flags)
		if m.Invert {
			e.Hi = 0xff // invflags
		}
	default:
		return false
	}
	return true
}
