package ipset

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Run runs one ipset invocation (args without the program name) against
// the sets of store and returns ipset's exit status. It loads the sets
// once, applies the command (a restore: every line) to a copy and commits
// the copy once, so the store sees one atomic change per invocation; what
// ipset would have applied before an error is committed too.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, store Store) int {
	return RunAt(args, stdin, stdout, stderr, store, time.Now())
}

// RunAt is Run with the clock fixed at now (timeouts are relative to it).
func RunAt(args []string, stdin io.Reader, stdout, stderr io.Writer, store Store, now time.Time) (exit int) {
	s := &session{stdout: stdout, stderr: stderr, store: store, now: now}
	var corrupt error
	defer func() {
		if corrupt != nil {
			exit = s.fail(kernelErr(corrupt.Error()))
		}
	}()
	defer RecoverCorrupt(&corrupt)
	cmd, perr := parseArgv(args, false)
	if perr != nil {
		s.quiet = cmd != nil && cmd.opts.quiet
		return s.fail(perr)
	}
	s.quiet = cmd.opts.quiet
	switch cmd.kind {
	case cmdVersion:
		fmt.Fprintf(stdout, "ipset v%s, protocol version: %d\n", Version, ProtocolVersion)
		return statusOK
	case cmdHelp:
		fmt.Fprint(stdout, helpText)
		return statusOK
	}
	old, err := store.Load()
	if err != nil {
		return s.fail(kernelErr(fmt.Sprintf("load sets: %v", err)))
	}
	s.sets = old.Clone()
	for _, set := range s.sets.All() {
		set.expireBefore(now)
	}
	var status int
	if cmd.kind == cmdRestore {
		in := stdin
		if cmd.opts.file != "" {
			f, err := os.Open(cmd.opts.file)
			if err != nil {
				// ipset 7.17 exits with 255 and says nothing.
				return 255
			}
			defer f.Close()
			in = f
		}
		// Options of the restore command hold for every line.
		s.env = cmd.opts
		s.env.file = ""
		status = s.restore(in, cmd.opts)
	} else {
		if cmd.opts.file != "" && (cmd.kind == cmdList || cmd.kind == cmdSave) {
			f, err := os.Create(cmd.opts.file)
			if err != nil {
				return s.fail(plainSyntaxErr("Cannot open %s for writing: %s", cmd.opts.file, errnoText(err)))
			}
			defer f.Close()
			s.stdout = f
		}
		status = s.exec(cmd)
	}
	s.lineno = 0
	if s.changed {
		if err := store.Commit(old, s.sets); err != nil {
			return s.fail(kernelErr(fmt.Sprintf("commit sets: %v", err)))
		}
	}
	return status
}

// session is the state of one invocation.
type session struct {
	sets           *Sets
	store          Store
	stdout, stderr io.Writer
	now            time.Time
	quiet          bool
	lineno         int // restore line being executed; 0 on the command line
	changed        bool
	stop           bool              // a restore must stop after this line (test)
	mode           string            // output mode, fixed by the first list or save
	env            globalOptions     // restore: options seen so far (they stick)
	families       map[string]Family // restore: families of sets created in it
}

// fail prints err as ipset does and returns its exit status.
func (s *session) fail(err *Error) int {
	if !s.quiet {
		prefix := ""
		if s.lineno > 0 && err.kind != errUsage && !err.noLine {
			prefix = fmt.Sprintf("Error in line %d: ", s.lineno)
		}
		fmt.Fprintf(s.stderr, "ipset v%s: %s%s\n", Version, prefix, err.Msg)
		if err.kind == errUsage {
			fmt.Fprintln(s.stderr, "Try `ipset help' for more information.")
		}
	}
	return err.Status()
}

// exec runs one command and returns its status.
func (s *session) exec(c *command) int {
	if err := s.execErr(c); err != nil {
		if err.Msg == "" { // test's "is NOT in set", already printed
			return err.Status()
		}
		return s.fail(err)
	}
	return statusOK
}

