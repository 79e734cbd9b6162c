package iptables

import (
	"strings"
	"sync"

	"github.com/xfw-dev/xfw/internal/ir"
)

// maxNameLen is XT_EXTENSION_MAXNAMELEN: names (chains, targets, matches)
// must be shorter.
const maxNameLen = 29

// matchInst is one -m (or implicitly loaded) match of the rule being parsed.
type matchInst struct {
	ext       *extension
	state     matchState
	completed bool
}

// parser is do_parse's state for one command line.
type parser struct {
	fam     ir.Family
	restore bool
	prog    string
	g       *getopt
	opts    []*optDef
	// optMemo remembers mergeOpts' tables; it outlives a parse (release).
	optMemo *optTableMemo
	ctx     parseCtx

	command  uint32
	options  uint32
	invflags uint32
	cmd      Command

	table    string
	tableSet bool

	protoSpelling string
	protoSet      bool
	protoUsed     bool

	matches []*matchInst
	// matchBuf holds the first matches of p.matches, and gs the getopt
	// state p.g points to: one allocation per line for the parser, its
	// getopt and the matches a rule usually has.
	matchBuf [4]matchInst
	gs       getopt
	// addrBuf holds the -s and the -d address of a rule that has one of
	// each (parseAddresses).
	addrBuf [2]addrPair
	// loaded lists the extensions whose options are in opts (mergeOpts).
	loaded     []*extension
	target     targetState
	targetExt  *extension
	jumpto     string
	gotoSet    bool
	shost      string
	dhost      string
	inIface    ir.IfaceMatch
	outIface   ir.IfaceMatch
	frag       bool
	counters   ir.Counters
	wait       int
	waitIntSet bool
}

// ParseCommand parses an iptables (fam IPv4) or ip6tables (IPv6) command
// line, without the program name, as iptables 1.8.9 does. Errors are *Error
// with iptables' message and exit status.
//
// Jump targets are not resolved: "-j NAME" for a NAME that is no target
// module is taken as a jump to a user chain, which Apply checks.
func ParseCommand(fam ir.Family, args []string) (*Command, error) {
	return ParseCommandWith(fam, args, ParseOptions{})
}

// ParseOptions are what the parser needs from its environment.
type ParseOptions struct {
	// Sets looks up the ipsets named by set matches, as iptables asks the
	// kernel (nil: no set exists).
	Sets SetLookup
}

// ParseCommandWith is ParseCommand with the environment in opts.
func ParseCommandWith(fam ir.Family, args []string, opts ParseOptions) (*Command, error) {
	argv := append([]string{ProgramName(fam)}, args...)
	c, f := parseArgv(fam, argv, false, ProgramName(fam), opts.Sets)
	if f != nil {
		return nil, f.render(ProgramName(fam), 0)
	}
	return c, nil
}

// ParseRule parses a rule specification as given after "-A CHAIN" (for
// example "-s 10.0.0.0/8 -p tcp --dport 22 -j ACCEPT") and returns the
// rules it stands for: several when -s or -d list several addresses.
// Checks the kernel makes when the rule is added to chain are applied too,
// except that jumps to user chains are assumed to exist.
func ParseRule(fam ir.Family, chain string, spec []string) ([]*ir.Rule, error) {
	c, err := ParseCommand(fam, append([]string{"-A", chain}, spec...))
	if err != nil {
		return nil, err
	}
	rules, f := c.resolveTargets(nil)
	if f != nil {
		return nil, f.render(ProgramName(fam), 0)
	}
	hooks := hookMask(0)
	if h, ok := builtinHook(chain); ok {
		hooks = h
	}
	for _, r := range rules {
		if f := checkEntry(fam, "", r, hooks); f != nil {
			return nil, f.render(ProgramName(fam), 0)
		}
	}
	return rules, nil
}

