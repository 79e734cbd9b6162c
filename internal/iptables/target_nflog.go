package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The NFLOG target (libxt_NFLOG): iptables 1.8.9's revision 0 options,
// parsed, checked and printed as libxt_NFLOG does. xfw delivers the events
// on its own NFLOG stream (xfw nflog), not to nfnetlink_log listeners.

// NFLOG guided option ids (libxt_NFLOG's enum; O_LAYER is revision 1's).
const (
	nflogOptGroup = iota
	nflogOptLayer
	nflogOptPrefix
	nflogOptRange
	nflogOptSize
	nflogOptThreshold
)

// nflogPrefixSize is the size of xt_nflog_info's prefix, with its NUL:
// longer prefixes are cut to nflogPrefixSize-1 bytes.
const nflogPrefixSize = 64

// nflogRangeWarning is what libxt_NFLOG's final check prints for
// --nflog-range, which the kernel never honoured.
const nflogRangeWarning = "warn: --nflog-range has never worked and is no longer supported, please use --nflog-size instead"

// nflogExt is the NFLOG target module.
var nflogExt = registerTarget(&extension{
	name: "NFLOG",
	x6: []x6opt{
		// XTTYPE_UINT16 for the group and the threshold: xtUint32 with
		// the 16-bit bound (the type only tells getopt an argument follows).
		{name: "nflog-group", id: nflogOptGroup, typ: xtUint32, max: math.MaxUint16},
		{name: "nflog-prefix", id: nflogOptPrefix, typ: xtString, min: 1, size: nflogPrefixSize},
		{name: "nflog-range", id: nflogOptRange, typ: xtUint32, excl: 1 << nflogOptSize, max: math.MaxUint32},
		{name: "nflog-size", id: nflogOptSize, typ: xtUint32, excl: 1 << nflogOptRange, max: math.MaxUint32},
		{name: "nflog-threshold", id: nflogOptThreshold, typ: xtUint32, max: math.MaxUint16},
	},
	newTarget: func(*parseCtx) targetState { return &nflogState{} },
})

// nflogState is the NFLOG target being parsed.
type nflogState struct {
	o     ir.NFLogOptions
	flags x6flags
}

// parse implements targetState.
func (s *nflogState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(nflogExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case nflogOptPrefix:
		p, f := parseLogPrefix(x, arg)
		if f != nil {
			return f
		}
		s.o.Prefix = p
	default:
		v, ok := xtStrtoui(arg, x.min, x.max)
		if !ok {
			return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n",
				nflogExt.name, x.name, x.min, x.max)
		}
		switch o.id {
		case nflogOptGroup:
			s.o.Group = uint16(v)
		case nflogOptRange, nflogOptSize:
			s.o.Len = uint32(v)
		case nflogOptThreshold:
			s.o.Threshold = uint16(v)
		}
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState: NFLOG_check (the --nflog-range warning,
// the copy-length flag), then the guided checks.
func (s *nflogState) final(c *parseCtx) *failure {
	if s.flags.has(nflogOptRange) && c.notice != nil {
		c.notice(nflogRangeWarning)
	}
	s.o.Size = s.flags.has(nflogOptSize)
	return s.flags.fcheck(nflogExt)
}

// build implements targetState.
func (s *nflogState) build(t *ir.Target) {
	o := s.o
	*t = ir.Target{Kind: ir.TargetNFLog, NFLog: &o}
}

// nflogOptionsText is nflog_print: the options iptables-save (dashes
// "--") and iptables -L (dashes "") print, each with a leading space.
func nflogOptionsText(o *ir.NFLogOptions, dashes string) string {
	if o == nil {
		return ""
	}
	var b strings.Builder
	if o.Prefix != "" {
		b.WriteString(" " + dashes + "nflog-prefix")
		writeSaveString(&b, o.Prefix)
	}
	if o.Group != 0 {
		fmt.Fprintf(&b, " %snflog-group %d", dashes, o.Group)
	}
	if o.Size {
		fmt.Fprintf(&b, " %snflog-size %d", dashes, o.Len)
	} else if o.Len != 0 {
		fmt.Fprintf(&b, " %snflog-range %d", dashes, o.Len)
	}
	if o.Threshold != 0 {
		fmt.Fprintf(&b, " %snflog-threshold %d", dashes, o.Threshold)
	}
	return b.String()
}

// checkNFLogTarget is the kernel's nflog_tg_check: a prefix the kernel
// would find unterminated is refused with EINVAL.
func checkNFLogTarget(o *ir.NFLogOptions) *failure {
	if o != nil && len(o.Prefix) >= nflogPrefixSize {
		return kernelEINVAL()
	}
	return nil
}