func (s *session) execErr(c *command) *Error {
	switch c.kind {
	case cmdCreate:
		return s.create(c)
	case cmdAdd, cmdDel, cmdTest:
		op, err := s.parseElemCommand(c)
		if err != nil {
			return err
		}
		return s.applyElem(op)
	case cmdDestroy:
		return s.destroy(c)
	case cmdFlush:
		return s.flush(c)
	case cmdRename:
		return s.rename(c.args[0], c.args[1])
	case cmdSwap:
		return s.swap(c.args[0], c.args[1])
	case cmdList, cmdSave:
		return s.list(c)
	}
	return usageErr("No command specified.")
}

// parseElemCommand parses add/del/test: the set must exist (ipset asks the
// kernel for its type before parsing the element).
func (s *session) parseElemCommand(c *command) (*elemOp, *Error) {
	if len(c.args[0]) > maxNameLen {
		return nil, syntaxErr("setname '%s' is longer than 31 characters", c.args[0])
	}
	set := s.sets.Get(c.args[0])
	if set == nil {
		return nil, plainSyntaxErr("%s", msgSetNotExist)
	}
	parseAs := set
	if f, ok := s.families[set.Name]; ok && f != set.Options.Family && set.Type.IsHash() {
		cp := *set
		cp.Options.Family = f
		parseAs = &cp
	}
	op, err := parseElemOp(c.kind, parseAs, c.args)
	if err != nil {
		return nil, err
	}
	if parseAs != set {
		// The kernel refuses an address of the other family.
		op.deferred = msgProtocolErr
	}
	op.exist = c.opts.exist
	op.lineno = s.lineno
	return op, nil
}

// applyElem carries out a parsed add, del or test.
func (s *session) applyElem(op *elemOp) *Error {
	switch op.kind {
	case cmdAdd:
		s.changed = true
		return s.sets.applyAdd(op, s.now)
	case cmdDel:
		s.changed = true
		return s.sets.applyDel(op)
	}
	in, err := s.sets.test(op)
	if err != nil {
		return err
	}
	s.stop = true
	if in {
		if !s.quiet {
			fmt.Fprintf(s.stderr, "Warning: %s is in set %s.\n", op.text, op.setName)
		}
		return nil
	}
	if !s.quiet {
		fmt.Fprintf(s.stderr, "%s is NOT in set %s.\n", op.text, op.setName)
	}
	return &Error{kind: errKernel, Msg: ""}
}

func (s *session) create(c *command) *Error {
	set, err := parseCreateCommand(c)
	if err != nil {
		return err
	}
	return s.applyCreate(c, set)
}

// parseCreateCommand parses create's arguments.
func parseCreateCommand(c *command) (*Set, *Error) {
	if len(c.args[0]) > maxNameLen {
		return nil, syntaxErr("setname '%s' is longer than 31 characters", c.args[0])
	}
	return parseCreate(c.args)
}

// applyCreate creates set (or, with -exist, accepts an alike one).
func (s *session) applyCreate(c *command, set *Set) *Error {
	if old := s.sets.Get(set.Name); old != nil {
		if c.opts.exist && sameCreate(old, set) {
			s.remember(set.Name, set.Options.Family)
			return nil
		}
		return kernelErr(msgSetExists)
	}
	s.changed = true
	s.sets.add(set)
	s.remember(set.Name, set.Options.Family)
	return nil
}

// remember records the family a create line gave a set: ipset keeps it for
// the rest of a restore and parses that set's elements with it, even when
// -exist kept an existing set of the other family.
func (s *session) remember(name string, fam Family) {
	if s.lineno == 0 {
		return
	}
	if s.families == nil {
		s.families = map[string]Family{}
	}
	s.families[name] = fam
}

// references is the set's reference count: firewall rules plus list:set
// sets holding it.
func (s *session) references(set *Set) (int, *Error) {
	n, err := s.store.References(set.Name)
	if err != nil {
		return 0, kernelErr(fmt.Sprintf("references of %s: %v", set.Name, err))
	}
	return n + s.sets.ListReferences(set.Name), nil
}

