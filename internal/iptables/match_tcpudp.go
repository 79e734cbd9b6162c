package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The tcp match (libxt_tcp, old-style option parser) and the udp match
// (libxt_udp, guided parser with getaddrinfo port names).

// tcp option ids.
const (
	tcpOptSport = iota + 1
	tcpOptDport
	tcpOptSyn
	tcpOptFlags
	tcpOptOption
)

// tcp "already given" flags.
const (
	tcpSeenSport = 1 << iota
	tcpSeenDport
	tcpSeenFlags
	tcpSeenOption
)

// tcpExt is the tcp match module.
var tcpExt = registerMatch(&extension{
	name: "tcp",
	opts: []*optDef{
		{name: "source-port", hasArg: argRequired, id: tcpOptSport},
		{name: "sport", hasArg: argRequired, id: tcpOptSport},
		{name: "destination-port", hasArg: argRequired, id: tcpOptDport},
		{name: "dport", hasArg: argRequired, id: tcpOptDport},
		{name: "syn", hasArg: argNone, id: tcpOptSyn},
		{name: "tcp-flags", hasArg: argRequired, id: tcpOptFlags},
		{name: "tcp-option", hasArg: argRequired, id: tcpOptOption},
	},
	newMatch: func(c *parseCtx) matchState {
		s := c.tcpSlab().next()
		s.m.SrcPort.Range, s.m.DstPort.Range = fullPortRange, fullPortRange
		return s
	},
})

// fullPortRange is 0:65535, the "any port" range.
var fullPortRange = ir.PortRange{First: 0, Last: maxUint16}

// tcpState is one tcp match being parsed.
type tcpState struct {
	m    ir.TCPMatch
	seen int
}

// tcpFlagNames are the flag names libxt_tcp knows, in its order (used for
// parsing and, skipping the aggregates, for printing).
var tcpFlagNames = []struct {
	name string
	bits uint8
}{
	{"FIN", ir.TCPFlagFIN}, {"SYN", ir.TCPFlagSYN}, {"RST", ir.TCPFlagRST},
	{"PSH", ir.TCPFlagPSH}, {"ACK", ir.TCPFlagACK}, {"URG", ir.TCPFlagURG},
	{"ALL", 0x3f}, {"NONE", 0},
}

// synMask is what --syn means: --tcp-flags SYN,RST,ACK,FIN SYN.
const synMask = ir.TCPFlagSYN | ir.TCPFlagRST | ir.TCPFlagACK | ir.TCPFlagFIN

// parseTCPFlagList is libxt_tcp's parse_tcp_flag.
func parseTCPFlagList(s string) (uint8, *failure) {
	var v uint8
	for _, tok := range strings.Split(s, ",") {
		if tok == "" {
			continue
		}
		found := false
		for _, f := range tcpFlagNames {
			if strings.EqualFold(f.name, tok) {
				v |= f.bits
				found = true
				break
			}
		}
		if !found {
			return 0, paramErr("Unknown TCP flag `%s'", tok)
		}
	}
	return v, nil
}

// parseTCPPorts is libxt_tcp's parse_tcp_ports.
func parseTCPPorts(s string) (ir.PortRange, *failure) { return parseProtoPorts(s, "tcp") }

