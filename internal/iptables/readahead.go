package iptables

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Reading a restore's input ahead and parsing its command lines on every
// CPU.
//
// Parsing a command line (its counters, words and options: parseCommand)
// needs nothing of the rules before it, only the line, the table it is in
// and the restore's options; it is most of a large restore's front end
// (kube-proxy's 10,000 services are 440,000 lines). So a goroutine reads
// the input in batches of lines, following which table each line is in as
// handle does, and workers parse the batches' command lines while run
// applies earlier batches in order. run takes a line's parsed command
// only when the line number and table it was parsed for are the ones it
// finds (else it parses the line itself), so the commands, failures and
// their line numbers are the same as parsing each line in its turn. A
// line whose parse looks up an ipset is parsed again in its turn with the
// real lookup: loading the sets has effects (its failure replaces the
// restore's error, cli) that lines after a failing one must not have. A
// batch ends where the next line has not arrived yet, so a line is
// processed as soon as it is complete, as before (fgets).

// batchLines is the most lines a batch holds: large enough that handing
// a batch to a worker costs little per line, small enough that the
// workers and the applying goroutine overlap on a small input.
const batchLines = 256

// aheadBatches is how many batches may be read ahead of the one being
// applied: it bounds the memory of commands parsed but not yet applied.
const aheadBatches = 16

// startAheadBatches is how many batches may be read ahead while the base
// ruleset is still being loaded (restorer.start): no line is applied
// before it is, so with aheadBatches the workers stopped after 4,096
// lines and waited for the running ruleset's decode (half a second of one
// CPU for kube-proxy's 10,000 services) while the other CPUs idled. 1,024
// batches are 262,144 lines, whose commands are the rules the restore
// builds soon after anyway; the bound narrows to aheadBatches once the
// base is there (aheadRoom.narrow).
const startAheadBatches = 1024

// aheadRoom is the bound on the batches read ahead: a token per batch,
// taken by the reader before it hands a batch on and given back by the
// applying goroutine when it takes the batch. startAheadBatches tokens
// circulate at first; narrow keeps back all but aheadBatches of them.
type aheadRoom struct {
	tokens chan struct{}
	// owed is how many tokens release still keeps back (narrow); only
	// the applying goroutine uses it.
	owed int
}

// newAheadRoom returns a room of startAheadBatches tokens.
func newAheadRoom() *aheadRoom {
	a := &aheadRoom{tokens: make(chan struct{}, startAheadBatches)}
	for range startAheadBatches {
		a.tokens <- struct{}{}
	}
	return a
}

// tryTake takes a token if one is there, without waiting.
func (a *aheadRoom) tryTake() bool {
	select {
	case <-a.tokens:
		return true
	default:
		return false
	}
}

// take waits for a token; false when stopped first.
func (a *aheadRoom) take(stop <-chan struct{}) bool {
	select {
	case <-a.tokens:
		return true
	case <-stop:
		return false
	}
}

// release gives back the token of a batch taken off the channel, unless
// narrow still keeps tokens back. It never waits: at most as many tokens
// as the channel holds are ever in circulation.
func (a *aheadRoom) release() {
	if a.owed > 0 {
		a.owed--
		return
	}
	a.tokens <- struct{}{}
}

// narrow brings the tokens in circulation down to aheadBatches: those
// waiting unused are taken away now, the rest as batches are released.
func (a *aheadRoom) narrow() {
	keep := startAheadBatches - aheadBatches
drain:
	for keep > 0 {
		select {
		case <-a.tokens:
			keep--
		default:
			break drain
		}
	}
	a.owed = keep
}

// readLine is one line (fgets' chunk) of the input, or the error that
// ended reading it.
type readLine struct {
	chunk string
	err   error
	// parsed is the line's command parsed ahead, nil for other lines.
	parsed *parsedLine
}

// parsedLine is a command line's parse (parseCommand) done ahead.
type parsedLine struct {
	// line and table are the line number and current table it was
	// parsed for.
	line  int
	table string
	cmd   *Command
	f     *failure
	// command holds cmd's command (parseCommandInto).
	command Command
	// again says the parse must be done again in the line's turn: it
	// looked up an ipset, or it panicked (which its turn reports).
	again bool
}

// lineBatch is a run of consecutive lines; parsed is closed once the
// parse of each of its command lines is done.
type lineBatch struct {
	lines    []readLine
	commands int
	parsed   chan struct{}
	// parsedBuf holds the parsedLines of lines (newParsed).
	parsedBuf []parsedLine
}

