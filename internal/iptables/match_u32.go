package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The u32 match (libxt_u32): [!] --u32 TESTS, parsed by u32_parse's state
// machine with its messages, printed as u32_dump does.

// u32 guided option id.
const u32OptTests = 0

// u32Ext is the u32 match module.
var u32Ext = registerMatch(&extension{
	name: "u32",
	x6: []x6opt{
		{name: "u32", id: u32OptTests, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &u32State{} },
})

// u32State is one u32 match being parsed.
type u32State struct {
	m     ir.U32Match
	flags x6flags
}

// parse implements matchState.
func (s *u32State) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(u32Ext, o.id, invert); f != nil {
		return f
	}
	tests, f := parseU32(arg)
	if f != nil {
		return f
	}
	s.m = ir.U32Match{Tests: tests, Invert: invert}
	s.flags.done(o.id)
	return nil
}

// u32Parser is u32_parse's cursor over the argument.
type u32Parser struct {
	s   string
	pos int
}

// at returns the byte at the cursor, NUL at the end (a C string's).
func (p *u32Parser) at() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// errAt is a failure "at char N" of the cursor.
func (p *u32Parser) errAt(what string) *failure {
	return paramErr("u32: at char %d: %s", p.pos, what)
}

// number is u32's parse_number: xtables_strtoui in base 0 up to
// UINT32_MAX, at least one digit.
func (p *u32Parser) number() (uint32, *failure) {
	v, end, ok := xtStrtouiPrefix(p.s[p.pos:], 0, 1<<32-1)
	if !ok || end == 0 {
		return 0, p.errAt("not a number or out of range")
	}
	p.pos += end
	return uint32(v), nil
}

// operator reads the operator before a location's next number.
func (p *u32Parser) operator() (ir.U32Op, *failure) {
	var op ir.U32Op
	switch p.at() {
	case '&':
		op = ir.U32And
	case '<', '>':
		c := p.at()
		p.pos++
		if p.at() != c {
			return 0, p.errAt(fmt.Sprintf("a second '%c' was expected", c))
		}
		op = ir.U32LeftShift
		if c == '>' {
			op = ir.U32RightShift
		}
	case '@':
		op = ir.U32At
	default:
		return 0, p.errAt("operator expected")
	}
	p.pos++
	return op, nil
}

// parseU32 is u32_parse: tests separated by "&&", each a location (numbers
// joined by &, <<, >>, @) "=" a comma list of values or min:max ranges,
// at most ir.U32MaxSize of each.
func parseU32(arg string) ([]ir.U32Test, *failure) {
	p := &u32Parser{s: arg}
	var tests []ir.U32Test
	var cur ir.U32Test
	readingValues := false
	for {
		for isCSpace(p.at()) {
			p.pos++
		}
		if p.pos >= len(p.s) {
			if !readingValues {
				return nil, paramErr("u32: abrupt end of input after location specifier")
			}
			if len(cur.Values) == 0 {
				return nil, paramErr("u32: test ended with no value specified")
			}
			tests = append(tests, cur)
			if len(tests) > ir.U32MaxSize {
				return nil, p.errAt("too many \"&&\"s")
			}
			return tests, nil
		}
		var f *failure
		if !readingValues {
			readingValues, f = p.location(&cur)
		} else {
			var next bool
			next, f = p.value(&cur)
			if next {
				tests = append(tests, cur)
				if len(tests) > ir.U32MaxSize {
					return nil, p.errAt("too many \"&&\"s")
				}
				p.pos++
				cur, readingValues = ir.U32Test{}, false
			}
		}
		if f != nil {
			return nil, f
		}
	}
}