func (s *session) destroy(c *command) *Error {
	var victims []*Set
	if len(c.args) == 1 {
		set := s.sets.Get(c.args[0])
		if set == nil {
			if c.opts.exist {
				return nil
			}
			return kernelErr(msgSetNotExist)
		}
		victims = []*Set{set}
	} else {
		victims = s.sets.All()
	}
	// Every set is checked before any is destroyed, as the kernel does.
	for _, v := range victims {
		n, err := s.store.References(v.Name)
		if err != nil {
			return kernelErr(fmt.Sprintf("references of %s: %v", v.Name, err))
		}
		if n+s.sets.ListReferences(v.Name) > 0 {
			return kernelErr(msgDestroyInUse)
		}
	}
	for _, v := range victims {
		s.sets.slots[s.sets.index(v.Name)] = nil
		delete(s.families, v.Name)
	}
	s.changed = true
	return nil
}

func (s *session) flush(c *command) *Error {
	if len(c.args) == 1 {
		set := s.sets.Get(c.args[0])
		if set == nil {
			return kernelErr(msgSetNotExist)
		}
		set.flush()
	} else {
		for _, set := range s.sets.All() {
			set.flush()
		}
	}
	s.changed = true
	return nil
}

func (s *session) rename(from, to string) *Error {
	set := s.sets.Get(from)
	if set == nil {
		return kernelErr(msgSetNotExist)
	}
	n, err := s.references(set)
	if err != nil {
		return err
	}
	if n > 0 {
		return kernelErr(msgRenameInUse)
	}
	if s.sets.Get(to) != nil {
		return kernelErr(msgRenameExists)
	}
	if f, ok := s.families[from]; ok {
		delete(s.families, from)
		s.families[to] = f
	}
	set.Name = to
	s.changed = true
	return nil
}

func (s *session) swap(a, b string) *Error {
	i, j := s.sets.index(a), s.sets.index(b)
	if i < 0 {
		return kernelErr(msgSetNotExist)
	}
	if j < 0 {
		return kernelErr(msgSwapSecond)
	}
	x, y := s.sets.slots[i], s.sets.slots[j]
	if x.Type != y.Type || x.Options.Family != y.Options.Family {
		return kernelErr(msgSwapType)
	}
	// The contents change places; the names (and the rules using them)
	// stay with their slots.
	x.Name, y.Name = y.Name, x.Name
	s.sets.slots[i], s.sets.slots[j] = y, x
	fa, okA := s.families[a]
	fb, okB := s.families[b]
	delete(s.families, a)
	delete(s.families, b)
	if okA {
		s.families[b] = fa
	}
	if okB {
		s.families[a] = fb
	}
	s.changed = true
	return nil
}

func (s *session) list(c *command) *Error {
	// The first listing of a session fixes its output mode (ipset keeps
	// it in the session, so it sticks for the rest of a restore).
	if s.mode == "" {
		s.mode = c.opts.output
		if s.mode == "" {
			s.mode = "plain"
			if c.kind == cmdSave {
				s.mode = "save"
			}
		}
	}
	lo := listOptions{save: s.mode == "save", xml: s.mode == "xml", terse: c.opts.terse, names: c.opts.names,
		// list -t in plain mode asks the kernel for headers only.
		members: c.kind == cmdSave || s.mode == "save" || !c.opts.terse}
	if lo.save {
		// The save format has no names-only form.
		lo.names = false
	}
	var sets []*Set
	if len(c.args) == 1 {
		set := s.sets.Get(c.args[0])
		if set == nil {
			return kernelErr(msgSetNotExist)
		}
		sets = []*Set{set}
	} else {
		sets = s.sets.listOrder()
	}
	var refErr *Error
	refs := func(set *Set) int {
		n, err := s.references(set)
		if err != nil {
			refErr = err
		}
		return n
	}
	var b strings.Builder
	writeList(&b, sets, refs, lo, s.now)
	if refErr != nil {
		return refErr
	}
	io.WriteString(s.stdout, b.String())
	return nil
}

