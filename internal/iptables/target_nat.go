package iptables

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The NAT targets DNAT, SNAT, MASQUERADE and REDIRECT (libxt_NAT), their
// options, printing and the kernel's checks (xt_nat.c, xt_MASQUERADE.c,
// xt_REDIRECT.c: table nat, and the hooks each target may be used from).

// NAT target option ids (libxt_NAT's enum).
const (
	natOptToDest = iota
	natOptToSrc
	natOptToPorts
	natOptRandom
	natOptRandomFully
	natOptPersistent
)

// natTargetKinds maps the targets' names to their IR kinds.
var natTargetKinds = map[string]ir.TargetKind{
	"DNAT": ir.TargetDNAT, "SNAT": ir.TargetSNAT,
	"MASQUERADE": ir.TargetMasquerade, "REDIRECT": ir.TargetRedirect,
}

// natExt registers one NAT target with its option table.
func natExt(name string, opts []x6opt) *extension {
	e := &extension{name: name, x6: opts}
	e.newTarget = func(c *parseCtx) targetState {
		s := c.natSlab().next()
		s.ext, s.kind = e, natTargetKinds[name]
		return s
	}
	return registerTarget(e)
}

func init() {
	natExt("DNAT", []x6opt{
		{name: "to-destination", id: natOptToDest, typ: xtString, flags: xtMand},
		{name: "random", id: natOptRandom, typ: xtNone},
		{name: "persistent", id: natOptPersistent, typ: xtNone},
	})
	natExt("SNAT", []x6opt{
		{name: "to-source", id: natOptToSrc, typ: xtString, flags: xtMand},
		{name: "random", id: natOptRandom, typ: xtNone},
		{name: "random-fully", id: natOptRandomFully, typ: xtNone},
		{name: "persistent", id: natOptPersistent, typ: xtNone},
	})
	natExt("MASQUERADE", []x6opt{
		{name: "to-ports", id: natOptToPorts, typ: xtString},
		{name: "random", id: natOptRandom, typ: xtNone},
		{name: "random-fully", id: natOptRandomFully, typ: xtNone},
	})
	natExt("REDIRECT", []x6opt{
		{name: "to-ports", id: natOptToPorts, typ: xtString},
		{name: "random", id: natOptRandom, typ: xtNone},
	})
}

// natState is a NAT target being parsed.
type natState struct {
	ext   *extension
	kind  ir.TargetKind
	r     ir.NatRange
	flags x6flags
}

