package iptables

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/xfw-dev/xfw/internal/ir"
)

// iptables-restore (legacy, ip46tables_restore_main) for the kernel's tables.

// RestoreOptions are iptables-restore's command-line options.
type RestoreOptions struct {
	// NoFlush is --noflush: keep the existing rules and user chains; a
	// ":CHAIN" line then flushes that chain instead of recreating it.
	NoFlush bool
	// Counters is --counters: use the "[packets:bytes]" of rules and
	// policies. Without it rules start at zero and ":CHAIN POLICY" lines
	// reset the policy counters.
	Counters bool
	// Table is --table: only the block of that table is restored, other
	// blocks are skipped unread. "" restores every block.
	Table string
	// Test is --test: parse and execute, but commit nothing.
	Test bool
	// Tested, when set with Test, receives the ruleset each COMMIT would
	// have produced (after the kernel's checks), so a caller can check it
	// further (xfw compiles it) without applying it.
	Tested func(*ir.Ruleset)
	// Sets looks up the ipsets named by set matches (nil: no set exists).
	Sets SetLookup
	// Output receives what commands print (-S lines in the input); nil
	// discards it.
	Output io.Writer
	// Warnings receives the warnings iptables-restore prints on standard
	// error while it parses a line (NFLOG's --nflog-range, …), one per
	// line; nil discards them.
	Warnings io.Writer
}

// restoreBufLen is the size of iptables-restore's line buffer: longer lines
// are read in pieces, each counted as a line.
const restoreBufLen = 10240

// tableNameLen is XT_TABLE_MAXNAMELEN: table names are cut to that length.
const tableNameLen = 32

// Restore reads iptables-save output from input and applies it to base (nil
// means an empty filter table) as iptables-restore (ip6tables-restore for
// IPv6) does with the legacy backend: "*filter" starts a block (flushing
// the table unless NoFlush), ":CHAIN POLICY [p:b]" lines declare chains,
// other lines are iptables commands (-A, -I, -D, -R, -N, -X, -F, -Z, -P,
// -E, …), and "COMMIT" applies the block after the kernel's checks.
//
// base is left as it is: the result shares the rules no command changed
// with it.
//
// It returns the ruleset as the kernel holds it afterwards. On error the
// returned ruleset is the state after the last successful COMMIT (base if
// there was none) and the error is an *Error carrying iptables-restore's
// message (for example "iptables-restore: line 5 failed") and exit status.
// Errors reading input are returned wrapped.
func Restore(fam ir.Family, input io.Reader, base *ir.Ruleset, opts RestoreOptions) (*ir.Ruleset, error) {
	return restoreWith(fam, input, func(func(string) bool) (*ir.Ruleset, error) { return base, nil }, opts, aheadParsers())
}

// RestoreOnto is Restore with the base ruleset returned by base, which it
// calls once, before it processes the first line but while the input is
// already read and parsed ahead (readahead.go): a caller that decodes the
// running ruleset (about half a second for kube-proxy's 10,000 services)
// does so while the input's lines are parsed. An error of base is
// returned as it is, and nothing of the input is processed then.
func RestoreOnto(fam ir.Family, input io.Reader, base func() (*ir.Ruleset, error), opts RestoreOptions) (*ir.Ruleset, error) {
	return RestoreReplacing(fam, input, func(func(string) bool) (*ir.Ruleset, error) { return base() }, opts)
}

// RestoreReplacing is RestoreOnto with base told which tables the restore
// replaces wholesale: replaced(table) true means that, if the restore
// succeeds, it flushed table (a "*table" line without --noflush, within
// Table) before any line used it, so base may return that table with its
// chains and their policies only, without rules (a restore that replaces
// kube-proxy's nat table need not decode its 440,000 rules). base may ask
// once per table while it loads; an answer waits for the first lines to
// be read (those the input holds already, readahead.go) and is false for a
// table named later, with --noflush or --test, and without parsing ahead
// (one CPU). On failure the ruleset returned may hold such a table as
// base returned it: a caller commits only what a successful restore
// returns.
func RestoreReplacing(fam ir.Family, input io.Reader, base func(replaced func(table string) bool) (*ir.Ruleset, error), opts RestoreOptions) (*ir.Ruleset, error) {
	return restoreWith(fam, input, base, opts, aheadParsers())
}

