package iptables

import "strings"

// This file emulates glibc's getopt_long as iptables drives it: an option
// string starting with "-:" (non-options are returned in order with code 1,
// a missing argument is reported as ':'), long options with unambiguous
// abbreviations and "--name=value", and an option table that grows while
// parsing as match and target extensions are loaded. Reproducing the exact
// algorithm (including optind bookkeeping) is what makes option spellings,
// abbreviations and error messages behave as in iptables.

// Special getopt return codes.
const (
	optEnd     = -1  // no more options
	optNonOpt  = 1   // a non-option word, returned in order
	optUnknown = '?' // unknown or ambiguous option
	optMissing = ':' // option without its required argument
	// optExt is returned for an extension's long option; the option is
	// in getoptResult.def.
	optExt = 0x10000
)

// Argument requirements of an option.
const (
	argNone     = 0
	argRequired = 1
	argOptional = 2
)

// optDef is one long option.
type optDef struct {
	name   string
	hasArg int
	// val is the short-option code of a global option; 0 for extension
	// options, which are identified by ext and id.
	val int
	ext *extension
	id  int
}

// same reports whether two options are interchangeable for getopt's
// ambiguity check (same has_arg, flag and val).
func (o *optDef) same(p *optDef) bool {
	return o.hasArg == p.hasArg && o.val == p.val && o.ext == p.ext && o.id == p.id
}

// getopt holds getopt_long's state for one argument vector. args[0] is the
// program name, as in C.
type getopt struct {
	args []string
	// shorts is the option string without its "-:" prefix.
	shorts string
	long   []*optDef

	optind   int
	nextchar string
	// nextValid distinguishes an empty nextchar from C's NULL.
	nextValid               bool
	firstNonopt, lastNonopt int

	// Results of the last call.
	optarg    string
	hasOptarg bool
	optopt    int
	def       *optDef
}

// newGetopt starts parsing args (args[0] is the program name).
func newGetopt(args []string, shorts string, long []*optDef) getopt {
	return getopt{args: args, shorts: shorts, long: long, optind: 1, firstNonopt: 1, lastNonopt: 1}
}

// next returns the next option code, like getopt_long.
func (g *getopt) next() int {
	g.optarg, g.hasOptarg, g.def = "", false, nil
	argc := len(g.args)
	if !g.nextValid || g.nextchar == "" {
		if g.lastNonopt > g.optind {
			g.lastNonopt = g.optind
		}
		if g.firstNonopt > g.optind {
			g.firstNonopt = g.optind
		}
		if g.optind != argc && g.args[g.optind] == "--" {
			g.optind++
			if g.firstNonopt == g.lastNonopt {
				g.firstNonopt = g.optind
			}
			g.lastNonopt = argc
			g.optind = argc
		}
		if g.optind >= argc {
			if g.firstNonopt != g.lastNonopt {
				g.optind = g.firstNonopt
			}
			return optEnd
		}
		arg := g.args[g.optind]
		if arg == "" || arg[0] != '-' || len(arg) == 1 {
			g.optarg, g.hasOptarg = arg, true
			g.optind++
			return optNonOpt
		}
		if arg[1] == '-' {
			return g.long2(arg[2:])
		}
		g.nextchar, g.nextValid = arg[1:], true
	}
	c := g.nextchar[0]
	g.nextchar = g.nextchar[1:]
	idx := strings.IndexByte(g.shorts, c)
	if g.nextchar == "" {
		g.optind++
	}
	if idx < 0 || c == ':' || c == ';' {
		g.optopt = int(c)
		return optUnknown
	}
	spec := g.shorts[idx+1:]
	if strings.HasPrefix(spec, "::") {
		if g.nextchar != "" {
			g.optarg, g.hasOptarg = g.nextchar, true
			g.optind++
		}
		g.nextValid = false
	} else if strings.HasPrefix(spec, ":") {
		switch {
		case g.nextchar != "":
			g.optarg, g.hasOptarg = g.nextchar, true
			g.optind++
		case g.optind == argc:
			g.optopt = int(c)
			g.nextValid = false
			return optMissing
		default:
			g.optarg, g.hasOptarg = g.args[g.optind], true
			g.optind++
		}
		g.nextValid = false
	}
	return int(c)
}

// long2 processes "--name[=value]" (name is the text after "--").
func (g *getopt) long2(name string) int {
	argc := len(g.args)
	nameEnd := strings.IndexByte(name, '=')
	key := name
	if nameEnd >= 0 {
		key = name[:nameEnd]
	}
	var found *optDef
	for _, o := range g.long {
		if o.name == key {
			found = o
			break
		}
	}
	if found == nil {
		ambiguous := false
		for _, o := range g.long {
			if !strings.HasPrefix(o.name, key) {
				continue
			}
			if found == nil {
				found = o
			} else if !found.same(o) {
				ambiguous = true
			}
		}
		if ambiguous {
			g.nextValid = false
			g.optind++
			g.optopt = 0
			return optUnknown
		}
	}
	if found == nil {
		g.nextValid = false
		g.optind++
		g.optopt = 0
		return optUnknown
	}
	g.optind++
	g.nextValid = false
	if nameEnd >= 0 {
		if found.hasArg == argNone {
			g.optopt = found.val
			return optUnknown
		}
		g.optarg, g.hasOptarg = name[nameEnd+1:], true
	} else if found.hasArg == argRequired {
		if g.optind < argc {
			g.optarg, g.hasOptarg = g.args[g.optind], true
			g.optind++
		} else {
			g.optopt = found.val
			return optMissing
		}
	}
	g.def = found
	if found.ext != nil {
		return optExt
	}
	return found.val
}

// hasArg is xshared.c's xs_has_arg: is there a next word that looks like
// an argument rather than an option or "!"?
func (g *getopt) hasArg() bool {
	return g.optind < len(g.args) && !strings.HasPrefix(g.args[g.optind], "-") &&
		!strings.HasPrefix(g.args[g.optind], "!")
}
