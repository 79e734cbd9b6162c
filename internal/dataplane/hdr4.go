package dataplane

import (
	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The transport header conditions of a generation (-m sctp, -m dccp,
// -m esp, IPv4 -m ah, tcp's --tcp-option) as the data plane evaluates
// them (bpf/hdr4.h): struct xfw_h4cond per condition, in xfw_family_cfg.

// bpfH4Flag mirrors struct xfw_h4cond's flag tests (xt_sctp_flag_info).
type bpfH4Flag struct {
	Type, Flag, Mask, Pad uint8
}

// bpfH4Cond mirrors struct xfw_h4cond.
type bpfH4Cond struct {
	Kind, Flags, Inv, MType uint8
	Sport, Dport            [2]uint16
	SPI                     [2]uint32
	Option, NFlags          uint8
	Types                   uint16
	ChunkMap                [8]uint32
	Fl                      [ir.SCTPMaxFlags]bpfH4Flag
}

// XFW_H4F_* tests of bpfH4Cond.Flags and Inv.
const (
	h4Sports = 0x01
	h4Dports = 0x02
	h4Types  = 0x04
	h4Option = 0x08
)

// h4Ports returns the flag and inversion bits of a port option and its
// range.
func h4Ports(p ir.PortMatch, flag uint8) (uint8, uint8, [2]uint16) {
	return bit(p.Set, flag), bit(p.Set && p.Invert, flag), [2]uint16{p.Range.First, p.Range.Last}
}

// h4Cond returns the data plane's form of condition c.
func h4Cond(c compiler.Hdr4Cond) bpfH4Cond {
	e := bpfH4Cond{Kind: uint8(c.Kind)}
	switch m := c.Match.(type) {
	case *ir.SCTPMatch:
		fs, is, sp := h4Ports(m.SrcPort, h4Sports)
		fd, id, dp := h4Ports(m.DstPort, h4Dports)
		e.Flags, e.Inv = fs|fd|bit(m.HasChunks, h4Types), is|id|bit(m.InvChunks, h4Types)
		e.Sport, e.Dport, e.MType, e.ChunkMap = sp, dp, m.ChunkMatch, m.ChunkMap
		e.NFlags = m.NFlags
		for i, f := range m.Flags {
			e.Fl[i] = bpfH4Flag{Type: f.ChunkType, Flag: f.Flag, Mask: f.Mask}
		}
	case *ir.DCCPMatch:
		fs, is, sp := h4Ports(m.SrcPort, h4Sports)
		fd, id, dp := h4Ports(m.DstPort, h4Dports)
		e.Flags = fs | fd | bit(m.HasTypes, h4Types) | bit(m.HasOption, h4Option)
		e.Inv = is | id | bit(m.InvTypes, h4Types) | bit(m.InvOption, h4Option)
		e.Sport, e.Dport, e.Types, e.Option = sp, dp, m.TypeMask, m.Option
	case *ir.ESPMatch:
		e.Flags, e.Inv, e.SPI = h4Types, bit(m.InvSPIs, h4Types), m.SPIs
	case *ir.AH4Match:
		e.Flags, e.Inv, e.SPI = h4Types, bit(m.InvSPIs, h4Types), m.SPIs
	case nil: // tcp --tcp-option
		e.Flags, e.Inv, e.Option = h4Option, bit(c.Invert, h4Option), c.Option
	}
	return e
}

// fillHdr4 writes the conditions into c (the compiler allows at most
// compiler.MaxHdr4Conds).
func fillHdr4(c *bpfFamilyCfg, conds []compiler.Hdr4Cond) {
	for k, cond := range conds {
		if k >= len(c.H4) {
			break
		}
		c.H4[k] = h4Cond(cond)
		c.NH4 = uint32(k + 1)
	}
}
