package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The packet-rewriting targets (libxt_TCPMSS, libxt_DSCP, libxt_TOS
// revision 1, libipt_TTL, libip6t_HL) and the raw table's notrack targets
// (libxt_CT's --notrack and its NOTRACK alias): options, printing and the
// kernel's checks (xt_TCPMSS.c, xt_DSCP.c, xt_HL.c, xt_CT.c) as
// iptables 1.8.9 and the kernel apply them.

// TCPMSS option ids (libxt_TCPMSS's enum).
const (
	tcpmssOptSet = iota
	tcpmssOptClamp
)

// tcpmssTargetExt is the TCPMSS target module.
var tcpmssTargetExt = registerTarget(&extension{
	name: "TCPMSS",
	x6: []x6opt{
		{name: "set-mss", id: tcpmssOptSet, typ: xtString},
		{name: "clamp-mss-to-pmtu", id: tcpmssOptClamp, typ: xtNone},
	},
	newTarget: func(c *parseCtx) targetState { return &tcpmssTargetState{fam: c.fam} },
})

// The IP header sizes TCPMSS's --set-mss leaves room for (its maximum is
// 65535 minus the header: sizeof(struct iphdr), sizeof(struct ip6_hdr)).
const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
)

// tcpmssTargetState is a TCPMSS target being parsed.
type tcpmssTargetState struct {
	fam   ir.Family
	t     ir.MangleTarget
	flags x6flags
}