// restore runs the lines of in. Adds and deletes of one set that follow
// each other are batched as ipset batches them in one netlink message: a
// parse error drops the batch, a kernel error stops it at the failing line.
func (s *session) restore(in io.Reader, global globalOptions) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var batch []*elemOp
	flush := func() int {
		for _, op := range batch {
			s.lineno = op.lineno
			if err := s.applyElem(op); err != nil {
				batch = nil
				return s.fail(err)
			}
		}
		batch = nil
		return statusOK
	}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if trimmed == "COMMIT" {
			if st := flush(); st != statusOK {
				return st
			}
			continue
		}
		s.lineno = line
		c, err := parseArgv(splitLine(text), true)
		if err != nil {
			return s.fail(err)
		}
		// Options given on a line stay set for the following lines; an
		// output mode given on a line replaces the session's.
		if c.opts.output != "" {
			s.mode = c.opts.output
		}
		s.env = mergeOptions(s.env, c.opts)
		c.opts = mergeOptions(c.opts, s.env)
		c.opts.exist = c.opts.exist || global.exist
		s.quiet = s.quiet || c.opts.quiet
		if c.kind == cmdAdd || c.kind == cmdDel {
			op, err := s.parseElemCommand(c)
			if err != nil {
				return s.fail(err)
			}
			if len(batch) > 0 && (batch[0].kind != op.kind || batch[0].setName != op.setName) {
				if st := flush(); st != statusOK {
					return st
				}
			}
			batch = append(batch, op)
			continue
		}
		// The line is parsed before the batch is sent: a parse error
		// drops the batch.
		var testOp *elemOp
		var newSet *Set
		switch c.kind {
		case cmdTest:
			if testOp, err = s.parseElemCommand(c); err != nil {
				return s.fail(err)
			}
		case cmdCreate:
			if newSet, err = parseCreateCommand(c); err != nil {
				return s.fail(err)
			}
		}
		if st := flush(); st != statusOK {
			return st
		}
		s.lineno = line
		switch c.kind {
		case cmdTest:
			// A test ends the restore (ipset 7.17 stops after it).
			if err := s.applyElem(testOp); err != nil {
				if err.Msg == "" {
					return statusError
				}
				return s.fail(err)
			}
			return statusOK
		case cmdCreate:
			if err := s.applyCreate(c, newSet); err != nil {
				return s.fail(err)
			}
		default:
			if st := s.exec(c); st != statusOK {
				return st
			}
		}
	}
	if err := sc.Err(); err != nil {
		return s.fail(syntaxErr("cannot read input: %v", err))
	}
	return flush()
}

// mergeOptions returns a with the flags of b added.
func mergeOptions(a, b globalOptions) globalOptions {
	a.exist = a.exist || b.exist
	a.quiet = a.quiet || b.quiet
	a.sorted = a.sorted || b.sorted
	a.terse = a.terse || b.terse
	a.names = a.names || b.names
	a.resolve = a.resolve || b.resolve
	if a.output == "" {
		a.output = b.output
	}
	return a
}

// errnoText renders a file error as strerror does.
func errnoText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if errors.As(pe.Err, &errno) {
			// Go's texts are strerror's with a lower-case first letter.
			t := errno.Error()
			return strings.ToUpper(t[:1]) + t[1:]
		}
	}
	return err.Error()
}

// ReadsStdin reports whether the invocation reads standard input (a
// restore without -file). A caller that serialises invocations with a lock
// should read the input before it takes the lock: `ipset save | ipset
// restore` would otherwise deadlock on a large save.
func ReadsStdin(args []string) bool {
	c, err := parseArgv(args, false)
	return err == nil && c.kind == cmdRestore && c.opts.file == ""
}

// NamesFile reports whether the invocation may name a file (-file or -f,
// wherever it stands, whether or not the invocation parses): a path the
// caller's working directory and mount namespace resolve, which a process
// serving it for the caller (xfw's agent) may not see alike.
func NamesFile(args []string) bool {
	for _, a := range args {
		a = strings.TrimPrefix(a, "-")
		if a == "file" || a == "f" || a == "-file" || a == "-f" {
			return true
		}
	}
	return false
}

// ChangesNothing reports whether the invocation only reads the sets
// (test, list, save, help, version): a failure of it leaves them as they
// were. An invocation that does not parse changes nothing either.
func ChangesNothing(args []string) bool {
	c, err := parseArgv(args, false)
	if err != nil {
		return true
	}
	switch c.kind {
	case cmdTest, cmdList, cmdSave, cmdHelp, cmdVersion:
		return true
	}
	return false
}