// RestoreSkipping is RestoreReplacing with base told, besides the tables
// the restore replaces (skip.Tables, as replaced), the user chains a
// --noflush restore flushes before any line uses them (skip.Rules): the
// chains a ":CHAIN" line declares in the run of such lines that opens the
// table's first block (kube-proxy's syncs declare every chain they
// write, 110,000 at 10,000 services, before their first rule). base may
// return those chains without their rules. The answer for a table waits
// until the reader has passed that run (or the input's end, or the
// reader stops ahead: then nil, decode all). On failure the ruleset
// returned may hold such chains as base returned them: a caller commits
// only what a successful restore returns.
func RestoreSkipping(fam ir.Family, input io.Reader, base func(skip ir.Skip) (*ir.Ruleset, error), opts RestoreOptions) (*ir.Ruleset, error) {
	return restoreSkip(fam, input, base, opts, aheadParsers())
}

// restoreWith is RestoreReplacing with parsers goroutines parsing ahead
// (restorer).
func restoreWith(fam ir.Family, input io.Reader, base func(replaced func(table string) bool) (*ir.Ruleset, error), opts RestoreOptions, parsers int) (*ir.Ruleset, error) {
	return restoreSkip(fam, input, func(skip ir.Skip) (*ir.Ruleset, error) { return base(skip.Tables) }, opts, parsers)
}

// restoreSkip is RestoreSkipping with parsers goroutines parsing ahead
// (restorer).
func restoreSkip(fam ir.Family, input io.Reader, base func(skip ir.Skip) (*ir.Ruleset, error), opts RestoreOptions, parsers int) (*ir.Ruleset, error) {
	r := &restorer{fam: fam, opts: opts, prog: restoreProgramName(fam), base: base, parsers: parsers, named: newNamedTables(), decls: newLeadingDecls()}
	err := r.run(newRestoreReader(input))
	return r.committed, err
}

// start sets the committed ruleset from the base (restoreWith). Rules are
// shared with the base until a command changes one in place
// (ownTableRules): copying a large ruleset per table was most of a
// --noflush restore's time.
func (r *restorer) start() error {
	base, err := r.base(ir.Skip{Tables: r.replaced, Rules: r.flushedFirst})
	if err != nil {
		return err
	}
	if base == nil {
		base = ir.NewRuleset(r.fam)
	}
	r.committed = base.CloneChains()
	return nil
}

// restorer is the state of one restore run.
type restorer struct {
	fam  ir.Family
	opts RestoreOptions
	prog string
	// base returns the ruleset the restore starts from (start).
	base func(skip ir.Skip) (*ir.Ruleset, error)
	// named holds the tables the reader found "*table" lines of that
	// the restore flushes (replaced).
	named *namedTables
	// decls holds the chains each table's first block declares before
	// its first other line (flushedFirst).
	decls     *leadingDecls
	committed *ir.Ruleset
	// tested is what --test would have committed.
	tested *ir.Ruleset
	// work is the whole ruleset the current block changes, table its
	// table.
	work     *ir.Ruleset
	table    *ir.Ruleset
	curtable string
	line     int
	// ownsTable says table's rules are copies of the committed ones,
	// which commands may change in place (ownTableRules).
	ownsTable bool
	// parsers is how many goroutines parse command lines ahead
	// (readahead.go); 0: none, each line is parsed in its turn.
	parsers int
	// parsed is the current line's command as parsed ahead, nil when it
	// was not.
	parsed *parsedLine
	// chains remembers the chains the rule commands looked up since the
	// chains last changed (chainMemo).
	chains chainMemo
	// findChain is table's ChainFinder (chain lines look up every name
	// they declare).
	findChain func(string) *ir.Chain
}

// readChunk reads like fgets with iptables-restore's buffer: up to and
// including a newline, at most restoreBufLen-1 bytes. br's buffer holds
// more than that (newRestoreReader). It waits for no more input than it
// returns, as fgets: an input kept open between lines is read line by line.
func readChunk(br *bufio.Reader) (string, error) {
	return readChunkWith(br, func(b []byte) string { return string(b) })
}

