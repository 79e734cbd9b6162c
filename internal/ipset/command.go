package ipset

import (
	"strings"
)

// cmdKind is an ipset command.
type cmdKind uint8

const (
	cmdNone cmdKind = iota
	cmdCreate
	cmdAdd
	cmdDel
	cmdTest
	cmdDestroy
	cmdList
	cmdSave
	cmdRestore
	cmdFlush
	cmdRename
	cmdSwap
	cmdHelp
	cmdVersion
)

// commandNames lists each command's name and aliases in ipset's order:
// the first whose name starts with the argument wins (so "d" is del and
// "des" destroy).
var commandNames = []struct {
	kind  cmdKind
	names []string
}{
	{cmdCreate, []string{"create", "n", "-N"}},
	{cmdAdd, []string{"add", "a", "-A"}},
	{cmdDel, []string{"del", "d", "-D"}},
	{cmdTest, []string{"test", "t", "-T"}},
	{cmdDestroy, []string{"destroy", "x", "-X"}},
	{cmdList, []string{"list", "l", "-L"}},
	{cmdSave, []string{"save", "s", "-S"}},
	{cmdRestore, []string{"restore", "r", "-R"}},
	{cmdFlush, []string{"flush", "f", "-F"}},
	{cmdRename, []string{"rename", "e", "-E"}},
	{cmdSwap, []string{"swap", "w", "-W"}},
	{cmdHelp, []string{"help", "h", "-H"}},
	{cmdVersion, []string{"version", "v", "-V"}},
}

// commandName is the name ipset uses for kind in its messages.
func commandName(kind cmdKind) string {
	for _, c := range commandNames {
		if c.kind == kind {
			return c.names[0]
		}
	}
	return ""
}

// matchCommand finds the command arg names, as ipset_match_cmd does: two
// leading dashes are ignored and a prefix of a name matches.
func matchCommand(arg string) cmdKind {
	s := arg
	if len(s) > 2 && strings.HasPrefix(s, "--") {
		s = s[2:]
	}
	if s == "" || arg == "-" {
		return cmdNone
	}
	for _, c := range commandNames {
		for _, n := range c.names {
			if strings.HasPrefix(n, s) {
				return c.kind
			}
		}
	}
	return cmdNone
}

// globalOptions are ipset's options that are not part of a command.
type globalOptions struct {
	exist, quiet, sorted, terse, names, resolve bool
	output                                      string // "", "plain", "save", "xml", "json"
	file                                        string
	version, help                               bool
}

// command is one parsed ipset invocation (or restore line).
type command struct {
	kind cmdKind
	args []string // after the command word, global options removed
	opts globalOptions
}

// optionNames maps ipset's global options to a setter; ok=false when the
// option takes an argument that is missing.
func takeGlobalOption(o *globalOptions, args []string, i int) (consumed int, err *Error) {
	a := args[i]
	if strings.HasPrefix(a, "--") {
		a = a[1:]
	}
	switch a {
	case "-exist", "-!":
		o.exist = true
	case "-quiet", "-q":
		o.quiet = true
	case "-sorted", "-s":
		o.sorted = true
	case "-terse", "-t":
		o.terse = true
	case "-name", "-n":
		o.names = true
	case "-resolve", "-r":
		o.resolve = true
	case "-version", "-v":
		o.version = true
	case "-help", "-h":
		o.help = true
	case "-output", "-o", "-file", "-f":
		if i+1 >= len(args) {
			short := "-o"
			if a == "-file" || a == "-f" {
				short = "-f"
			}
			return 0, usageErr("Missing mandatory argument to option %s", short)
		}
		v := args[i+1]
		if a == "-file" || a == "-f" {
			o.file = v
			return 2, nil
		}
		switch v {
		case "plain", "save", "xml":
			o.output = v
		default:
			return 0, syntaxErr("unknown output mode '%s'", v)
		}
		return 2, nil
	default:
		return 0, nil
	}
	return 1, nil
}

// parseArgv splits argv into global options, the command and its
// arguments. inRestore: a restore line (restore-only rules apply).
func parseArgv(argv []string, inRestore bool) (*command, *Error) {
	c := &command{}
	var rest []string
	for i := 0; i < len(argv); {
		n, err := takeGlobalOption(&c.opts, argv, i)
		if err != nil {
			return c, err
		}
		if n > 0 {
			i += n
			continue
		}
		rest = append(rest, argv[i])
		i++
	}
	if len(rest) == 0 {
		if c.opts.version {
			c.kind = cmdVersion
			return c, nil
		}
		if c.opts.help {
			c.kind = cmdHelp
			return c, nil
		}
		return c, usageErr("No command specified.")
	}
	c.kind = matchCommand(rest[0])
	if c.kind == cmdNone {
		return c, usageErr("No command specified: unknown argument %s", rest[0])
	}
	if inRestore {
		switch c.kind {
		case cmdRestore, cmdHelp, cmdVersion:
			return c, usageErr("Command `%s' is invalid in restore mode.", commandName(c.kind))
		}
	}
	c.args = rest[1:]
	return c, c.checkArity()
}

// checkArity reports missing and surplus arguments as ipset does.
func (c *command) checkArity() *Error {
	name := commandName(c.kind)
	need, max := 0, 0
	switch c.kind {
	case cmdCreate, cmdAdd, cmdDel, cmdTest:
		need, max = 2, -1
	case cmdRename, cmdSwap:
		need, max = 2, 2
	case cmdDestroy, cmdFlush, cmdList, cmdSave, cmdHelp:
		need, max = 0, 1
	case cmdRestore:
		need, max = 0, 0
	case cmdVersion:
		need, max = 0, -1
	}
	switch {
	case len(c.args) < need && len(c.args) == 0:
		return usageErr("Missing mandatory argument to command %s", name)
	case len(c.args) < need:
		return usageErr("Missing second mandatory argument to command %s", name)
	case max >= 0 && len(c.args) > max:
		return usageErr("Unknown argument %s", c.args[max])
	}
	for i := 0; i < need && i < len(c.args); i++ {
		if c.kind == cmdCreate && i == 1 {
			break
		}
		if c.kind != cmdCreate && c.kind != cmdRename && c.kind != cmdSwap && i == 1 {
			break
		}
		if len(c.args[i]) > 31 {
			return syntaxErr("setname '%s' is longer than 31 characters", c.args[i])
		}
	}
	if (c.kind == cmdDestroy || c.kind == cmdFlush || c.kind == cmdList || c.kind == cmdSave) && len(c.args) == 1 && len(c.args[0]) > 31 {
		return syntaxErr("setname '%s' is longer than 31 characters", c.args[0])
	}
	return nil
}

// splitLine splits a restore line into arguments: blanks separate them,
// double quotes group (and are removed; "" alone makes no argument).
func splitLine(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			// An empty "" is no argument at all.
			inQuote = !inQuote
		case (r == ' ' || r == '\t' || r == '\r' || r == '\n') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