// tableTracker follows the table a line is in as handle does, to tell
// command lines from the others before their turn.
type tableTracker struct {
	inTable  bool
	curtable string
	// entered, when not nil, is told the name of each table a block
	// the restore processes starts (a "*table" line outside a block,
	// within the restore's Table).
	entered func(table string)
	// decls, when not nil, follows the ":CHAIN" lines that open each
	// table's first block.
	decls *declRun
}

// commandTable reports whether line chunk (NULs cut) is a command line and
// the table it is in, and moves past it.
func (t *tableTracker) commandTable(chunk string, only string) (string, bool) {
	switch {
	case chunk == "COMMIT\n" && t.inTable:
		t.inTable = false
		t.decls.end()
	case strings.HasPrefix(chunk, "*") && !t.inTable:
		// A line naming no table or an unknown one fails the restore:
		// the lines after it are not processed.
		table, cut, ok := tableLineName(chunk)
		if ok {
			t.curtable = cut
			t.inTable = (only == "" || only == table) && ir.IsTable(table)
			if t.inTable && t.entered != nil {
				t.entered(table)
			}
			if t.inTable {
				t.decls.start(table)
			}
		}
	case strings.HasPrefix(chunk, ":"):
		if t.inTable {
			t.decls.declare(chunk)
		}
	case t.inTable:
		t.decls.end()
		return t.curtable, true
	}
	return "", false
}

// declRun is the reader's side of leadingDecls: the run of ":CHAIN" lines
// opening the block being read, if it is its table's first. Its methods
// do nothing on a nil declRun.
type declRun struct {
	out *leadingDecls
	// seen holds the tables whose first block was met.
	seen map[string]bool
	// table is the table of the open run, chains what it declared so
	// far; nil when no run is open.
	table  string
	chains map[string]struct{}
}

// start notes that a block of table starts: a run opens if it is the
// table's first.
func (d *declRun) start(table string) {
	if d == nil || d.seen[table] {
		return
	}
	d.seen[table] = true
	d.table, d.chains = table, map[string]struct{}{}
}

// declare notes a ":CHAIN" line (NULs cut) of the block: a user chain
// it flushes (or creates).
func (d *declRun) declare(chunk string) {
	if d == nil || d.chains == nil {
		return
	}
	// A built-in chain's line sets its policy, flushing nothing.
	if name := declaredChain(chunk); !ir.IsTableBuiltin(d.table, name) {
		d.chains[name] = struct{}{}
	}
}

// end notes another line of the block (a command or COMMIT): the open
// run, if any, is complete.
func (d *declRun) end() {
	if d != nil && d.chains != nil {
		d.out.publish(d.table, d.chains)
		d.chains = nil
	}
}

// declaredChain returns the chain a ":CHAIN …" line names, read as
// chainLine reads it ("" when it names none).
func declaredChain(chunk string) string {
	var space [256]byte
	buf := append(space[:0], chunk...)
	var save int
	t := strtok(buf, 1, " \t\n", &save)
	if t < 0 {
		return ""
	}
	return chunk[t : t+len(cstrBytes(buf[t:]))]
}

// leadingDecls holds, per table, the user chains the ":CHAIN" lines that
// open the table's first block declare (restorer.flushedFirst): with
// --noflush each such line flushes its chain (chainLine) before any other
// line of the block, so no line sees the rules the chain had. Written by
// the reader, read by the base's loader.
type leadingDecls struct {
	mu   sync.Mutex
	cond *sync.Cond
	// tables holds the complete runs.
	tables map[string]map[string]struct{}
	// over is set once the reader ended, waited for room ahead (it
	// may wait for the base: asking further would never end) or waited
	// for input longer than declInputWait.
	over atomic.Bool
}

// declInputWait is how long the reader may wait for the input's next line
// while the base's loader may be waiting for declarations
// (leadingDecls): a writer that streams its input (kube-proxy's pipe)
// pauses far less, a terminal or a writer waiting for something far more;
// after it the loader decodes in full.
const declInputWait = 100 * time.Millisecond

// newLeadingDecls returns an empty leadingDecls.
func newLeadingDecls() *leadingDecls {
	l := &leadingDecls{tables: map[string]map[string]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// publish records table's complete run.
func (l *leadingDecls) publish(table string, chains map[string]struct{}) {
	l.mu.Lock()
	l.tables[table] = chains
	l.mu.Unlock()
	l.cond.Broadcast()
}

// finish notes that the reader ended or waits (for room or input): runs
// not complete now are answered nil. Nothing on a nil leadingDecls.
func (l *leadingDecls) finish() {
	if l == nil {
		return
	}
	l.mu.Lock()
	over := l.over.Swap(true)
	l.mu.Unlock()
	if !over {
		l.cond.Broadcast()
	}
}

// chains returns table's run once it is complete, nil once the reader
// ended or waits for room without it.
func (l *leadingDecls) chains(table string) map[string]struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if c, ok := l.tables[table]; ok {
			return c
		}
		if l.over.Load() {
			return nil
		}
		l.cond.Wait()
	}
}