// parse implements targetState (__NAT_parse).
func (s *natState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(s.ext, o.id, invert); f != nil {
		return f
	}
	portOK := false
	switch c.proto {
	case protoTCP, protoUDP, protoSCTP, protoDCCP, protoICMP:
		portOK = true
	}
	var f *failure
	switch o.id {
	case natOptToDest, natOptToSrc:
		f = parseNatTo(&s.r, arg, portOK, c.fam)
	case natOptToPorts:
		f = parseNatPorts(&s.r, arg, portOK)
	case natOptRandom:
		s.r.Flags |= ir.NatRandom
	case natOptRandomFully:
		s.r.Flags |= ir.NatRandomFully
	case natOptPersistent:
		s.r.Flags |= ir.NatPersistent
	}
	if f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState. REDIRECT's final check is DNAT's of
// revision 0 (DNAT_fcheck), which refuses a shifted port map.
func (s *natState) final(*parseCtx) *failure {
	if f := s.flags.fcheck(s.ext); f != nil {
		return f
	}
	if s.kind == ir.TargetRedirect && s.r.Flags&ir.NatProtoOffset != 0 {
		return paramErr("Shifted portmap ranges not supported with this kernel")
	}
	return nil
}

// build implements targetState. Only DNAT keeps a shifted port map's base
// (its revision 2 carries nf_nat_range2); the others keep the flag with
// base 0, as their older range structures have no room for it.
// The state is built once and dropped: the range is its own.
func (s *natState) build(t *ir.Target) {
	if s.kind != ir.TargetDNAT {
		s.r.BasePort = 0
	}
	*t = ir.Target{Kind: s.kind, Nat: &s.r}
}

// servicePort is xtables_service_to_port(name, NULL): the first entry of
// the services database of that name, whatever its protocol.
func servicePort(name string) (uint16, bool) {
	for _, s := range etcServices {
		if s.name == name {
			return uint16(s.port), true
		}
		for _, a := range s.aliases {
			if a == name {
				return uint16(s.port), true
			}
		}
	}
	return 0, false
}

// parseNatPorts is libxt_NAT's parse_ports: PORT, PORT-PORT or
// PORT-PORT/BASE.
func parseNatPorts(r *ir.NatRange, arg string, portOK bool) *failure {
	if !portOK {
		return paramErr("Need TCP, UDP, SCTP or DCCP with port specification")
	}
	r.Flags |= ir.NatProtoSpecified
	port, end, ok := xtStrtouiPrefix(arg, 0, maxUint16)
	if !ok {
		p, known := servicePort(arg)
		if !known {
			return paramErr("Port `%s' not valid", arg)
		}
		port, end = uint64(p), len(arg)
	}
	rest := arg[end:]
	switch {
	case rest == "":
		r.MinPort, r.MaxPort = uint16(port), uint16(port)
		return nil
	case rest[0] == ':':
		return paramErr("Invalid port:port syntax - use dash")
	case rest[0] != '-':
		return paramErr("Garbage after port value: `%s'", rest)
	}
	arg = rest[1:]
	maxPort, end, ok := xtStrtouiPrefix(arg, 0, maxUint16)
	if !ok {
		return paramErr("Port `%s' not valid", arg)
	}
	if maxPort < port {
		return paramErr("Port range `%s' funky", arg)
	}
	r.MinPort, r.MaxPort = uint16(port), uint16(maxPort)
	rest = arg[end:]
	switch {
	case rest == "":
		return nil
	case rest[0] != '/':
		return paramErr("Garbage after port range: `%s'", rest)
	}
	arg = rest[1:]
	base, ok := xtStrtoui(arg, 1, maxUint16)
	if !ok {
		p, known := servicePort(arg)
		if !known {
			return paramErr("Port `%s' not valid", arg)
		}
		base = uint64(p)
	}
	r.Flags |= ir.NatProtoOffset
	r.BasePort = uint16(base)
	return nil
}

// parseNatTo is libxt_NAT's parse_to: [ADDR[-ADDR]][:PORTS], IPv6
// addresses in brackets when ports follow.
func parseNatTo(r *ir.NatRange, arg string, portOK bool, fam ir.Family) *failure {
	start, colon := arg, -1
	if i := strings.IndexByte(arg, '['); i < 0 {
		// One colon is a port; more make an IPv6 address.
		if c := strings.IndexByte(arg, ':'); c >= 0 && !strings.Contains(arg[c+1:], ":") {
			colon = c
		}
	} else {
		start = arg[i+1:]
		end := strings.IndexByte(start, ']')
		if end < 0 || fam == ir.IPv4 {
			return paramErr("Invalid address format")
		}
		tail := start[end+1:]
		start = start[:end]
		if c := strings.IndexByte(tail, ':'); c >= 0 {
			colon = len(arg) - len(tail) + c
		}
	}
	if colon >= 0 {
		if f := parseNatPorts(r, arg[colon+1:], portOK); f != nil {
			return f
		}
		// A colon first (or after "[]"): no address.
		if colon == 0 || colon == 2 {
			return nil
		}
		if !strings.HasPrefix(arg, "[") {
			start = arg[:colon]
		}
	}
	r.Flags |= ir.NatMapIPs
	lo, hi := start, ""
	if dash := strings.IndexByte(start, '-'); dash >= 0 {
		lo, hi = start[:dash], start[dash+1:]
	}
	min, ok := parseNatAddr(lo, fam)
	if !ok {
		return paramErr("Bad IP address \"%s\"", lo)
	}
	max := min
	if hi != "" || strings.Contains(start, "-") {
		if max, ok = parseNatAddr(hi, fam); !ok {
			return paramErr("Bad IP address \"%s\"", hi)
		}
	}
	r.MinAddr, r.MaxAddr = min, max
	return nil
}

// parseNatAddr is inet_pton for the family.
func parseNatAddr(s string, fam ir.Family) (netip.Addr, bool) {
	if fam == ir.IPv6 {
		a, ok := inetPton6(s)
		return netip.AddrFrom16(a), ok
	}
	a, ok := inetPton4(s)
	return netip.AddrFrom4(a), ok
}

// natRangeString is sprint_range: [ADDR[-ADDR]][:PORT[-PORT][/BASE]], an
// IPv6 address in brackets when ports follow.
func natRangeString(fam ir.Family, r *ir.NatRange) string {
	var b strings.Builder
	brackets := fam == ir.IPv6 && r.Flags&ir.NatProtoSpecified != 0
	if r.Flags&ir.NatMapIPs != 0 {
		if brackets {
			b.WriteString("[")
		}
		b.WriteString(formatAddr(r.MinAddr))
		if r.MaxAddr != r.MinAddr {
			b.WriteString("-" + formatAddr(r.MaxAddr))
		}
		if brackets {
			b.WriteString("]")
		}
	}
	if r.Flags&ir.NatProtoSpecified != 0 {
		fmt.Fprintf(&b, ":%d", r.MinPort)
		if r.MaxPort != r.MinPort {
			fmt.Fprintf(&b, "-%d", r.MaxPort)
		}
		if r.Flags&ir.NatProtoOffset != 0 {
			fmt.Fprintf(&b, "/%d", r.BasePort)
		}
	}
	return b.String()
}

// natTargetText is __NAT_print: the range after rangeOpt (without its
// colon for the port-only targets), then the flags with flagPrefix.
func natTargetText(fam ir.Family, t ir.Target, save bool) string {
	r := t.Nat
	if r == nil {
		r = &ir.NatRange{}
	}
	var rangeOpt string
	skipColon := false
	switch t.Kind {
	case ir.TargetDNAT:
		rangeOpt = "to:"
		if save {
			rangeOpt = "--to-destination "
		}
	case ir.TargetSNAT:
		rangeOpt = "to:"
		if save {
			rangeOpt = "--to-source "
		}
	case ir.TargetMasquerade:
		rangeOpt, skipColon = "masq ports: ", true
		if save {
			rangeOpt = "--to-ports "
		}
	case ir.TargetRedirect:
		rangeOpt, skipColon = "redir ports ", true
		if save {
			rangeOpt = "--to-ports "
		}
	}
	flagPrefix := ""
	if save {
		flagPrefix = "--"
	}
	var b strings.Builder
	if s := natRangeString(fam, r); s != "" {
		if skipColon && s[0] == ':' {
			s = s[1:]
		}
		b.WriteString(" " + rangeOpt + s)
	}
	for _, f := range []struct {
		bit  ir.NatFlags
		name string
	}{{ir.NatRandom, "random"}, {ir.NatRandomFully, "random-fully"}, {ir.NatPersistent, "persistent"}} {
		if r.Flags&f.bit != 0 {
			b.WriteString(" " + flagPrefix + f.name)
		}
	}
	return b.String()
}

// isNatTarget reports whether k is one of the NAT targets.
func isNatTarget(k ir.TargetKind) bool {
	switch k {
	case ir.TargetDNAT, ir.TargetSNAT, ir.TargetMasquerade, ir.TargetRedirect:
		return true
	}
	return false
}

// natTargetHooks are the hooks each NAT target may be used from (the
// kernel's xt_target.hooks).
var natTargetHooks = map[ir.TargetKind]hookMask{
	ir.TargetDNAT:       hookPreRouting | hookLocalOut,
	ir.TargetSNAT:       hookPostRouting | hookLocalIn,
	ir.TargetMasquerade: hookPostRouting,
	ir.TargetRedirect:   hookPreRouting | hookLocalOut,
}

// checkTableTarget applies the kernel's table restrictions of targets: the
// NAT targets only in the nat table and from their hooks, REJECT only in
// the filter table (ipt_REJECT's .table), as x_tables' xt_check_target.
func checkTableTarget(table string, t ir.Target, hooks hookMask) *failure {
	switch {
	case isNatTarget(t.Kind):
		if table != ir.TableNat || hooks&^natTargetHooks[t.Kind] != 0 {
			return kernelEINVAL()
		}
	case t.Kind == ir.TargetReject:
		if table != "" && table != ir.TableFilter {
			return kernelEINVAL()
		}
	}
	return nil
}

// natDropInhibited is do_command's refusal of DROP in the nat table (as a
// policy or a target), before the command reaches the kernel.
func natDropInhibited(table, policy, jumpto string) *failure {
	if table == ir.TableNat && (policy == "DROP" || jumpto == "DROP") {
		return paramErr("\nThe \"nat\" table is not intended for filtering, the use of DROP is therefore inhibited.\n\n")
	}
	return nil
}