// readChunkWith is readChunk with the chunk's string made by text from
// the buffered bytes (which it must copy: the buffer is reused).
func readChunkWith(br *bufio.Reader, text func([]byte) string) (string, error) {
	const most = restoreBufLen - 1
	for {
		p, _ := br.Peek(br.Buffered()) // what is buffered: no read
		n := -1
		if i := bytes.IndexByte(p[:min(len(p), most)], '\n'); i >= 0 {
			n = i + 1
		} else if len(p) >= most {
			n = most
		}
		if n < 0 {
			// Read once more: one read of the input at most.
			if q, err := br.Peek(len(p) + 1); len(q) == len(p) {
				if len(p) > 0 && errors.Is(err, io.EOF) {
					n = len(p)
				} else {
					return "", err
				}
			}
		}
		if n >= 0 {
			chunk := text(p[:n])
			_, err := br.Discard(n)
			return chunk, err
		}
	}
}

// restoreReadBuf is the read buffer of a restore: far more than a line
// (restoreBufLen), so that readChunk's Peek seldom moves the buffered
// bytes.
const restoreReadBuf = 1 << 20

// newRestoreReader returns the buffered reader readChunk reads input with.
func newRestoreReader(input io.Reader) *bufio.Reader {
	return bufio.NewReaderSize(input, restoreReadBuf)
}

// fail converts a failure at the current line into the returned error.
func (r *restorer) fail(f *failure) error { return f.render(r.prog, r.line) }

// run processes the input. With parsers (more than one CPU) the lines
// come from readAhead, which parses their commands ahead on the other
// CPUs; the outcome is that of reading and parsing each line in its turn,
// which run does without them.
func (r *restorer) run(br *bufio.Reader) error {
	if r.parsers == 0 {
		if err := r.start(); err != nil {
			return err
		}
		for {
			chunk, err := readChunk(br)
			if errors.Is(err, io.EOF) {
				break
			}
			if err := r.process(&readLine{chunk: chunk, err: err}); err != nil {
				return err
			}
		}
	} else {
		batches, room, stop := r.readAhead(br)
		defer close(stop)
		// The lines are read and parsed further ahead while the base
		// loads (startAheadBatches).
		if err := r.start(); err != nil {
			return err
		}
		room.narrow()
		for b := range batches {
			room.release()
			<-b.parsed
			for i := range b.lines {
				if err := r.process(&b.lines[i]); err != nil {
					return err
				}
			}
		}
	}
	if r.work != nil {
		return (&failure{kind: failPlain, status: StatusOther, msg: fmt.Sprintf("%s: COMMIT expected at line %d", r.prog, r.line+1)}).render(r.prog, 0)
	}
	return nil
}

// process handles one line read (readLine), or its read error.
func (r *restorer) process(l *readLine) error {
	if l.err != nil {
		return fmt.Errorf("read %s input: %w", r.prog, l.err)
	}
	r.line++
	chunk, skip := cleanChunk(l.chunk)
	if skip {
		return nil
	}
	r.parsed = l.parsed
	ok, skip, err := r.handle(chunk)
	r.parsed = nil
	if err != nil {
		return err
	}
	if skip || (r.opts.Table != "" && r.opts.Table != r.curtable) {
		return nil
	}
	if !ok {
		return r.fail(&failure{kind: failPlain, status: StatusOther, msg: fmt.Sprintf("%s: line %d failed", r.prog, r.line)})
	}
	return nil
}

// handle processes one line. ok false means "line N failed"; skip means the
// line belongs to a table skipped by Table.
func (r *restorer) handle(chunk string) (ok, skip bool, err error) {
	inTable := r.work != nil
	first := byte(0)
	if chunk != "" {
		first = chunk[0]
	}
	switch {
	case chunk == "COMMIT\n" && inTable:
		if !r.opts.Test {
			if f := validate(r.table); f != nil {
				return false, false, r.fail(f)
			}
			r.committed = r.work
		} else if r.opts.Tested != nil {
			if f := validate(r.table); f != nil {
				return false, false, r.fail(f)
			}
			r.opts.Tested(r.work)
		}
		r.work = nil
		return true, false, nil
	case first == '*' && !inTable:
		return r.startTable(chunk)
	case first == ':' && inTable:
		return true, false, r.chainLine(chunk)
	case inTable:
		return true, false, r.commandLine(chunk)
	}
	return false, false, nil
}