// cleanChunk cuts chunk at its first NUL (fgets' string ends there) and
// reports whether the line is one to skip (empty or a comment).
func cleanChunk(chunk string) (string, bool) {
	if i := strings.IndexByte(chunk, 0); i >= 0 {
		chunk = chunk[:i]
	}
	return chunk, strings.HasPrefix(chunk, "\n") || strings.HasPrefix(chunk, "#")
}

// aheadParsers returns how many goroutines parse ahead: one per CPU the
// process may use, none with one (nothing would run beside the applying
// goroutine).
func aheadParsers() int {
	if n := runtime.GOMAXPROCS(0); n > 1 {
		return n
	}
	return 0
}

// readAhead starts reading br in batches and parsing their command lines;
// the batches arrive in order on the channel returned, each to be
// released to room when taken. Closing stop ends the reading (a read
// already waiting for input ends when it returns).
func (r *restorer) readAhead(br *bufio.Reader) (<-chan *lineBatch, *aheadRoom, chan struct{}) {
	room := newAheadRoom()
	batches := make(chan *lineBatch, startAheadBatches)
	// As many jobs as batches may wait (the room's tokens bound both):
	// the reader reaches the ":CHAIN" lines the base's loader may wait
	// for (flushedFirst) without waiting for the parsers.
	jobs := make(chan *lineBatch, startAheadBatches)
	stop := make(chan struct{})
	for range r.parsers {
		go r.parseBatches(jobs)
	}
	go r.readBatches(br, batches, jobs, room, stop)
	return batches, room, stop
}

// readBatches reads the input into batches, sent in order on batches and,
// those with command lines, on jobs to be parsed; each batch waits for a
// token of room.
func (r *restorer) readBatches(br *bufio.Reader, batches, jobs chan<- *lineBatch, room *aheadRoom, stop <-chan struct{}) {
	defer close(jobs)
	defer close(batches)
	defer r.named.read()
	defer r.decls.finish()
	tables := tableTracker{entered: r.named.add}
	if r.opts.NoFlush && !r.opts.Test && r.decls != nil {
		tables.decls = &declRun{out: r.decls, seen: map[string]bool{}}
	}
	var text lineText
	lineNo := 0
	b := newLineBatch()
	for {
		// An input that pauses (a terminal, a writer waiting for
		// something) stops the base's loader waiting for declarations.
		var wait *time.Timer
		if tables.decls != nil && !r.decls.over.Load() && !lineBuffered(br) {
			wait = time.AfterFunc(declInputWait, r.decls.finish)
		}
		chunk, err := readChunkWith(br, text.copy)
		if wait != nil {
			wait.Stop()
		}
		end := err != nil
		if end {
			if !errors.Is(err, io.EOF) {
				b.lines = append(b.lines, readLine{err: err})
			}
		} else {
			lineNo++
			l := readLine{chunk: chunk}
			if clean, skip := cleanChunk(chunk); !skip {
				if table, ok := tables.commandTable(clean, r.opts.Table); ok {
					l.parsed = b.newParsed()
					l.parsed.line, l.parsed.table = lineNo, table
					b.commands++
				}
			}
			b.lines = append(b.lines, l)
		}
		if end || len(b.lines) >= batchLines || !lineBuffered(br) {
			if !room.tryTake() {
				// The reader may now wait for the base's loader.
				r.decls.finish()
				if !room.take(stop) {
					return
				}
			}
			if !sendBatch(b, batches, jobs, stop) || end {
				return
			}
			r.named.read()
			b = newLineBatch()
		}
	}
}

// newLineBatch returns an empty batch with room for batchLines lines.
func newLineBatch() *lineBatch {
	return &lineBatch{lines: make([]readLine, 0, batchLines), parsed: make(chan struct{})}
}

// newParsed returns a zero parsedLine of b's: the batch's command lines
// share one allocation (a kube-proxy restore has 330,000 of them).
func (b *lineBatch) newParsed() *parsedLine {
	if len(b.parsedBuf) == cap(b.parsedBuf) {
		b.parsedBuf = make([]parsedLine, 0, batchLines)
	}
	b.parsedBuf = b.parsedBuf[:len(b.parsedBuf)+1]
	return &b.parsedBuf[len(b.parsedBuf)-1]
}

// lineTextBlock is the size of the blocks lineText copies lines into.
const lineTextBlock = 64 << 10