// parse implements targetState (TCPMSS_parse): a later option overwrites
// an earlier one; the kernel refuses what --set-mss and
// --clamp-mss-to-pmtu together leave (checkMangleTarget).
func (s *tcpmssTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(tcpmssTargetExt, o.id, invert)
	if f != nil {
		return f
	}
	if o.id == tcpmssOptClamp {
		s.t.MSS = ir.TCPMSSClampPMTU
	} else {
		hi := uint64(math.MaxUint16 - ipv4HeaderLen)
		if s.fam == ir.IPv6 {
			hi = math.MaxUint16 - ipv6HeaderLen
		}
		v, _, ok := xtStrtoul(arg, 0, 0, hi, true)
		if !ok {
			return paramErr("TCPMSS: bad value for option \"--%s\", or out of range (0-%d).\n", x.name, hi)
		}
		s.t.MSS = uint16(v)
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState (TCPMSS_check).
func (s *tcpmssTargetState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("TCPMSS target: At least one parameter is required")
	}
	return nil
}

// build implements targetState.
func (s *tcpmssTargetState) build(t *ir.Target) {
	m := s.t
	*t = ir.Target{Kind: ir.TargetTCPMSS, Mangle: &m}
}

// DSCP option ids (libxt_DSCP's enum).
const (
	dscpTgOptValue = iota
	dscpTgOptClass
)

// dscpTargetExt is the DSCP target module.
var dscpTargetExt = registerTarget(&extension{
	name: "DSCP",
	x6: []x6opt{
		{name: "set-dscp", id: dscpTgOptValue, typ: xtUint8, max: dscpMax, excl: 1 << dscpTgOptClass},
		{name: "set-dscp-class", id: dscpTgOptClass, typ: xtString, excl: 1 << dscpTgOptValue},
	},
	newTarget: func(*parseCtx) targetState { return &dscpTargetState{} },
})

// dscpTargetState is a DSCP target being parsed.
type dscpTargetState struct {
	value uint8
	flags x6flags
}

// parse implements targetState (DSCP_parse).
func (s *dscpTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(dscpTargetExt, o.id, invert)
	if f != nil {
		return f
	}
	if o.id == dscpTgOptValue {
		s.value, f = x.parseUint8(dscpTargetExt.name, arg)
	} else {
		s.value, f = dscpClassValue(arg)
	}
	if f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState (DSCP_check, then the exclusions).
func (s *dscpTargetState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("DSCP target: Parameter --set-dscp is required")
	}
	return s.flags.fcheck(dscpTargetExt)
}

// build implements targetState.
func (s *dscpTargetState) build(t *ir.Target) {
	*t = ir.Target{Kind: ir.TargetDSCP, Mangle: &ir.MangleTarget{Value: s.value}}
}

// TOS option ids (libxt_TOS's enum).
const (
	tosTgOptSet = iota
	tosTgOptAnd
	tosTgOptOr
	tosTgOptXor
)

// tosTgAny is F_ANY: the options exclude each other.
const tosTgAny = 1<<tosTgOptSet | 1<<tosTgOptAnd | 1<<tosTgOptOr | 1<<tosTgOptXor

// tosTargetExt is the TOS target module (revision 1, both families).
var tosTargetExt = registerTarget(&extension{
	name: "TOS",
	x6: []x6opt{
		{name: "set-tos", id: tosTgOptSet, typ: xtString, excl: tosTgAny},
		{name: "and-tos", id: tosTgOptAnd, typ: xtUint8, excl: tosTgAny},
		{name: "or-tos", id: tosTgOptOr, typ: xtUint8, excl: tosTgAny},
		{name: "xor-tos", id: tosTgOptXor, typ: xtUint8, excl: tosTgAny},
	},
	newTarget: func(*parseCtx) targetState { return &tosTargetState{} },
})

// tosTargetState is a TOS target being parsed.
type tosTargetState struct {
	t     ir.MangleTarget
	flags x6flags
}

// parse implements targetState (tos_tg_parse): every spelling is one
// value/mask pair, the new byte (tos & ^mask) ^ value.
func (s *tosTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(tosTargetExt, o.id, invert)
	if f != nil {
		return f
	}
	if o.id == tosTgOptSet {
		v, m, f := parseTOSMask(arg)
		if f != nil {
			return f
		}
		s.t = ir.MangleTarget{Value: v, Mask: m}
	} else {
		v, f := x.parseUint8(tosTargetExt.name, arg)
		if f != nil {
			return f
		}
		switch o.id {
		case tosTgOptAnd:
			s.t = ir.MangleTarget{Value: 0, Mask: ^v}
		case tosTgOptOr:
			s.t = ir.MangleTarget{Value: v, Mask: v}
		case tosTgOptXor:
			s.t = ir.MangleTarget{Value: v, Mask: 0}
		}
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState (tos_tg_check, then the exclusions).
func (s *tosTargetState) final(*parseCtx) *failure {
	if s.flags&tosTgAny == 0 {
		return paramErr("TOS: An action is required")
	}
	return s.flags.fcheck(tosTargetExt)
}

// build implements targetState.
func (s *tosTargetState) build(t *ir.Target) {
	m := s.t
	*t = ir.Target{Kind: ir.TargetTOS, Mangle: &m}
}

// ttlTargetNames are the TTL target's (IPv4) and HL target's (IPv6)
// spellings: module, option prefix, listing word.
type ttlTargetNames struct {
	module, opt string
	kind        ir.TargetKind
}

// ttlTargetExt registers the TTL or HL target: --X-set 0-255, --X-inc and
// --X-dec 1-255, excluding each other.
func ttlTargetExt(n ttlTargetNames, fam ir.Family) *extension {
	const anyOpt = 1<<ir.TTLSet | 1<<ir.TTLInc | 1<<ir.TTLDec
	e := &extension{
		name:   n.module,
		family: fam,
		x6: []x6opt{
			{name: n.opt + "-set", id: int(ir.TTLSet), typ: xtUint8, excl: anyOpt},
			{name: n.opt + "-dec", id: int(ir.TTLDec), typ: xtUint8, min: 1, excl: anyOpt},
			{name: n.opt + "-inc", id: int(ir.TTLInc), typ: xtUint8, min: 1, excl: anyOpt},
		},
	}
	e.newTarget = func(*parseCtx) targetState { return &ttlTargetState{ext: e, kind: n.kind} }
	return registerTarget(e)
}

func init() {
	ttlTargetExt(ttlTargetNames{module: "TTL", opt: "ttl", kind: ir.TargetTTL}, ir.IPv4)
	ttlTargetExt(ttlTargetNames{module: "HL", opt: "hl", kind: ir.TargetHL}, ir.IPv6)
}

// ttlTargetState is a TTL or HL target being parsed.
type ttlTargetState struct {
	ext   *extension
	kind  ir.TargetKind
	t     ir.MangleTarget
	flags x6flags
}

// parse implements targetState (ttl_parse, hl_parse).
func (s *ttlTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(s.ext, o.id, invert)
	if f != nil {
		return f
	}
	v, f := x.parseUint8(s.ext.name, arg)
	if f != nil {
		return f
	}
	s.t = ir.MangleTarget{Mode: ir.TTLMode(o.id), Value: v}
	s.flags.done(o.id)
	return nil
}

// final implements targetState (ttl_check, hl_check, then the exclusions).
func (s *ttlTargetState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("%s: You must specify an action", s.ext.name)
	}
	return s.flags.fcheck(s.ext)
}

// build implements targetState.
func (s *ttlTargetState) build(t *ir.Target) {
	m := s.t
	*t = ir.Target{Kind: s.kind, Mangle: &m}
}

// CT option ids (libxt_CT's enum, revision 2).
const (
	ctOptNotrack = iota
	ctOptHelper
	ctOptTimeout
	ctOptZoneOrig
	ctOptZoneReply
	ctOptZone
	ctOptCtEvents
	ctOptExpEvents
)

// ctTargetExt is the CT target module: --notrack works; its other options
// are parsed only to be refused by name.
var ctTargetExt = registerTarget(&extension{
	name: "CT",
	x6: []x6opt{
		{name: "notrack", id: ctOptNotrack, typ: xtNone},
		{name: "helper", id: ctOptHelper, typ: xtString},
		{name: "timeout", id: ctOptTimeout, typ: xtString},
		{name: "zone-orig", id: ctOptZoneOrig, typ: xtString},
		{name: "zone-reply", id: ctOptZoneReply, typ: xtString},
		{name: "zone", id: ctOptZone, typ: xtString},
		{name: "ctevents", id: ctOptCtEvents, typ: xtString},
		{name: "expevents", id: ctOptExpEvents, typ: xtString},
	},
	newTarget: func(*parseCtx) targetState { return &ctTargetState{} },
})

// ctTargetState is a CT target being parsed.
type ctTargetState struct {
	flags x6flags
}

// ctOnlyNotrack is the refusal of the CT target's other uses.
const ctOnlyNotrack = "Couldn't load target `CT': only -j CT --notrack is supported by xfw (zones, helpers, timeouts and event masks are not)\n"

// parse implements targetState (ct_parse_v1): every option but --notrack
// is refused.
func (s *ctTargetState) parse(_ *parseCtx, o *optDef, _ string, invert bool) *failure {
	if _, f := s.flags.begin(ctTargetExt, o.id, invert); f != nil {
		return f
	}
	if o.id != ctOptNotrack {
		return paramErr(ctOnlyNotrack)
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState: a CT target without --notrack is refused.
func (s *ctTargetState) final(*parseCtx) *failure {
	if !s.flags.has(ctOptNotrack) {
		return paramErr(ctOnlyNotrack)
	}
	return nil
}

// build implements targetState.
func (s *ctTargetState) build(t *ir.Target) { *t = ir.Target{Kind: ir.TargetCTNotrack} }

// notrackTargetExt is the NOTRACK target (libxt_CT's alias of CT
// revision 0 with XT_CT_NOTRACK): no options.
var notrackTargetExt = registerTarget(&extension{
	name:      "NOTRACK",
	x6:        []x6opt{},
	newTarget: func(*parseCtx) targetState { return notrackTargetState{} },
})

// notrackTargetState is a NOTRACK target being parsed.
type notrackTargetState struct{}

// parse implements targetState (NOTRACK has no options).
func (notrackTargetState) parse(*parseCtx, *optDef, string, bool) *failure { return nil }

// final implements targetState.
func (notrackTargetState) final(*parseCtx) *failure { return nil }

// build implements targetState.
func (notrackTargetState) build(t *ir.Target) { *t = ir.Target{Kind: ir.TargetNotrack} }

// mangleTargetName is the name iptables prints for a packet-rewriting or
// notrack target in -L's target column ("" for other targets): NOTRACK
// is CT in the kernel.
func mangleTargetName(k ir.TargetKind) string {
	switch k {
	case ir.TargetTCPMSS:
		return "TCPMSS"
	case ir.TargetDSCP:
		return "DSCP"
	case ir.TargetTOS:
		return "TOS"
	case ir.TargetTTL:
		return "TTL"
	case ir.TargetHL:
		return "HL"
	case ir.TargetCTNotrack, ir.TargetNotrack:
		return "CT"
	}
	return ""
}

// ttlModeWords are the TTL and HL targets' save options and listing
// words, by mode.
var ttlModeWords = [...]struct{ opt, list string }{
	ir.TTLSet: {"set", "set to"},
	ir.TTLInc: {"inc", "increment by"},
	ir.TTLDec: {"dec", "decrement by"},
}

// mangleTargetSave is the target as iptables-save prints it, "-j NAME"
// included.
func mangleTargetSave(t ir.Target) string { return mangleTargetText(t, true, true) }

// mangleTargetListing is the target as iptables -L prints it.
func mangleTargetListing(t ir.Target, numeric bool) string {
	return mangleTargetText(t, false, numeric)
}

// mangleTargetText is the target as iptables-save (save) or iptables -L
// prints it.
func mangleTargetText(t ir.Target, save, numeric bool) string {
	m := ir.MangleTarget{}
	if t.Mangle != nil {
		m = *t.Mangle
	}
	pick := func(saved, listed string) string {
		if save {
			return saved
		}
		return listed
	}
	switch t.Kind {
	case ir.TargetTCPMSS:
		if m.MSS == ir.TCPMSSClampPMTU {
			return pick(" -j TCPMSS --clamp-mss-to-pmtu", " TCPMSS clamp to PMTU")
		}
		return pick(fmt.Sprintf(" -j TCPMSS --set-mss %d", m.MSS), fmt.Sprintf(" TCPMSS set %d", m.MSS))
	case ir.TargetDSCP:
		return pick(" -j DSCP --set-dscp", " DSCP set") + fmt.Sprintf(" 0x%02x", m.Value)
	case ir.TargetTOS:
		if save {
			return fmt.Sprintf(" -j TOS --set-tos 0x%02x/0x%02x", m.Value, m.Mask)
		}
		return tosTargetListing(m, numeric)
	case ir.TargetTTL, ir.TargetHL:
		name, mode := mangleTargetName(t.Kind), ttlModeWords[m.Mode%3]
		return pick(fmt.Sprintf(" -j %s --%s-%s", name, strings.ToLower(name), mode.opt),
			fmt.Sprintf(" %s %s", name, mode.list)) + fmt.Sprintf(" %d", m.Value)
	case ir.TargetCTNotrack:
		return pick(" -j CT --notrack", " CT notrack")
	case ir.TargetNotrack:
		return pick(" -j NOTRACK", " NOTRACK")
	}
	return ""
}

// tosTargetListing is tos_tg_print: a symbolic name for a value with
// mask 0x3f (tos_try_print_symbolic's " %s%s" of the prefix " TOS set"
// and the name: two spaces before, none between), else and/or/xor/set
// spelled out (numeric: always set).
func tosTargetListing(m ir.MangleTarget, numeric bool) string {
	set := fmt.Sprintf(" TOS set 0x%02x/0x%02x", m.Value, m.Mask)
	if numeric {
		return set
	}
	if m.Mask == tosSymbolMask {
		for _, sym := range tosSymbols {
			if sym.value == m.Value {
				return "  TOS set" + sym.name
			}
		}
	}
	switch {
	case m.Value == 0:
		return fmt.Sprintf(" TOS and 0x%02x", ^m.Mask)
	case m.Value == m.Mask:
		return fmt.Sprintf(" TOS or 0x%02x", m.Value)
	case m.Mask == 0:
		return fmt.Sprintf(" TOS xor 0x%02x", m.Value)
	}
	return set
}

// mangleTables are the tables each target's kernel module is restricted
// to (xt_target .table); TCPMSS has none.
var mangleTables = map[ir.TargetKind]string{
	ir.TargetDSCP: ir.TableMangle, ir.TargetTOS: ir.TableMangle,
	ir.TargetTTL: ir.TableMangle, ir.TargetHL: ir.TableMangle,
	ir.TargetCTNotrack: ir.TableRaw, ir.TargetNotrack: ir.TableRaw,
}

// tcpmssClampHooks are the hooks --clamp-mss-to-pmtu may be used from
// (the output route's MTU is known there).
const tcpmssClampHooks = hookForward | hookLocalOut | hookPostRouting

// tcpFlagSYN is TCPHDR_SYN.
const tcpFlagSYN = 0x02

// checkMangleTarget applies the kernel's checks of the packet-rewriting
// and notrack targets: their table, and TCPMSS's protocol (-p tcp), SYN
// match (a tcp match whose --tcp-flags compare value has SYN, not
// inverted: tcpmss_tg4_check's find_syn_match) and clamping hooks.
func checkMangleTarget(table string, r *ir.Rule, hooks hookMask) *failure {
	k := r.Target.Kind
	if !ir.IsMangleTarget(k) {
		return nil
	}
	if table == "" {
		table = ir.TableFilter
	}
	if want, ok := mangleTables[k]; ok && table != want {
		return kernelEINVAL()
	}
	if k != ir.TargetTCPMSS {
		return nil
	}
	if !needsProto(r, protoTCP) {
		return kernelEINVAL()
	}
	if r.Target.Mangle != nil && r.Target.Mangle.MSS == ir.TCPMSSClampPMTU && hooks&^tcpmssClampHooks != 0 {
		return kernelEINVAL()
	}
	for _, m := range r.Matches {
		if t, ok := m.(*ir.TCPMatch); ok && t.Flags.Set && t.Flags.Comp&tcpFlagSYN != 0 && !t.Flags.Invert {
			return nil
		}
	}
	return kernelEINVAL()
}
