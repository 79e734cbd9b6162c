package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/logd"
)

// Version is xfw's version string.
const Version = "0.1.0"

// Exit statuses (iptables' xtables_exittype).
const (
	exitOK        = 0
	exitOther     = 1 // OTHER_PROBLEM
	exitParameter = 2 // PARAMETER_PROBLEM
	exitResource  = 4 // RESOURCE_PROBLEM (e.g. the lock is held)
)

// Env carries the process's streams, so tests can run commands in-process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Gone, when not nil, is closed when the caller is gone (the client
	// of a command the agent serves ended) or the agent ends: a command
	// still waiting for xfw's lock gives up, as the process it stands for
	// would have died with its caller.
	Gone <-chan struct{}
}

// Main runs xfw with os.Args semantics and returns the exit status. Called
// as iptables, ip6tables, iptables-save, … (a link to the binary) it acts as
// that command; called as iptables-xfw, iptables-xfw-save, … (the names
// the update-alternatives group links to) it acts as, and prints messages
// as, the command without "-xfw".
func Main(args []string, env Env) int {
	name := filepath.Base(args[0])
	if canonical, ok := alternativeNames[name]; ok {
		name = canonical
	}
	rest := args[1:]
	if _, ok := frontEnds[name]; !ok {
		// xfw [--xdp-mode M] COMMAND ARGS…
		for len(rest) > 0 && strings.HasPrefix(rest[0], "--xdp-mode") {
			mode := strings.TrimPrefix(rest[0], "--xdp-mode")
			rest = rest[1:]
			if mode == "" && len(rest) > 0 {
				mode, rest = rest[0], rest[1:]
			}
			os.Setenv("XFW_XDP_MODE", strings.TrimPrefix(mode, "="))
		}
		if len(rest) == 0 {
			usage(env.Stderr)
			return exitParameter
		}
		name, rest = rest[0], rest[1:]
	}
	fn, ok := frontEnds[name]
	if !ok {
		fn, ok = commands[name]
	}
	if !ok {
		fmt.Fprintf(env.Stderr, "xfw: unknown command %q\n", name)
		usage(env.Stderr)
		return exitParameter
	}
	if servedCommands[name] {
		// The namespace's agent runs it, when one serves commands.
		if code, served := tryServer(name, rest, env); served {
			return code
		}
	}
	if !unprivilegedOK[name] && !onlyInfo(rest) && !privileged() {
		return refuseUnprivileged(name, env)
	}
	return runGuarded(fn, name, rest, env)
}

// runGuarded runs a command; when it meets damaged stored ipsets (a member
// that does not decode, found deep in a lookup-table build) it reports
// that instead of crashing.
func runGuarded(fn command, name string, args []string, env Env) (exit int) {
	var corrupt error
	defer func() {
		if corrupt != nil {
			exit = report(env, name, corrupt)
		}
	}()
	defer ipset.RecoverCorrupt(&corrupt)
	return fn(name, args, env)
}

type command func(name string, args []string, env Env) int

// frontEnds are the iptables-compatible commands; they are also the names
// under which the binary acts as that command (multi-call).
var frontEnds = map[string]command{
	"iptables-restore":  runRestore,
	"ip6tables-restore": runRestore,
	"iptables-save":     runSave,
	"ip6tables-save":    runSave,
	"iptables":          runIptables,
	"ip6tables":         runIptables,
}

// alternativeNames maps the names under which Debian's iptables and
// ip6tables alternatives groups link to xfw (as they link to
// iptables-legacy and iptables-nft) to the front end each one is.
var alternativeNames = map[string]string{
	"iptables-xfw":          "iptables",
	"iptables-xfw-restore":  "iptables-restore",
	"iptables-xfw-save":     "iptables-save",
	"ip6tables-xfw":         "ip6tables",
	"ip6tables-xfw-restore": "ip6tables-restore",
	"ip6tables-xfw-save":    "ip6tables-save",
}

// commands are xfw's own commands; files of this package add theirs in an
// init function (the map exists before any init runs).
var commands = map[string]command{}