// parse implements matchState.
func (s *tcpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	var f *failure
	switch o.id {
	case tcpOptSport, tcpOptDport:
		pm, seen, name := &s.m.SrcPort, tcpSeenSport, "source-port"
		if o.id == tcpOptDport {
			pm, seen, name = &s.m.DstPort, tcpSeenDport, "destination-port"
		}
		if s.seen&seen != 0 {
			return paramErr("Only one `--%s' allowed", name)
		}
		if pm.Range, f = parseTCPPorts(arg); f != nil {
			return f
		}
		pm.Set, pm.Invert = true, invert
		s.seen |= seen
	case tcpOptSyn, tcpOptFlags:
		if s.seen&tcpSeenFlags != 0 {
			return paramErr("Only one of `--syn' or `--tcp-flags'  allowed")
		}
		mask, comp := synMask, ir.TCPFlagSYN
		if o.id == tcpOptFlags {
			g := c.g
			if g.optind >= len(g.args) || strings.HasPrefix(g.args[g.optind], "-") || strings.HasPrefix(g.args[g.optind], "!") {
				return paramErr("--tcp-flags requires two args.")
			}
			if mask, f = parseTCPFlagList(arg); f != nil {
				return f
			}
			if comp, f = parseTCPFlagList(g.args[g.optind]); f != nil {
				return f
			}
			g.optind++
		}
		s.m.Flags = ir.TCPFlagsMatch{Set: true, Invert: invert, Mask: mask, Comp: comp}
		s.seen |= tcpSeenFlags
	case tcpOptOption:
		if s.seen&tcpSeenOption != 0 {
			return paramErr("Only one `--tcp-option' allowed")
		}
		v, ok := xtStrtoui(arg, 1, maxUint8)
		if !ok {
			return paramErr("Bad TCP option \"%s\"", arg)
		}
		s.m.Option = ir.TCPOptionMatch{Set: true, Invert: invert, Kind: uint8(v)}
		s.seen |= tcpSeenOption
	}
	return nil
}

// final implements matchState.
func (s *tcpState) final(*parseCtx) *failure { return nil }

// build implements matchState.
// The state is built once and dropped: the match is its own.
func (s *tcpState) build() ir.Match { return &s.m }

// udp guided option ids.
const (
	udpOptSport = iota
	udpOptDport
)

// udpExt is the udp match module.
var udpExt = registerMatch(&extension{
	name: "udp",
	x6: []x6opt{
		{name: "source-port", id: udpOptSport, typ: xtPortRC, flags: xtInvert},
		{name: "sport", id: udpOptSport, typ: xtPortRC, flags: xtInvert},
		{name: "destination-port", id: udpOptDport, typ: xtPortRC, flags: xtInvert},
		{name: "dport", id: udpOptDport, typ: xtPortRC, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState {
		return &udpState{m: ir.UDPMatch{
			SrcPort: ir.PortMatch{Range: fullPortRange},
			DstPort: ir.PortMatch{Range: fullPortRange},
		}}
	},
})

// udpState is one udp match being parsed.
type udpState struct {
	m     ir.UDPMatch
	flags x6flags
}

// parsePortRangeRC is xtopt_parse_mport: "port[:port]" where each port is
// a number or a service name resolved with getaddrinfo. Deviation from
// 1.8.9: a decreasing range is rejected as later releases do.
func parsePortRangeRC(ext string, o *x6opt, arg string) (ir.PortRange, *failure) {
	const maxComponents = 2
	r := fullPortRange
	n, prev := 0, 0
	for _, tok := range strings.Split(arg, ":") {
		if n == maxComponents {
			return r, paramErr("%s: Too many components for option \"--%s\" (max: %d)\n", ext, o.name, maxComponents)
		}
		if tok == "" {
			n++
			continue
		}
		v, ok := getaddrinfoPort(tok)
		if !ok {
			return r, paramErr("Port \"%s\" does not resolve to anything.\n", tok)
		}
		if v < prev {
			return r, paramErr("Port range %d-%d is negative.\n", prev, v)
		}
		prev = v
		if n == 0 {
			r.First = uint16(v)
		} else {
			r.Last = uint16(v)
		}
		n++
	}
	if n == 1 {
		r.Last = r.First
	}
	return r, nil
}

// parse implements matchState.
func (s *udpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(udpExt, o.id, invert)
	if f != nil {
		return f
	}
	pm := &s.m.SrcPort
	if o.id == udpOptDport {
		pm = &s.m.DstPort
	}
	if pm.Range, f = parsePortRangeRC(udpExt.name, x, arg); f != nil {
		return f
	}
	pm.Set, pm.Invert = true, invert
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *udpState) final(*parseCtx) *failure { return s.flags.fcheck(udpExt) }

// build implements matchState.
func (s *udpState) build() ir.Match { m := s.m; return &m }