// tableLineName returns the table a "*TABLE" line names, and that name
// cut to XT_TABLE_MAXNAMELEN (the current table from then on); ok false
// when the line names none.
func tableLineName(chunk string) (table, cut string, ok bool) {
	buf := []byte(chunk)
	var save int
	t := strtok(buf, 1, " \t\n", &save)
	if t < 0 {
		return "", "", false
	}
	table = cstr(buf[t:])
	cut = table
	if len(cut) > tableNameLen {
		cut = cut[:tableNameLen]
	}
	return table, cut, true
}

// startTable handles "*TABLE".
func (r *restorer) startTable(chunk string) (ok, skip bool, err error) {
	r.chains.reset()
	table, cut, named := tableLineName(chunk)
	if !named {
		return false, false, r.fail(paramErr("%s: line %d table name invalid", r.prog, r.line))
	}
	r.curtable = cut
	if r.opts.Table != "" && r.opts.Table != table {
		return true, true, nil
	}
	if !ir.IsTable(table) {
		return false, false, r.fail(paramErr("%s: unable to initialize table '%s'", r.prog, table))
	}
	r.work = r.committed.CloneChains()
	r.table = r.work.EnsureTable(table)
	r.findChain = r.table.ChainFinder()
	r.ownsTable = false
	// iptables-legacy-restore zeroes the policy counters of the table's
	// built-in chains that the input does not declare (flushing or not,
	// -c or not); a declaration sets them (chainLine).
	for _, c := range r.table.Chains {
		if c.Builtin {
			c.Counters = ir.Counters{}
		}
	}
	if !r.opts.NoFlush {
		for _, c := range r.table.Chains {
			c.Rules = nil
		}
		kept := r.table.Chains[:0]
		for _, c := range r.table.Chains {
			if c.Builtin {
				kept = append(kept, c)
			}
		}
		r.table.Chains = kept
	}
	return true, false, nil
}

// chainLine handles ":CHAIN POLICY [packets:bytes]".
func (r *restorer) chainLine(chunk string) error {
	r.chains.reset() // the chains change
	var space [256]byte
	buf := append(space[:0], chunk...)
	var save int
	t := strtok(buf, 1, " \t\n", &save)
	if t < 0 {
		return r.fail(paramErr("%s: line %d chain name invalid", r.prog, r.line))
	}
	// The name is the line's text (strtok cut it with a NUL; chunk has
	// none, cleanChunk): no copy.
	chain := chunk[t : t+len(cstrBytes(buf[t:]))]
	if len(chain) >= maxNameLen {
		return r.fail(paramErr("Invalid chain name `%s' (%d chars max)", chain, maxNameLen-1))
	}
	if !ir.IsTableBuiltin(r.table.Table, chain) {
		if c := r.findChain(chain); c != nil && r.opts.NoFlush {
			c.Rules = nil
		} else if c != nil || isVerdictName(chain) {
			return r.fail(paramErr("error creating chain '%s':%s", chain, errFileExists))
		} else {
			r.table.Chains = append(r.table.Chains, &ir.Chain{Name: chain, Policy: ir.VerdictNone})
		}
	}
	p := strtok(buf, -1, " \t\n", &save)
	if p < 0 {
		return r.fail(paramErr("%s: line %d policy invalid", r.prog, r.line))
	}
	policy := cstr(buf[p:])
	if policy == "-" {
		return nil
	}
	var count ir.Counters
	if r.opts.Counters {
		c := strtok(buf, -1, " \t\n", &save)
		v, ok := [2]uint64{}, false
		if c >= 0 {
			v, ok = parseCounters(cstr(buf[c:]))
		}
		if !ok {
			return r.fail(paramErr("invalid policy counters for chain '%s'", chain))
		}
		count = ir.Counters{Packets: v[0], Bytes: v[1]}
	}
	if f := setPolicy(r.table, chain, policy, &count); f != nil {
		return r.fail(otherErr("Can't set policy `%s' on `%s' line %d: %s", policy, chain, r.line, f.msg))
	}
	return nil
}

