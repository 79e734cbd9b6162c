package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The sctp match (libxt_sctp.c, old-style option parser): ports and
// chunk types with their flags.

// sctp option ids.
const (
	sctpOptSport = iota + 1
	sctpOptDport
	sctpOptChunks
)

// sctpExt is the sctp match module.
var sctpExt = registerMatch(&extension{
	name: "sctp",
	opts: []*optDef{
		{name: "source-port", hasArg: argRequired, id: sctpOptSport},
		{name: "sport", hasArg: argRequired, id: sctpOptSport},
		{name: "destination-port", hasArg: argRequired, id: sctpOptDport},
		{name: "dport", hasArg: argRequired, id: sctpOptDport},
		{name: "chunk-types", hasArg: argRequired, id: sctpOptChunks},
	},
	newMatch: func(*parseCtx) matchState { return &sctpState{} },
})

// sctpChunkNames is libxt_sctp's sctp_chunk_names table of iptables 1.8.9,
// in its order (a flag test records the name's place in it).
var sctpChunkNames = []struct {
	name  string
	typ   uint8
	flags string // valid flag letters, bit 7 first ('-': none)
}{
	{"DATA", 0, "----IUBE"}, {"INIT", 1, "--------"}, {"INIT_ACK", 2, "--------"},
	{"SACK", 3, "--------"}, {"HEARTBEAT", 4, "--------"}, {"HEARTBEAT_ACK", 5, "--------"},
	{"ABORT", 6, "-------T"}, {"SHUTDOWN", 7, "--------"}, {"SHUTDOWN_ACK", 8, "--------"},
	{"ERROR", 9, "--------"}, {"COOKIE_ECHO", 10, "--------"}, {"COOKIE_ACK", 11, "--------"},
	{"ECN_ECNE", 12, "--------"}, {"ECN_CWR", 13, "--------"}, {"SHUTDOWN_COMPLETE", 14, "-------T"},
	{"I_DATA", 64, "----IUBE"}, {"RE_CONFIG", 130, "--------"}, {"PAD", 132, "--------"},
	{"ASCONF", 193, "--------"}, {"ASCONF_ACK", 128, "--------"}, {"FORWARD_TSN", 192, "--------"},
	{"I_FORWARD_TSN", 194, "--------"},
}

// sctpState is one sctp match being parsed.
type sctpState struct {
	m    ir.SCTPMatch
	seen int // option ids given, as bits
}

// parse implements matchState (sctp_parse).
func (s *sctpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if s.seen&(1<<o.id) != 0 {
		return paramErr("Only one `--%s' allowed", map[int]string{sctpOptSport: "source-port",
			sctpOptDport: "destination-port", sctpOptChunks: "chunk-types"}[o.id])
	}
	switch o.id {
	case sctpOptSport, sctpOptDport:
		r, f := parseProtoPorts(arg, "sctp")
		if f != nil {
			return f
		}
		pm := &s.m.SrcPort
		if o.id == sctpOptDport {
			pm = &s.m.DstPort
		}
		*pm = ir.PortMatch{Set: true, Invert: invert, Range: r}
	case sctpOptChunks:
		g := c.g
		if g.optind >= len(g.args) || strings.HasPrefix(g.args[g.optind], "-") || strings.HasPrefix(g.args[g.optind], "!") {
			return paramErr("--chunk-types requires two args")
		}
		if f := s.parseChunks(arg, g.args[g.optind]); f != nil {
			return f
		}
		s.m.HasChunks, s.m.InvChunks = true, invert
		g.optind++
	}
	s.seen |= 1 << o.id
	return nil
}

// parseProtoPorts is libxt_tcp's parse_tcp_ports and libxt_sctp's
// parse_sctp_ports: "port" or "[port]:[port]", each a number or a service
// name of proto.
func parseProtoPorts(arg, proto string) (ir.PortRange, *failure) {
	first, last, ranged := strings.Cut(arg, ":")
	if !ranged {
		p, f := parsePort(arg, proto)
		return ir.PortRange{First: p, Last: p}, f
	}
	r := fullPortRange
	var f *failure
	if first != "" {
		if r.First, f = parsePort(first, proto); f != nil {
			return r, f
		}
	}
	if last != "" {
		if r.Last, f = parsePort(last, proto); f != nil {
			return r, f
		}
	}
	if r.First > r.Last {
		return r, paramErr("invalid portrange (min > max)")
	}
	return r, nil
}

// parseChunks is parse_sctp_chunks: the match type, then ALL, NONE or a
// comma-separated list of chunk names with optional ":FLAGS".
func (s *sctpState) parseChunks(matchType, chunks string) *failure {
	switch strings.ToUpper(matchType) {
	case "ANY":
		s.m.ChunkMatch = ir.SCTPChunkAny
	case "ALL":
		s.m.ChunkMatch = ir.SCTPChunkAll
	case "ONLY":
		s.m.ChunkMatch = ir.SCTPChunkOnly
	default:
		return paramErr("Match type has to be one of \"ALL\", \"ANY\" or \"ONLY\"")
	}
	s.m.ChunkMap = [8]uint32{}
	switch strings.ToUpper(chunks) {
	case "ALL":
		for i := range s.m.ChunkMap {
			s.m.ChunkMap[i] = ^uint32(0)
		}
		return nil
	case "NONE":
		return nil
	}
	for _, word := range strings.Split(chunks, ",") {
		if word == "" { // strtok skips empty tokens
			continue
		}
		name, flags, _ := strings.Cut(word, ":")
		idx := -1
		for i, c := range sctpChunkNames {
			if strings.EqualFold(c.name, name) {
				idx = i
				break
			}
		}
		if idx < 0 {
			return paramErr("Unknown sctp chunk `%s'", name)
		}
		t := sctpChunkNames[idx].typ
		s.m.ChunkMap[t/32] |= 1 << (t % 32)
		for _, ch := range []byte(flags) {
			if f := s.addFlag(idx, ch); f != nil {
				return f
			}
		}
	}
	return nil
}

