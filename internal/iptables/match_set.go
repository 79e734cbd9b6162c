package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The set match (libxt_set revision 4, the one iptables-legacy 1.8.9 uses
// on kernel 6.18: no "physdev:" prefixes).

// SetInfo is what the set match needs to know about an ipset.
type SetInfo struct {
	// Family is the set's address family, or 0 for a set of no family
	// (list:set, bitmap:port), which rules of both families may use.
	Family ir.Family
	// Dims is the number of dimensions of the set's type (hash:ip,port: 2).
	Dims int
	// Type is the set's type name ("hash:ip").
	Type string
}

// SetLookup looks an ipset of the network namespace up by name; ok is false
// when there is no such set. A nil SetLookup knows no set.
type SetLookup func(name string) (info SetInfo, ok bool)

// maxSetNameLen is IPSET_MAXNAMELEN - 1.
const maxSetNameLen = 31

// Old-style option ids of the set match (set_opts_v3).
const (
	setOptMatchSet = iota
	setOptSet
	setOptReturnNomatch
	setOptUpdateCounters
	setOptPacketsEq
	setOptPacketsLt
	setOptPacketsGt
	setOptBytesEq
	setOptBytesLt
	setOptBytesGt
	setOptUpdateSubcounters
)

// setExt is the set match module.
var setExt = registerMatch(&extension{
	name: "set",
	opts: []*optDef{
		{name: "match-set", hasArg: argRequired, id: setOptMatchSet},
		{name: "set", hasArg: argRequired, id: setOptSet},
		{name: "return-nomatch", hasArg: argNone, id: setOptReturnNomatch},
		{name: "update-counters", hasArg: argNone, id: setOptUpdateCounters},
		{name: "packets-eq", hasArg: argRequired, id: setOptPacketsEq},
		{name: "packets-lt", hasArg: argRequired, id: setOptPacketsLt},
		{name: "packets-gt", hasArg: argRequired, id: setOptPacketsGt},
		{name: "bytes-eq", hasArg: argRequired, id: setOptBytesEq},
		{name: "bytes-lt", hasArg: argRequired, id: setOptBytesLt},
		{name: "bytes-gt", hasArg: argRequired, id: setOptBytesGt},
		{name: "update-subcounters", hasArg: argNone, id: setOptUpdateSubcounters},
	},
	newMatch: func(*parseCtx) matchState { return &setState{} },
})

// setState is one set match being parsed.
type setState struct {
	m ir.SetMatch
}

// parse implements matchState (set_parse_v3 and v4).
func (s *setState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	switch o.id {
	case setOptMatchSet, setOptSet:
		if o.id == setOptSet {
			c.notice("--set option deprecated, please use --match-set")
		}
		return s.parseMatchSet(c, arg, invert)
	case setOptReturnNomatch:
		if invert {
			return paramErr("--return-nomatch flag cannot be inverted")
		}
		s.m.ReturnNomatch = true
	case setOptUpdateCounters:
		if invert {
			s.m.SkipCounterUpdate = true
		}
	case setOptUpdateSubcounters:
		if invert {
			s.m.SkipSubcounterUpdate = true
		}
	case setOptPacketsEq, setOptPacketsLt, setOptPacketsGt:
		return parseSetCounter(&s.m.Packets, "packets", o.id-setOptPacketsEq, arg, invert)
	case setOptBytesEq, setOptBytesLt, setOptBytesGt:
		return parseSetCounter(&s.m.Bytes, "bytes", o.id-setOptBytesEq, arg, invert)
	}
	return nil
}

// parseMatchSet is --match-set NAME FLAGS: FLAGS is the word after the
// option's argument.
func (s *setState) parseMatchSet(c *parseCtx, name string, invert bool) *failure {
	if s.m.Dirs.Dim != 0 {
		return paramErr("--match-set can be specified only once")
	}
	if invert {
		s.m.Invert = true
	}
	dirs, f := parseSetArgs(c, "match-set", name)
	if f != nil {
		return f
	}
	s.m.Name, s.m.Dirs = name, dirs
	return nil
}

// parseSetArgs is what libxt_set's set match and SET target do with
// --OPTION NAME FLAGS (option what): FLAGS is the word after the option's
// argument, the set must exist and be of the rule's family (or of none).
func parseSetArgs(c *parseCtx, what, name string) (ir.SetDirs, *failure) {
	g := c.g
	if g.optind >= len(g.args) || strings.HasPrefix(g.args[g.optind], "-") || strings.HasPrefix(g.args[g.optind], "!") {
		return ir.SetDirs{}, paramErr("--%s requires two args.", what)
	}
	if len(name) > maxSetNameLen {
		return ir.SetDirs{}, paramErr("setname `%s' too long, max %d characters.", name, maxSetNameLen)
	}
	var info SetInfo
	ok := false
	if c.sets != nil {
		info, ok = c.sets(name)
	}
	if !ok {
		return ir.SetDirs{}, paramErr("Set %s doesn't exist.\n", name)
	}
	if info.Family != 0 && info.Family != c.fam {
		return ir.SetDirs{}, paramErr("The protocol family of set %s is %s, which is not applicable.\n", name, setFamilyName(info.Family))
	}
	dirs, f := parseSetDirs(g.args[g.optind])
	if f != nil {
		return dirs, f
	}
	g.optind++
	return dirs, nil
}

// setFamilyName is how libxt_set names a set's family in its messages.
func setFamilyName(f ir.Family) string {
	if f == ir.IPv4 {
		return "IPv4"
	}
	return "IPv6"
}

// parseSetDirs is libxt_set's parse_dirs: a comma list of at most
// MaxSetDims words, each starting with "src" or "dst" (only the first three
// letters are compared: "srcfoo" is src).
func parseSetDirs(arg string) (ir.SetDirs, *failure) {
	var d ir.SetDirs
	for _, word := range strings.Split(arg, ",") {
		if d.Dim++; d.Dim > ir.MaxSetDims {
			return d, paramErr("Can't be more src/dst options than %d.", ir.MaxSetDims)
		}
		switch {
		case strings.HasPrefix(word, "src"):
			d.Src |= 1 << (d.Dim - 1)
		case strings.HasPrefix(word, "dst"):
		default:
			return d, paramErr("You must spefify (the comma separated list of) 'src' or 'dst'.")
		}
	}
	return d, nil
}

// parseSetCounter parses --packets-eq/-lt/-gt (which 0/1/2) or the bytes
// options into cm. Only -eq may be inverted.
func parseSetCounter(cm *ir.SetCounterMatch, what string, which int, arg string, invert bool) *failure {
	if cm.Op != ir.SetCounterNone {
		return paramErr("only one of the --%s-[eq|lt|gt] is allowed", what)
	}
	op := [...]ir.SetCounterOp{ir.SetCounterEq, ir.SetCounterLt, ir.SetCounterGt}[which]
	if invert {
		if op != ir.SetCounterEq {
			return paramErr("--%s-%s option cannot be inverted", what, [...]string{"eq", "lt", "gt"}[which])
		}
		op = ir.SetCounterNe
	}
	v, _, ok := xtStrtoul(arg, 0, 0, math.MaxUint64, true)
	if !ok {
		return paramErr("Cannot parse %s as a counter value", arg)
	}
	*cm = ir.SetCounterMatch{Op: op, Value: v}
	return nil
}

// final implements matchState (set_check_v0).
func (s *setState) final(*parseCtx) *failure {
	if s.m.Dirs.Dim == 0 {
		return paramErr("You must specify `--match-set' with proper arguments")
	}
	return nil
}

// build implements matchState.
func (s *setState) build() ir.Match { m := s.m; return &m }

// writeSetMatch prints the set match's options as set_save_v4 does (sep
// "--") or, for iptables -L, as set_print_v4 does (sep "").
func writeSetMatch(b *strings.Builder, m *ir.SetMatch, sep string) {
	if m.Invert {
		b.WriteString(" !")
	}
	fmt.Fprintf(b, " %smatch-set %s %s", sep, m.Name, m.Dirs)
	if m.ReturnNomatch {
		fmt.Fprintf(b, " %sreturn-nomatch", sep)
	}
	if m.SkipCounterUpdate {
		fmt.Fprintf(b, " ! %supdate-counters", sep)
	}
	if m.SkipSubcounterUpdate {
		fmt.Fprintf(b, " ! %supdate-subcounters", sep)
	}
	writeSetCounter(b, m.Packets, "packets", sep)
	writeSetCounter(b, m.Bytes, "bytes", sep)
}

// writeSetCounter is set_printv3_counter.
func writeSetCounter(b *strings.Builder, cm ir.SetCounterMatch, name, sep string) {
	switch cm.Op {
	case ir.SetCounterEq:
		fmt.Fprintf(b, " %s%s-eq %d", sep, name, cm.Value)
	case ir.SetCounterNe:
		fmt.Fprintf(b, " ! %s%s-eq %d", sep, name, cm.Value)
	case ir.SetCounterLt:
		fmt.Fprintf(b, " %s%s-lt %d", sep, name, cm.Value)
	case ir.SetCounterGt:
		fmt.Fprintf(b, " %s%s-gt %d", sep, name, cm.Value)
	}
}