// commandLine handles a command line ("[p:b] -A CHAIN …").
func (r *restorer) commandLine(chunk string) error {
	var cmd *Command
	var f *failure
	if pre := r.parsed; pre != nil && pre.line == r.line && pre.table == r.curtable && !pre.again {
		cmd, f = pre.cmd, pre.f
	} else {
		cmd, f = r.parseCommand(chunk, r.line, r.curtable, r.opts.Sets)
	}
	if f != nil {
		return r.fail(f)
	}
	if r.opts.Warnings != nil {
		for _, n := range cmd.Notices {
			fmt.Fprintln(r.opts.Warnings, n)
		}
	}
	switch cmd.Kind {
	case CmdHelp, CmdVersion:
		return nil
	}
	if !cmd.LeavesRulesAlone() {
		r.ownTableRules()
	}
	cmd.ownsRules = true
	if cmd.Kind.ChangesRuleListsOnly() {
		cmd.chains = &r.chains
	} else {
		r.chains.reset()
	}
	out, f := cmd.apply(r.table)
	if f != nil {
		return r.fail(f)
	}
	if out != "" && r.opts.Output != nil {
		if _, err := io.WriteString(r.opts.Output, out); err != nil {
			return fmt.Errorf("write %s output: %w", r.prog, err)
		}
	}
	return nil
}

// argvPrefix is the most words parseCommand puts before a line's own: the
// program, "-t TABLE" and "--set-counters P B".
const argvPrefix = 6

// parseCommand parses command line chunk (line lineNo of the input) of
// table: its "[packets:bytes]" prefix, its words and its options. It
// depends on nothing but its arguments and the restore's options, so
// lines are parsed ahead of their turn (readahead.go).
func (r *restorer) parseCommand(chunk string, lineNo int, table string, sets SetLookup) (*Command, *failure) {
	return r.parseCommandInto(nil, chunk, lineNo, table, sets)
}

// parseCommandInto is parseCommand returning the command in dst (a new
// one when dst is nil).
func (r *restorer) parseCommandInto(dst *Command, chunk string, lineNo int, table string, sets SetLookup) (*Command, *failure) {
	pcnt, bcnt, rest, has, f := ruleCounters(chunk, lineNo)
	if f != nil {
		return nil, f
	}
	// Room for the words: one more than the spaces (a quoted word with
	// spaces in it leaves some unused).
	buf := argvPool.Get().(*[]string)
	argv := *buf
	if n := argvPrefix + strings.Count(rest, " ") + 1; cap(argv) < n {
		argv = make([]string, 0, n)
	}
	argv = append(argv, r.prog, "-t", table)
	if r.opts.Counters && has {
		argv = append(argv, "--set-counters", pcnt, bcnt)
	}
	argv, f = tokenize(argv, rest)
	var cmd *Command
	if f == nil {
		cmd, f = parseArgvInto(dst, r.fam, argv, true, r.prog, sets)
	}
	clear(argv) // the words are the line's: let it go with its command
	*buf = argv[:0]
	argvPool.Put(buf)
	return cmd, f
}

// argvPool holds the argument vectors of parseCommand: the command parsed
// keeps none of it (its fields are the words, not the vector).
var argvPool = sync.Pool{New: func() any { return new([]string) }}

// ownTableRules replaces the rules of the current table, shared with the
// committed ruleset (and the caller's base) until now, by copies, before a
// command that changes rules in place (-Z, -E …) runs: the committed
// ruleset must stay as it was if the block fails.
func (r *restorer) ownTableRules() {
	if r.ownsTable {
		return
	}
	for _, c := range r.table.Chains {
		for i, rule := range c.Rules {
			c.Rules[i] = rule.Clone()
		}
	}
	r.ownsTable = true
}