// parseArgv runs do_parse on argv (argv[0] is the program name; for
// iptables-restore it is followed by "-t TABLE"). prog is the name used in
// messages produced while parsing; sets serves the set match.
func parseArgv(fam ir.Family, argv []string, restore bool, prog string, sets SetLookup) (*Command, *failure) {
	return parseArgvInto(nil, fam, argv, restore, prog, sets)
}

// parseArgvInto is parseArgv returning the command in dst (a new one when
// dst is nil): a restore keeps the commands it parses ahead in its
// batches' records.
func parseArgvInto(dst *Command, fam ir.Family, argv []string, restore bool, prog string, sets SetLookup) (*Command, *failure) {
	p := parserPool.Get().(*parser)
	p.fam, p.restore, p.prog = fam, restore, prog
	p.opts, p.table = globalOptTable, "filter"
	p.ctx.fam = fam
	p.ctx.sets = sets
	p.cmd.Family = fam
	p.gs = newGetopt(argv, iptShorts, p.opts)
	p.g = &p.gs
	p.ctx.g = p.g
	if f := p.run(); f != nil {
		if len(p.cmd.Notices) > 0 {
			f.notice = strings.Join(p.cmd.Notices, "\n") + "\n" + f.notice
		}
		p.release()
		return nil, f
	}
	cmd := dst
	if cmd == nil {
		cmd = new(Command)
	}
	*cmd = p.cmd
	if len(cmd.Rules) == 1 && &cmd.Rules[0] == &p.cmd.oneRule[0] {
		cmd.oneRule[0] = cmd.Rules[0]
		cmd.Rules = cmd.oneRule[:1:1]
	}
	p.release()
	return cmd, nil
}

// parserPool holds parsers for reuse: a restore parses hundreds of
// thousands of lines, and a parser is several hundred bytes. A parser
// that panicked is not put back.
var parserPool = sync.Pool{New: func() any {
	p := &parser{optMemo: new(optTableMemo)}
	p.ctx.notice = p.addNotice
	p.ctx.slabs = new(stateSlabs)
	p.matches = make([]*matchInst, 0, len(p.matchBuf))
	return p
}}

// addNotice records a warning for the command (parseCtx.notice).
func (p *parser) addNotice(s string) { p.cmd.Notices = append(p.cmd.Notices, s) }

// release resets p to the state parserPool's New gives and puts it back.
// Nothing the parse returned refers to p: the command is a copy, the
// rules and matches are built from p's fields by value.
func (p *parser) release() {
	notice, matches, loaded, memo, slabs := p.ctx.notice, p.matches[:0], p.loaded[:0], p.optMemo, p.ctx.slabs
	*p = parser{}
	p.ctx.notice, p.matches, p.loaded, p.optMemo, p.ctx.slabs = notice, matches, loaded, memo, slabs
	parserPool.Put(p)
}

// addCommand is xshared.c's add_command.
func (p *parser) addCommand(newcmd, othercmds uint32, invert bool) *failure {
	if invert {
		return paramErr("unexpected '!' flag")
	}
	if p.command&^othercmds != 0 {
		return paramErr("Cannot use -%c with -%c", cmdChar(newcmd), cmdChar(p.command&^othercmds))
	}
	p.command |= newcmd
	return nil
}

// setOption is xshared.c's set_option.
func (p *parser) setOption(opt uint32, invert bool) *failure {
	if p.options&opt != 0 {
		return paramErr("multiple -%c flags not allowed", optChar(opt))
	}
	p.options |= opt
	if invert {
		if opt&optInvertible == 0 {
			return paramErr("cannot have ! before -%c", optChar(opt))
		}
		p.invflags |= opt
	}
	return nil
}