// location reads the next part of a test's location: its first number, an
// operator and a number, or the "=" that ends it (true).
func (p *u32Parser) location(t *ir.U32Test) (bool, *failure) {
	if p.at() == '=' {
		if len(t.Loc) == 0 {
			return false, p.errAt("location spec missing")
		}
		p.pos++
		return true, nil
	}
	var l ir.U32Loc
	if len(t.Loc) != 0 {
		op, f := p.operator()
		if f != nil {
			return false, f
		}
		l.Op = op
	}
	n, f := p.number()
	if f != nil {
		return false, f
	}
	l.Num = n
	t.Loc = append(t.Loc, l)
	if len(t.Loc) > ir.U32MaxSize {
		return false, p.errAt("too many operators")
	}
	return false, nil
}

// value reads the next part of a test's values: a range (after a comma
// when not the first), or the first '&' of the "&&" that ends the test
// (true; the cursor on the second '&').
func (p *u32Parser) value(t *ir.U32Test) (bool, *failure) {
	if p.at() == '&' {
		p.pos++
		if p.at() != '&' {
			return false, p.errAt("a second '&' was expected")
		}
		if len(t.Values) == 0 {
			return false, p.errAt("value spec missing")
		}
		return true, nil
	}
	if len(t.Values) > 0 {
		if p.at() != ',' {
			return false, p.errAt("expected \",\" or \"&&\"")
		}
		p.pos++
	}
	lo, f := p.number()
	if f != nil {
		return false, f
	}
	hi := lo
	for isCSpace(p.at()) {
		p.pos++
	}
	if p.at() == ':' {
		p.pos++
		if hi, f = p.number(); f != nil {
			return false, f
		}
	}
	t.Values = append(t.Values, ir.U32Range{Min: lo, Max: hi})
	if len(t.Values) > ir.U32MaxSize {
		return false, p.errAt("too many \",\"s")
	}
	return false, nil
}

// final implements matchState.
func (s *u32State) final(*parseCtx) *failure { return s.flags.fcheck(u32Ext) }

// build implements matchState.
func (s *u32State) build() ir.Match { return s.m.CloneMatch() }

// u32OpText are the operators as u32_dump prints them.
var u32OpText = [...]string{ir.U32And: "&", ir.U32LeftShift: "<<", ir.U32RightShift: ">>", ir.U32At: "@"}

// u32Text is u32_dump: the tests, quoted, numbers in hex.
func u32Text(m *ir.U32Match) string {
	var b strings.Builder
	b.WriteString(" \"")
	for i, t := range m.Tests {
		if i > 0 {
			b.WriteString("&&")
		}
		for j, l := range t.Loc {
			if j > 0 && int(l.Op) < len(u32OpText) {
				b.WriteString(u32OpText[l.Op])
			}
			fmt.Fprintf(&b, "0x%x", l.Num)
		}
		b.WriteByte('=')
		for j, v := range t.Values {
			if j > 0 {
				b.WriteByte(',')
			}
			if v.Min == v.Max {
				fmt.Fprintf(&b, "0x%x", v.Min)
			} else {
				fmt.Fprintf(&b, "0x%x:0x%x", v.Min, v.Max)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeU32 prints a u32 match as u32_save does.
func writeU32(b *strings.Builder, m *ir.U32Match) {
	if m.Invert {
		b.WriteString(" !")
	}
	b.WriteString(" --u32" + u32Text(m))
}

// u32MaxShift is the largest shift count u32_mt_checkentry allows.
const u32MaxShift = 31

// checkU32 is u32_mt_checkentry: shift counts up to 31 (EINVAL beyond).
func checkU32(m *ir.U32Match) *failure {
	for _, t := range m.Tests {
		for _, l := range t.Loc[1:] {
			if (l.Op == ir.U32LeftShift || l.Op == ir.U32RightShift) && l.Num > u32MaxShift {
				return kernelEINVAL()
			}
		}
	}
	return nil
}

// u32Listing is a u32 match in iptables -L's listing (u32_print).
func u32Listing(m *ir.U32Match) string {
	if m.Invert {
		return " u32 !" + u32Text(m)
	}
	return " u32" + u32Text(m)
}