// lineText copies the lines read ahead into shared blocks, one string
// allocation per block instead of one per line. A line's words are parts
// of its text; the words a rule keeps are interned (options, modules,
// targets), resolved to the chain's own name (jumps) or copied out
// (comments: keptText), so that the blocks of rule lines become garbage
// once applied; chain lines' blocks stay live with the chains' names. A
// block's bytes are only ever appended to, so the strings cut from it
// never change.
type lineText struct {
	block strings.Builder
}

// copy returns a string with b's bytes.
func (t *lineText) copy(b []byte) string {
	if len(b) > lineTextBlock/4 {
		return string(b)
	}
	if t.block.Cap()-t.block.Len() < len(b) {
		t.block = strings.Builder{}
		t.block.Grow(lineTextBlock)
	}
	t.block.Write(b)
	s := t.block.String()
	return s[len(s)-len(b):]
}

// sendBatch hands b on; false when stopped.
func sendBatch(b *lineBatch, batches, jobs chan<- *lineBatch, stop <-chan struct{}) bool {
	select {
	case batches <- b:
	case <-stop:
		return false
	}
	if b.commands == 0 {
		close(b.parsed)
		return true
	}
	select {
	case jobs <- b:
		return true
	case <-stop:
		return false
	}
}

// lineBuffered reports whether readChunk can return br's next line without
// reading the input (what it does then: readChunk).
func lineBuffered(br *bufio.Reader) bool {
	const most = restoreBufLen - 1
	p, _ := br.Peek(br.Buffered())
	return len(p) >= most || bytes.IndexByte(p, '\n') >= 0
}

// parseBatches parses the command lines of the batches from jobs.
func (r *restorer) parseBatches(jobs <-chan *lineBatch) {
	for b := range jobs {
		for i := range b.lines {
			if pl := b.lines[i].parsed; pl != nil {
				clean, _ := cleanChunk(b.lines[i].chunk)
				r.parseAhead(pl, clean)
			}
		}
		close(b.parsed)
	}
}

// parseAhead parses command line chunk into pl. A parse that looks up a
// set, or panics, is marked to be done again in its turn.
func (r *restorer) parseAhead(pl *parsedLine, chunk string) {
	defer func() {
		if recover() != nil {
			pl.cmd, pl.f, pl.again = nil, nil, true
			pl.command = Command{}
		}
	}()
	var sets SetLookup
	if r.opts.Sets != nil {
		sets = func(string) (SetInfo, bool) {
			pl.again = true
			return SetInfo{}, false
		}
	}
	pl.cmd, pl.f = r.parseCommandInto(&pl.command, chunk, pl.line, pl.table, sets)
}

// namedTables is what the reader found of the tables the input names
// (restorer.replaced): written by the reader, read by the base's loader.
type namedTables struct {
	mu     sync.Mutex
	tables []string
	// first is closed once the reader has handed on its first batch
	// (all the lines the input held then, up to batchLines) or ended.
	first     chan struct{}
	firstOnce sync.Once
}

// newNamedTables returns an empty namedTables.
func newNamedTables() *namedTables {
	return &namedTables{first: make(chan struct{})}
}

// add notes that a block of table starts.
func (n *namedTables) add(table string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.tables, table) {
		n.tables = append(n.tables, table)
	}
}

// read notes that the first batch is handed on (or reading ended).
func (n *namedTables) read() { n.firstOnce.Do(func() { close(n.first) }) }

// has reports whether a block of table was found so far, once the first
// batch is read.
func (n *namedTables) has(table string) bool {
	<-n.first
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.tables, table)
}

// flushedFirst returns which user chains of table a --noflush restore
// flushes before any line uses them (leadingDecls), nil for none; it may
// wait for the reader to pass the lines opening table's first block. nil
// without --noflush (replaced says more then), with --test and without
// parsing ahead.
func (r *restorer) flushedFirst(table string) func(chain string) bool {
	if !r.opts.NoFlush || r.opts.Test || r.parsers == 0 || r.decls == nil {
		return nil
	}
	set := r.decls.chains(table)
	if len(set) == 0 {
		return nil
	}
	return func(chain string) bool {
		_, ok := set[chain]
		return ok
	}
}

// replaced reports whether the restore, if it succeeds, flushes table
// before any line uses it: the reader found a block of table, and the
// restore flushes tables (no --noflush) and commits (no --test). It may
// wait for the first lines to be read; without parsing ahead it is
// always false. The answer does not depend on how far the reader got
// for a table named in the first batch; later, a table found after the
// question is answered false (base then loads it in full, as before).
func (r *restorer) replaced(table string) bool {
	if r.opts.NoFlush || r.opts.Test || r.parsers == 0 {
		return false
	}
	return r.named.has(table)
}