func init() {
	commands["stop"] = runStop
	commands["log"] = runLog
	commands["version"] = runVersion
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: xfw [--xdp-mode auto|native|generic|veth-generic] COMMAND [ARGS]

iptables-compatible commands (filter table, enforced with eBPF):
  iptables-restore [--noflush] [--test] [--counters] [-w [secs]] [FILE]
  ip6tables-restore …
  iptables-save [-c] [-t filter]
  ip6tables-save …
  iptables …, ip6tables …
  ipset …    ipset 7.17's commands (sets kept in the namespace, or in $XFW_IPSET_FILE)

xfw's own:
  status     what runs where (exit 1 while an interface is not covered)
  sync       take in new interfaces and addresses, put back removed programs
  agent      keep every interface covered, in the foreground (the xfw-agent unit)
  boot-restore  load /etc/xfw/{ipsets,rules.v4,rules.v6} (the xfw-restore unit)
  fastpath   the XDP fast path for FORWARD: its target devices, packets taken and passed (why)
  metrics    print Prometheus metrics once (rule, policy and drop counters, conntrack, sets, attachments)
  stop       remove every xfw program from this network namespace
  takeover   replace another build's programs (the package before an upgrade) with
             this build's, rulesets, counters, sets and connections kept, never unfiltered
  log        print LOG lines as the kernel formats them (--kmsg: also to the kernel log)
  nflog      [-w FILE|-] GROUP: print the NFLOG events of a group as ulogd does, or write them as pcap
  conntrack  list (-L), delete (-D), flush (-F) or count (-C) tracked connections,
             as conntrack-tools' conntrack (-f, -p, -s, -d, --sport, --dport, --state)
  recent     the recent lists, as /proc/net/xt_recent: NAME lists its entries,
             NAME +ADDR / -ADDR / / adds, removes, flushes (NAME - reads that from stdin)
  version    print the version

Linked or copied under the name iptables, ip6tables, iptables-save, ipset, … the
binary acts as that command.
`)
}

func familyOf(name string) ir.Family {
	if strings.HasPrefix(name, "ip6tables") {
		return ir.IPv6
	}
	return ir.IPv4
}

func attachOptions() (dataplane.AttachOptions, error) {
	m := os.Getenv("XFW_XDP_MODE")
	if m == "" {
		return dataplane.AttachOptions{Mode: dataplane.XDPAuto}, nil
	}
	mode, err := dataplane.ParseXDPMode(m)
	return dataplane.AttachOptions{Mode: mode}, err
}

// report prints err as iptables would and returns its exit status.
func report(env Env, prog string, err error) int {
	var ie *iptables.Error
	if errors.As(err, &ie) {
		msg := strings.TrimRight(ie.Msg, "\n")
		if msg != "" {
			fmt.Fprintln(env.Stderr, msg)
		}
		return ie.Status
	}
	fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
	return exitOther
}

func runRestore(name string, args []string, env Env) int {
	fam := familyOf(name)
	var opts iptables.RestoreOptions
	var file string
	wait := waitSpec{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--noflush":
			opts.NoFlush = true
		case a == "-t" || a == "--test":
			opts.Test = true
		case a == "-c" || a == "--counters":
			opts.Counters = true
		case a == "-v" || a == "--verbose":
		case a == "-w" || a == "--wait":
			wait.set = true
			if i+1 < len(args) && isNumber(args[i+1]) {
				i++
				wait.seconds = atoi(args[i])
			}
		case strings.HasPrefix(a, "--wait="):
			wait.set, wait.seconds = true, atoi(strings.TrimPrefix(a, "--wait="))
		case a == "-W" || a == "--wait-interval":
			i++
		case strings.HasPrefix(a, "--wait-interval="):
		case a == "-T" || a == "--table":
			i++
			if i >= len(args) {
				fmt.Fprintf(env.Stderr, "%s: option '%s' requires an argument\n", name, a)
				return exitParameter
			}
			opts.Table = args[i]
		case a == "-h" || a == "--help":
			fmt.Fprintf(env.Stdout, "Usage: %s [-c] [-v] [-V] [-t] [-h] [-n] [-w secs] [-W usecs] [-T table] [-M command] [file]\n", name)
			return exitOK
		case a == "-V" || a == "--version":
			fmt.Fprintf(env.Stdout, "%s v1.8.9 (xfw %s)\n", name, Version)
			return exitOK
		case strings.HasPrefix(a, "-") && a != "-":
			fmt.Fprintf(env.Stderr, "%s: unrecognized option '%s'\n", name, a)
			return exitParameter
		default:
			if file != "" {
				fmt.Fprintf(env.Stderr, "%s: too many arguments\n", name)
				return exitParameter
			}
			file = a
		}
	}
	in := env.Stdin
	if file != "" && file != "-" {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintf(env.Stderr, "%s: Can't open %s: %s\n", name, file, errnoText(err))
			return exitOther
		}
		defer f.Close()
		in = f
	}

	wait.gone = env.Gone
	unlock, err := lock(wait)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer unlock()

	// One view of the sets for the whole command (read under the lock).
	sets := &ipsetLookup{}
	if !opts.Test {
		// A first load's programs load and verify while the input is
		// parsed and compiled.
		dataplane.Preload()
	}
	// The running ruleset is decoded (or taken from the agent's cache)
	// while the input is parsed ahead.
	var running runningRuleset
	// The tables the restore replaces wholesale, and the chains a
	// --noflush restore flushes first, are decoded without their rules
	// (iptables.RestoreSkipping).
	decode := func(skip ir.Skip) (*ir.Ruleset, error) {
		if rules := skip.Rules; rules != nil {
			// The answer may wait for the reader (XFW_TRACE says how long).
			skip.Rules = func(table string) func(string) bool {
				t := time.Now()
				flushed := rules(table)
				dataplane.TraceSince("load: wait for "+table+"'s chain declarations", t)
				return flushed
			}
		}
		var err error
		running, err = runningForRestore(fam, !opts.Test, skip) // --test keeps the entry
		return running.rs, err
	}
	// The agent's cache learns how the restore ended before the lock is
	// released (cmdcache.go).
	var committed *ir.Ruleset
	var index *ir.Encoded
	defer func() { cmdCache.afterRestore(fam, committed, index, committed != nil, opts.Test) }()
	// --test compiles what each COMMIT would produce too: what the data
	// plane cannot enforce is an error now, not at the real load.
	var testErr error
	if opts.Test {
		opts.Tested = func(rs *ir.Ruleset) {
			if testErr == nil {
				testErr = testCompile(rs, sets)
			}
		}
	}
	// Restore flushes the base itself unless --noflush; the base carries
	// the built-in chains' policies and counters either way.
	opts.Sets = sets.lookup
	opts.Warnings = env.Stderr
	tables := &restoreTables{}
	// The agent's cached ruleset is live heap already: the front end's
	// slower collection would let the heap grow five times over it.
	resetPace := func() {}
	if !cmdCache.holds(fam) {
		resetPace = frontEndPace()
	}
	t := time.Now()
	rs, err := iptables.RestoreSkipping(fam, io.TeeReader(in, tables), decode, opts)
	resetPace()
	dataplane.TraceSince("restore: read, decode, parse", t)
	if err != nil {
		return report(env, name, sets.setsErr(err))
	}
	if opts.Test {
		if testErr != nil {
			return report(env, name, testErr)
		}
		return exitOK
	}
	ao, err := attachOptions()
	if err != nil {
		return report(env, name, err)
	}
	// A --noflush restore whose tables' sections hold no line changes
	// nothing, and libiptc commits nothing then: the limit buckets, the
	// nth counters and the policies' counters go on.
	if opts.NoFlush && !tables.changes && tablesRunning(running.rs, tables.names) {
		return exitOK
	}
	// Counters carry over for rules kept by --noflush (as libiptc maps
	// them); a flushing restore starts from zero or from its -c values.
	if index, err = restoreCommit(fam, &running, rs, opts.NoFlush && !opts.Counters, tables.names, ao, sets); err != nil {
		return report(env, name, err)
	}
	committed = rs
	return exitOK
}

// restoreTables collects the tables an iptables-restore input names
// ("*TABLE" lines) as the input passes through it: the tables the restore
// commits.
type restoreTables struct {
	names []string
	// changes is set by a line that is none of "*TABLE", "COMMIT", a
	// comment or blank: a chain, a rule or a command, each of which
	// changes the table for libiptc (a --noflush restore without one
	// commits nothing).
	changes bool
	// midLine is set past a line's first byte.
	midLine bool
	// line holds a "*" line's text while it is read.
	line    []byte
	inTable bool
}

// Write notes every line that starts with "*".
func (t *restoreTables) Write(p []byte) (int, error) {
	n := len(p)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if t.midLine && !t.inTable {
			// The rest of a line that does not start with "*": skip to
			// its end (a restore of kube-proxy's 10,000 services
			// passes 48 MB through here).
			nl := bytes.IndexByte(p[i:], '\n')
			if nl < 0 {
				break
			}
			i += nl
			c = '\n'
		}
		if !t.midLine && !t.changes {
			switch c {
			case '*', '#', 'C', '\n':
			default:
				t.changes = true
			}
		}
		switch {
		case c == '\n':
			if t.inTable {
				name := strings.TrimSpace(string(t.line))
				if name != "" && !slices.Contains(t.names, name) {
					t.names = append(t.names, name)
				}
			}
			t.inTable, t.line, t.midLine = false, t.line[:0], false
			continue
		case !t.midLine && c == '*':
			t.inTable = true
		case t.inTable && len(t.line) < maxTableName:
			t.line = append(t.line, c)
		}
		t.midLine = true
	}
	return n, nil
}

// tablesRunning reports whether running, the running ruleset (nil: none),
// has every table of names, so that a restore naming them and changing
// nothing leaves iptables-save's output as it was.
func tablesRunning(running *ir.Ruleset, names []string) bool {
	if running == nil {
		return false
	}
	for _, name := range names {
		if name != ir.TableFilter && running.TableByName(name) == nil {
			return false
		}
	}
	return true
}

// maxTableName bounds what restoreTables keeps of a "*" line (table names
// are at most XT_TABLE_MAXNAMELEN, 32, bytes).
const maxTableName = 32

func runSave(name string, args []string, env Env) int {
	fam := familyOf(name)
	counters := false
	table := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "--counters":
			counters = true
		case a == "-t" || a == "--table":
			i++
			if i >= len(args) {
				fmt.Fprintf(env.Stderr, "%s: option '%s' requires an argument\n", name, a)
				return exitParameter
			}
			table = args[i]
		case strings.HasPrefix(a, "--table="):
			table = strings.TrimPrefix(a, "--table=")
		case a == "-M" || a == "--modprobe":
			i++
		case a == "-V" || a == "--version":
			fmt.Fprintf(env.Stdout, "%s v1.8.9 (xfw %s)\n", name, Version)
			return exitOK
		case a == "-h" || a == "--help":
			fmt.Fprintf(env.Stdout, "Usage: %s [-c] [-t table] [-M command]\n", name)
			return exitOK
		default:
			fmt.Fprintf(env.Stderr, "%s: unrecognized option '%s'\n", name, a)
			return exitParameter
		}
	}
	if table != "" && !ir.IsTable(table) {
		fmt.Fprintf(env.Stderr, "%s v1.8.9 (legacy): Cannot initialize: Table does not exist (do you need to insmod?)\n", name)
		return exitOther
	}
	rs, err := loadRunning(fam)
	if err != nil {
		return report(env, name, err)
	}
	fmt.Fprint(env.Stdout, iptables.SaveAll(rs, table, counters))
	return exitOK
}

func runStop(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw stop")
		return exitParameter
	}
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer unlock()
	if err := dataplane.Stop(); err != nil {
		fmt.Fprintf(env.Stderr, "xfw stop: %v\n", err)
		return exitOther
	}
	return exitOK
}

func runLog(name string, args []string, env Env) int {
	kmsg := false
	for _, a := range args {
		switch a {
		case "--kmsg":
			kmsg = true
		default:
			fmt.Fprintln(env.Stderr, "usage: xfw log [--kmsg]")
			return exitParameter
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := logd.Run(ctx, env.Stdout, kmsg); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(env.Stderr, "xfw log: %v\n", err)
		return exitOther
	}
	return exitOK
}

func runVersion(name string, args []string, env Env) int {
	fmt.Fprintf(env.Stdout, "xfw %s\n", Version)
	return exitOK
}