// addFlag is the flag part of parse_sctp_chunk and save_chunk_flag_info:
// letter ch of the chunk name at idx (upper case: the flag set, lower
// case: clear), recorded under idx as libxt_sctp does.
func (s *sctpState) addFlag(idx int, ch byte) *failure {
	valid := sctpChunkNames[idx].flags
	up := ch
	if ch >= 'a' && ch <= 'z' {
		up = ch - 'a' + 'A'
	}
	pos := strings.IndexByte(valid, up)
	if pos < 0 { // '-' is found, as strchr finds it
		return paramErr("Invalid flags for chunk type %d", idx)
	}
	bit := uint8(1) << (7 - pos)
	set := ch >= 'A' && ch <= 'Z'
	for i := 0; i < int(s.m.NFlags); i++ {
		fi := &s.m.Flags[i]
		if int(fi.ChunkType) == idx {
			fi.Mask |= bit
			if set {
				fi.Flag |= bit
			}
			return nil
		}
	}
	if s.m.NFlags == ir.SCTPMaxFlags {
		return paramErr("Number of chunk types with flags exceeds currently allowed limit.Increasing this limit involves changing IPT_NUM_SCTP_FLAGS andrecompiling both the kernel space and user space modules\n")
	}
	fi := &s.m.Flags[s.m.NFlags]
	fi.ChunkType, fi.Mask = uint8(idx), bit
	if set {
		fi.Flag = bit
	}
	s.m.NFlags++
	return nil
}

// final implements matchState.
func (s *sctpState) final(*parseCtx) *failure { return nil }

// build implements matchState.
func (s *sctpState) build() ir.Match { m := s.m; return &m }

// writeSCTPPorts prints a port option as sctp_save and dccp_save do:
// whenever given, even as the whole range.
func writeSCTPPorts(b *strings.Builder, name string, p ir.PortMatch) {
	if !p.Set {
		return
	}
	if p.Invert {
		b.WriteString(" !")
	}
	if p.Range.First != p.Range.Last {
		fmt.Fprintf(b, " --%s %d:%d", name, p.Range.First, p.Range.Last)
	} else {
		fmt.Fprintf(b, " --%s %d", name, p.Range.First)
	}
}

// writeSCTP prints the match as sctp_save does.
func writeSCTP(b *strings.Builder, m *ir.SCTPMatch) {
	writeSCTPPorts(b, "sport", m.SrcPort)
	writeSCTPPorts(b, "dport", m.DstPort)
	if m.HasChunks {
		b.WriteString(invSpace(m.InvChunks) + " --chunk-types")
		sctpChunks(b, m, false)
	}
}

// listSCTP prints the match as sctp_print does (-L).
func (l *lister) listSCTP(m *ir.SCTPMatch) {
	l.b.WriteString(" sctp")
	l.givenPorts(m.SrcPort, m.DstPort, "sctp")
	if m.HasChunks {
		l.b.WriteString(invSpace(m.InvChunks))
		sctpChunks(&l.b, m, l.opts.Numeric)
	}
}

// givenPorts prints the port options given, as sctp_print and dccp_print
// do.
func (l *lister) givenPorts(src, dst ir.PortMatch, proto string) {
	if src.Set {
		l.ports("spt", src, proto)
	}
	if dst.Set {
		l.ports("dpt", dst, proto)
	}
}

// sctpChunks is print_chunks: the match type, then NONE, ALL or the
// chunks in type order with their flags.
func sctpChunks(b *strings.Builder, m *ir.SCTPMatch, numeric bool) {
	b.WriteString(map[uint8]string{ir.SCTPChunkAny: " any", ir.SCTPChunkAll: " all", ir.SCTPChunkOnly: " only"}[m.ChunkMatch])
	clear, all := true, true
	for _, w := range m.ChunkMap {
		clear = clear && w == 0
		all = all && w == ^uint32(0)
	}
	switch {
	case clear:
		b.WriteString(" NONE")
		return
	case all:
		b.WriteString(" ALL")
		return
	}
	sep := " "
	for t := 0; t < 256; t++ {
		if !m.HasChunk(uint8(t)) {
			continue
		}
		b.WriteString(sep)
		sep = ","
		if numeric {
			fmt.Fprintf(b, "0x%04X", t)
		} else {
			for _, c := range sctpChunkNames {
				if int(c.typ) == t {
					b.WriteString(c.name)
				}
			}
		}
		for _, fi := range m.Flags[:m.NFlags] {
			if int(fi.ChunkType) == t && fi.Mask != 0 {
				sctpChunkFlags(b, t, fi)
			}
		}
	}
}

// sctpChunkFlags is print_chunk_flags: the letters of the name table's
// entry at place t (upper case for a set flag).
func sctpChunkFlags(b *strings.Builder, t int, fi ir.SCTPFlagInfo) {
	b.WriteByte(':')
	if t >= len(sctpChunkNames) {
		return
	}
	valid := sctpChunkNames[t].flags
	for i := 7; i >= 0; i-- {
		if fi.Mask&(1<<i) == 0 {
			continue
		}
		ch := valid[7-i]
		if fi.Flag&(1<<i) == 0 && ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b.WriteByte(ch)
	}
}