// run is the main loop of do_parse followed by its checks.
func (p *parser) run() *failure {
	invert := false
	for {
		c := p.g.next()
		if c == optEnd {
			break
		}
		optarg := p.g.optarg
		if handled, f := p.commandOption(c, optarg, invert); handled {
			if f != nil {
				return f
			}
			invert = false
			continue
		}
		if c == optNonOpt && optarg == "!" {
			if invert {
				return paramErr("multiple consecutive ! not allowed")
			}
			invert = true
			continue
		}
		next, f := p.option(c, optarg, invert)
		switch {
		case f != nil:
			return f
		case next == stepStop:
			return nil
		case next == stepRetry:
			continue
		}
		invert = false
	}
	return p.finish(invert)
}

// parseStep is what run does after an option.
type parseStep int

const (
	// stepDone: the option is read; the next one starts without "!".
	stepDone parseStep = iota
	// stepRetry: the option is read again (a protocol match was loaded
	// for it), "!" still applying.
	stepRetry
	// stepStop: parsing ends here, without do_parse's checks (-h, -V, a
	// rule of the other family in iptables-restore).
	stepStop
)

// option handles option c (not a command, not "!") of do_parse's switch.
func (p *parser) option(c int, optarg string, invert bool) (parseStep, *failure) {
	var f *failure
	switch c {
	case 'h':
		p.cmd.Kind = CmdHelp
		if p.protoSet {
			p.cmd.HelpProtocol = p.protoSpelling
		}
		return stepStop, nil
	case 'V':
		p.cmd.Kind = CmdVersion
		return stepStop, nil
	case 'p':
		f = p.optProtocol(optarg, invert)
	case 's':
		if f = p.setOption(optSource, invert); f == nil {
			p.shost = optarg
		}
	case 'd':
		if f = p.setOption(optDestination, invert); f == nil {
			p.dhost = optarg
		}
	case 'g':
		if f = p.setOption(optJump, invert); f == nil {
			p.gotoSet = true
			p.jumpto, f = parseTargetName(optarg)
		}
	case 'j':
		if f = p.setOption(optJump, invert); f == nil {
			f = p.commandJump(optarg)
		}
	case 'i', 'o':
		f = p.optIface(byte(c), optarg, invert)
	case 'f':
		if p.fam == ir.IPv6 {
			f = paramErr("`-f' is not supported in IPv6, use -m frag instead")
		} else if f = p.setOption(optFragment, invert); f == nil {
			p.frag = true
		}
	case 'v':
		if p.cmd.Verbose == 0 {
			f = p.setOption(optVerbose, invert)
		}
		p.cmd.Verbose++
	case 'm':
		f = p.commandMatch(optarg, invert)
	case 'n':
		f = p.setOption(optNumeric, invert)
		p.cmd.Numeric = true
	case 't':
		switch {
		case invert:
			f = paramErr("unexpected ! flag before --table")
		case p.restore && p.tableSet:
			f = paramErr("The -t option cannot be used in %s.\n", p.prog)
		default:
			p.table, p.tableSet = optarg, true
		}
	case 'x':
		f = p.setOption(optExpanded, invert)
		p.cmd.Exact = true
	case 'w':
		f = p.optWait()
	case 'W':
		f = p.optWaitInterval()
	case '0':
		f = p.setOption(optLineNumbers, invert)
		p.cmd.LineNumbers = true
	case 'M':
		// --modprobe: xfw loads no kernel modules.
	case 'c':
		f = p.optCounters(optarg, invert)
	case '4', '6':
		return p.optFamily(byte(c))
	case optNonOpt:
		f = badArg(optarg)
	default:
		again, f := p.commandDefault(c, invert)
		if f == nil && again {
			return stepRetry, nil
		}
		return stepDone, f
	}
	return stepDone, f
}

// optFamily handles -4 and -6: a rule of the other family is an error,
// skipped by iptables-restore.
func (p *parser) optFamily(c byte) (parseStep, *failure) {
	own := byte('4')
	if p.fam == ir.IPv6 {
		own = '6'
	}
	if c == own {
		return stepDone, nil
	}
	if p.restore {
		p.cmd.skip = true
		p.cmd.Kind = kindOf(p.command)
		return stepStop, nil
	}
	return stepDone, tryHelp()
}
