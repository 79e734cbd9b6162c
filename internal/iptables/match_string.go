package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The string match (libxt_string, revision 1): --algo, --string or
// --hex-string, --from, --to, --icase; its output and the kernel's checks
// (string_mt_check, textsearch_prepare).

// string guided option ids (libxt_string's enum).
const (
	stringOptFrom = iota
	stringOptTo
	stringOptAlgo
	stringOptICase
	stringOptString
	stringOptHex
)

// stringAlgoSize is XT_STRING_MAX_ALGO_NAME_SIZE: the algo field's size,
// its terminating NUL included.
const stringAlgoSize = 16

// stringExt is the string match module.
var stringExt = registerMatch(&extension{
	name: "string",
	x6: []x6opt{
		{name: "from", id: stringOptFrom, typ: xtUint16RC},
		{name: "to", id: stringOptTo, typ: xtUint16RC},
		{name: "algo", id: stringOptAlgo, typ: xtString, flags: xtMand, size: stringAlgoSize},
		{name: "string", id: stringOptString, typ: xtString, flags: xtInvert, excl: 1 << stringOptHex},
		{name: "hex-string", id: stringOptHex, typ: xtString, flags: xtInvert, excl: 1 << stringOptString},
		{name: "icase", id: stringOptICase, typ: xtNone},
	},
	newMatch: func(*parseCtx) matchState {
		return &stringState{m: ir.StringMatch{To: ir.StringNoTo}} // string_init
	},
})

// stringState is one string match being parsed.
type stringState struct {
	m     ir.StringMatch
	flags x6flags
}

// parse implements matchState.
func (s *stringState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(stringExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case stringOptFrom, stringOptTo:
		v, ok := xtStrtoui(arg, 0, maxUint16)
		if !ok {
			return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", stringExt.name, x.name, 0, maxUint16)
		}
		if o.id == stringOptFrom {
			s.m.From = uint16(v)
		} else {
			s.m.To = uint16(v)
		}
	case stringOptAlgo:
		s.m.Algo, f = x.parseString(arg)
	case stringOptString:
		if len(arg) > ir.StringMaxPattern {
			return paramErr("STRING too long \"%s\"", arg)
		}
		s.m.Pattern = []byte(arg)
		s.m.Invert = s.m.Invert || invert
	case stringOptHex:
		s.m.Pattern, f = parseHexString(arg)
		s.m.Invert = s.m.Invert || invert
	case stringOptICase:
		s.m.ICase = true
	}
	if f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// parseHexString is libxt_string's parse_hex_string: text with |hex
// blocks| (spaces allowed inside) and \-escaped literal characters.
func parseHexString(s string) ([]byte, *failure) {
	if s == "" {
		return nil, paramErr("STRING must contain at least one char")
	}
	at := func(i int) byte { // s[i], or the C string's NUL past its end
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	var pat []byte
	hex, literal := false, false
	for i := 0; i < len(s); {
		if len(pat) >= ir.StringMaxPattern {
			return nil, paramErr("STRING too long \"%s\"", s)
		}
		switch {
		case s[i] == '\\' && !hex:
			literal = true
		case s[i] == '\\':
			return nil, paramErr("Cannot include literals in hex data")
		case s[i] == '|':
			if hex {
				hex = false
			} else {
				hex = true
				for at(i+1) == ' ' {
					i++
				}
			}
			if i+1 >= len(s) {
				return pat, nil
			}
			i++
		}
		switch {
		case literal:
			if i+1 >= len(s) {
				return nil, paramErr("Bad literal placement at end of string")
			}
			pat = append(pat, s[i+1])
			i += 2
			literal = false
		case hex:
			if i+1 >= len(s) {
				return nil, paramErr("Odd number of hex digits")
			}
			if i+2 >= len(s) {
				return nil, paramErr("Invalid hex block")
			}
			hi, lo := hexDigit(s[i]), hexDigit(s[i+1])
			if hi < 0 {
				return nil, paramErr("Invalid hex char '%c'", s[i])
			}
			if lo < 0 {
				return nil, paramErr("Invalid hex char '%c'", s[i+1])
			}
			pat = append(pat, byte(hi<<4|lo))
			if s[i+2] == ' ' {
				i += 3 // spaces are part of the hex block
			} else {
				i += 2
			}
		default:
			pat = append(pat, s[i])
			i++
		}
	}
	return pat, nil
}

// final implements matchState: string_check first, then the guided
// options' checks (xtables_option_mfcheck's order).
func (s *stringState) final(*parseCtx) *failure {
	if !s.flags.has(stringOptString) && !s.flags.has(stringOptHex) {
		return paramErr("STRING match: You must specify `--string' or `--hex-string'")
	}
	return s.flags.fcheck(stringExt)
}

// build implements matchState.
func (s *stringState) build() ir.Match { m := s.m; return &m }

// stringPatternText is the pattern as libxt_string prints it: quoted with
// " and \ escaped, or as one |hex block| when a byte is not printable or
// the last is a backslash (is_hex_string).
func stringPatternText(p []byte) (text string, hex bool) {
	hex = len(p) > 0 && p[len(p)-1] == '\\'
	for _, c := range p {
		if c < ' ' || c > '~' {
			hex = true
		}
	}
	var b strings.Builder
	if hex {
		fmt.Fprintf(&b, "\"|%x|\"", p)
		return b.String(), true
	}
	b.WriteByte('"')
	for _, c := range p {
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), false
}

// writeString prints a string match as string_save does.
func writeString(b *strings.Builder, m *ir.StringMatch) {
	text, hex := stringPatternText(m.Pattern)
	if m.Invert {
		b.WriteString(" !")
	}
	if hex {
		b.WriteString(" --hex-string ")
	} else {
		b.WriteString(" --string ")
	}
	b.WriteString(text)
	b.WriteString(" --algo " + m.Algo)
	if m.From != 0 {
		fmt.Fprintf(b, " --from %d", m.From)
	}
	if m.To != ir.StringNoTo {
		fmt.Fprintf(b, " --to %d", m.To)
	}
	if m.ICase {
		b.WriteString(" --icase")
	}
}

// stringListing is a string match in iptables -L's listing (string_print).
func stringListing(m *ir.StringMatch) string {
	var b strings.Builder
	text, _ := stringPatternText(m.Pattern)
	fmt.Fprintf(&b, " STRING match %s %s ALGO name %s", invString(m.Invert), text, m.Algo)
	if m.From != 0 {
		fmt.Fprintf(&b, " FROM %d", m.From)
	}
	if m.To != ir.StringNoTo {
		fmt.Fprintf(&b, " TO %d", m.To)
	}
	if m.ICase {
		b.WriteString(" ICASE")
	}
	return b.String()
}

// stringFSMTokenSize is sizeof(struct ts_fsm_token): the fsm algorithm
// takes a pattern of such tokens and refuses other lengths.
const stringFSMTokenSize = 8

// checkString is string_mt_check: the offsets in order, a pattern, and an
// algorithm the kernel has (textsearch_prepare: ENOENT for an unknown
// name; EINVAL from fsm for a pattern that is no token list).
func checkString(m *ir.StringMatch) *failure {
	if m.From > m.To || len(m.Pattern) == 0 {
		return kernelEINVAL()
	}
	switch m.Algo {
	case "bm", "kmp":
		return nil
	case "fsm":
		if len(m.Pattern)%stringFSMTokenSize != 0 {
			return kernelEINVAL()
		}
		return nil
	}
	return iptcErr(errNoChain)
}
