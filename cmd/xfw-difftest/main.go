// Command xfw-difftest is xfw's differential tester: it runs the same
// iptables-save rulesets and the same packets through the kernel's
// iptables-legacy and through an xfw binary, in twin namespace topologies,
// and reports every difference (see docs/difftest.md, and the usage text
// below).
//
// It checks the xfw binary beside it (make build puts both in bin/), or the
// one --xfw names; `xfw difftest ARGS…` runs it with that xfw. It owns only
// the command line: flags, usage, exit statuses and reproduction files. Its
// imports point down, into the test harness (internal/testkit/difftest) and
// internal/ir; it drives xfw as a separate program, and nothing imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
)

// Exit statuses of xfw-difftest.
const (
	exitOK        = 0
	exitDifferent = 1 // the firewalls disagreed
	exitParameter = 2 // bad options (as xfw's PARAMETER_PROBLEM)
	exitNoRun     = 3 // the comparison could not run (tools, root, errors)
)

// xfwProgram is the name of the xfw binary looked for beside xfw-difftest.
const xfwProgram = "xfw"

// Env carries the process's streams, so tests can run the command
// in-process.
type Env struct {
	Stdout, Stderr io.Writer
}

func main() {
	os.Exit(runDifftest(os.Args[1:], Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}

// difftestUsage is xfw-difftest's help.
const difftestUsage = `usage: xfw-difftest [--family 4|6] [--seed N] [--packets N] [--rulesets N] [--sets]
                    [--conntrack [--conversations N] [--skip-stack-errors]] [--nat]
                    [--corpus FILE] [--save-corpus FILE] [--repro-dir DIR]
                    [--no-shrink] [--subnet X] [--xfw PATH] [RULESET-FILE]

Compares xfw with the kernel's iptables-legacy: builds two identical
namespace topologies (gen - fw - sink), loads the same ruleset into each fw
(one with iptables-legacy, one with xfw), sends the same packets through
both and compares, packet by packet, where each went, the replies, the LOG
lines and every rule's counters. Exits 1 on any difference, printing a
minimal reproduction (the rules involved and the packet) and the seed, and
on a run that could not be compared. The documented differences of xfw's
REJECT replies (docs/differences.md, "REJECT replies": e.g. a reply
sent back at once without XDP metadata, which passes no chain) are
reported as KNOWN and do not fail the
run, and only when the firewalls agree on everything with REJECT
replaced by DROP on both sides. So are those of fragments the kernel
reassembles when a rule makes it track connections (docs/differences.md,
"Connection tracking": a lone first fragment it holds, a transport
header split across fragments, the counters of fragmented datagrams),
only when the firewalls agree on everything without the fragmented
probes.

It checks the xfw binary beside it (make build puts both in bin/), or the
one --xfw names; xfw difftest ARGS... runs it with that xfw.

Without RULESET-FILE it checks --rulesets random rulesets (both families
unless --family) generated from --seed (ruleset i uses seed+i), each with
--packets packets aimed at its edges. With RULESET-FILE (iptables-save text,
family --family, default 4) it checks that ruleset with --corpus or with
generated packets.

With --conntrack the random rulesets are stateful (-m conntrack, -m state,
"accept ESTABLISHED,RELATED first"), both sides' connection tables are
flushed before each run, and the packets are --packets independent ones
(no fragments: the kernel reassembles before conntrack) followed by
--conversations conversations: TCP, UDP, ICMP and other flows sent packet
by packet in order, each packet once the previous one has settled, with
ICMP errors quoting them (see internal/testkit/difftest/conversation.go).

With --nat (implies --conntrack) the random rulesets of both families (or
--family's) have a nat table (DNAT, REDIRECT, SNAT, MASQUERADE) before a
small stateful filter table, and the packets are compared as they arrive
translated. A ruleset
file with a nat table is checked the same way.

More in docs/difftest.md.
`

// difftestArgs are xfw-difftest's options.
type difftestArgs struct {
	family     int
	seed       int64
	packets    int
	rulesets   int
	sets       bool
	conntrack  bool
	nat        bool
	convs      int
	skipStack  bool
	corpus     string
	saveCorpus string
	reproDir   string
	noShrink   bool
	subnet     int
	ruleset    string
	xfw        string
}

// parseDifftestArgs parses the options; RULESET-FILE may come anywhere.
func parseDifftestArgs(args []string, stderr io.Writer) (*difftestArgs, error) {
	a := &difftestArgs{seed: time.Now().UnixNano() % 1_000_000, packets: 2000, rulesets: 10}
	fs := flag.NewFlagSet("xfw-difftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, difftestUsage) }
	fs.IntVar(&a.family, "family", 0, "address family, 4 or 6 (default: both for random rulesets, 4 for a file)")
	fs.Int64Var(&a.seed, "seed", a.seed, "seed of the random rulesets and packets")
	fs.IntVar(&a.packets, "packets", a.packets, "packets per ruleset")
	fs.IntVar(&a.rulesets, "rulesets", a.rulesets, "random rulesets per family")
	fs.StringVar(&a.corpus, "corpus", "", "packets to send (a corpus file) instead of generated ones")
	fs.StringVar(&a.saveCorpus, "save-corpus", "", "write the generated packets of the (first) ruleset to this file")
	fs.StringVar(&a.reproDir, "repro-dir", "", "where to write reproductions (default: a new directory under $TMPDIR)")
	fs.BoolVar(&a.noShrink, "no-shrink", false, "report differences without reducing them")
	fs.BoolVar(&a.sets, "sets", false, "random rulesets also use ipsets (-m set; kernel ipset vs xfw ipset)")
	fs.BoolVar(&a.conntrack, "conntrack", false, "stateful: random rulesets use -m conntrack and -m state, and conversations follow the packets")
	fs.BoolVar(&a.nat, "nat", false, "random rulesets with a nat table (implies --conntrack)")
	fs.IntVar(&a.convs, "conversations", 60, "conversations per ruleset (with --conntrack)")
	fs.BoolVar(&a.skipStack, "skip-stack-errors", false, "with --conntrack, leave out packets fw's stack answers with an ICMP error before any chain (an open difference; lets a campaign see past it)")
	fs.IntVar(&a.subnet, "subnet", difftest.DefaultSubnet, "X of the topologies' addresses 10.X.… and fd00:X:… (sessions with different X run side by side; the bundled rulesets name X=42)")
	fs.StringVar(&a.xfw, "xfw", "", "the xfw binary to check (default: "+xfwProgram+" beside xfw-difftest)")
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			if a.ruleset != "" {
				return nil, fmt.Errorf("more than one ruleset file: %s and %s", a.ruleset, args[0])
			}
			a.ruleset, args = args[0], args[1:]
		}
	}
	switch {
	case a.family != 0 && a.family != 4 && a.family != 6:
		return nil, fmt.Errorf("--family must be 4 or 6, not %d", a.family)
	case a.convs < 0:
		return nil, errors.New("--conversations must be at least 0")
	case a.packets < 0 || a.rulesets < 1:
		return nil, errors.New("--packets must be at least 0 and --rulesets at least 1")
	case a.corpus != "" && a.ruleset == "":
		return nil, errors.New("--corpus needs a RULESET-FILE")
	case a.subnet < 1 || a.subnet > 254:
		return nil, fmt.Errorf("--subnet must be 1-254, not %d", a.subnet)
	}
	if a.nat {
		a.conntrack = true
	}
	return a, nil
}

// runDifftest is xfw-difftest: it returns the exit status.
func runDifftest(args []string, env Env) int {
	a, err := parseDifftestArgs(args, env.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw-difftest: %v\n", err)
		fmt.Fprint(env.Stderr, difftestUsage)
		return exitParameter
	}
	xfw, err := findXFW(a.xfw, os.Executable)
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw-difftest: %v\n", err)
		return exitNoRun
	}
	// SIGPIPE too (output piped into head): the run stops and removes its
	// namespaces and `xfw log` children instead of dying with them left.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()

	families := []ir.Family{ir.IPv4, ir.IPv6}
	switch {
	case a.family != 0:
		families = []ir.Family{ir.Family(a.family)}
	case a.ruleset != "":
		families = []ir.Family{ir.IPv4}
	}
	failed, known := false, 0
	for _, fam := range families {
		bad, k, err := difftestFamily(ctx, a, fam, xfw, env)
		known += k
		if err != nil {
			fmt.Fprintf(env.Stderr, "xfw-difftest: %v\n", err)
			return exitNoRun
		}
		failed = failed || bad
	}
	if failed {
		fmt.Fprintf(env.Stdout, "xfw-difftest: DIFFERENCES FOUND (seed %d)\n", a.seed)
		return exitDifferent
	}
	if known > 0 {
		fmt.Fprintf(env.Stdout, "xfw-difftest: no difference but the known ones of xfw's REJECT replies, in %d rulesets (seed %d)\n", known, a.seed)
		return exitOK
	}
	fmt.Fprintf(env.Stdout, "xfw-difftest: no difference (seed %d)\n", a.seed)
	return exitOK
}

// difftestFamily checks the cases of one family in one session; it reports
// whether any differed, and how many differed only in the known ways.
func difftestFamily(ctx context.Context, a *difftestArgs, fam ir.Family, xfw string, env Env) (failed bool, known int, err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(env.Stderr, "xfw-difftest: "+format+"\n", args...) }
	cfg := difftest.Config{Family: fam, XFW: xfw, XDPMode: os.Getenv("XFW_XDP_MODE"), Logf: logf, Subnet: uint8(a.subnet), Conntrack: a.conntrack}
	if os.Getenv("XFW_DIFFTEST_DEBUG") != "" {
		// Every observation of every run, attributed or not.
		cfg.Debug = logf
	}
	s, err := difftest.NewSession(ctx, cfg)
	if err != nil {
		return false, 0, err
	}
	defer func() {
		if err := s.Close(); err != nil {
			logf("cleanup: %v", err)
		}
	}()
	n := a.rulesets
	if a.ruleset != "" {
		n = 1
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return failed, known, ctx.Err()
		}
		c, err := difftestCase(a, fam, int64(i), s.Plan())
		if err != nil {
			return failed, known, err
		}
		if i == 0 && a.saveCorpus != "" {
			if err := writeCorpus(a.saveCorpus, c.Corpus); err != nil {
				return failed, known, err
			}
		}
		o, err := s.Check(ctx, c, difftest.CheckOptions{Shrink: !a.noShrink})
		if err != nil {
			return failed, known, err
		}
		fmt.Fprint(env.Stdout, o.Report())
		switch {
		case o.Result.Rejected != "" || o.Result.Lossy != "":
			// Not compared: a generator bug, or frames lost even slowly.
			failed = true
			continue
		case !o.Failed():
			continue
		case o.OnlyKnown():
			// Documented differences of xfw's REJECT replies
			// (docs/differences.md), reported above.
			known++
			continue
		}
		failed = true
		if dir, err := writeRepro(a, fam, o); err != nil {
			logf("writing the reproduction: %v", err)
		} else if dir != "" {
			fmt.Fprintf(env.Stdout, "  reproduction written to %s: xfw-difftest --family %d %s --corpus %s\n",
				dir, fam, filepath.Join(dir, "rules"), filepath.Join(dir, "corpus"))
		}
	}
	return failed, known, nil
}

// difftestCase builds case i: the ruleset file, or random ruleset seed+i.
func difftestCase(a *difftestArgs, fam ir.Family, i int64, plan difftest.Plan) (difftest.Case, error) {
	seed := a.seed + i
	c := difftest.Case{}
	if a.ruleset != "" {
		b, err := os.ReadFile(a.ruleset)
		if err != nil {
			return c, fmt.Errorf("read ruleset: %w", err)
		}
		c.Name, c.Ruleset = a.ruleset, string(b)
		c.Rerun = fmt.Sprintf("xfw-difftest --family %d --seed %d --packets %d %s", fam, seed, a.packets, a.ruleset)
	} else {
		c.Name = fmt.Sprintf("random %s ruleset, seed %d", fam, seed)
		c.Ruleset = difftest.GenerateRuleset(seed, plan, difftest.GenOptions{Sets: a.sets, Conntrack: a.conntrack})
		c.Rerun = fmt.Sprintf("xfw-difftest --family %d --seed %d --rulesets 1 --packets %d", fam, seed, a.packets)
		if a.nat {
			c.Name = fmt.Sprintf("random %s nat ruleset, seed %d", fam, seed)
			c.Ruleset = difftest.GenerateNATRuleset(seed, plan)
			c.Rerun += " --nat"
		}
		if a.sets {
			c.Name += " with sets"
			c.Rerun += " --sets"
		}
	}
	stateful := a.conntrack || difftest.HasNATTable(c.Ruleset)
	if stateful {
		c.Name += " (stateful)"
		c.Rerun += fmt.Sprintf(" --conntrack --conversations %d", a.convs)
		if a.skipStack {
			c.Rerun += " --skip-stack-errors"
		}
	}
	if a.corpus != "" {
		f, err := os.Open(a.corpus)
		if err != nil {
			return c, fmt.Errorf("read corpus: %w", err)
		}
		defer f.Close()
		if c.Corpus, err = difftest.ParseCorpus(f); err != nil {
			return c, err
		}
		c.Rerun += " --corpus " + a.corpus
		return c, nil
	}
	var corpus *difftest.Corpus
	var err error
	if stateful {
		corpus, err = difftest.GenerateStatefulCorpus(seed, plan, c.Ruleset, difftest.StatefulOptions{Probes: a.packets, Conversations: a.convs, SkipStackErrors: a.skipStack})
	} else {
		corpus, err = difftest.GenerateCorpus(seed, plan, c.Ruleset, a.packets)
	}
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Name, err)
	}
	c.Corpus = corpus
	return c, nil
}

// writeCorpus writes a corpus file.
func writeCorpus(path string, c *difftest.Corpus) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write corpus: %w", err)
	}
	if err := c.Format(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeRepro writes the reduced ruleset and packets of a failed case into
// a directory, and returns it ("" when there is nothing reduced).
func writeRepro(a *difftestArgs, fam ir.Family, o *difftest.Outcome) (string, error) {
	if o.Repro == nil {
		return "", nil
	}
	dir := a.reproDir
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", fmt.Sprintf("xfw-difftest-ipv%d-", fam))
	} else {
		dir = filepath.Join(dir, strings.NewReplacer(" ", "-", ",", "", "/", "_").Replace(o.Case.Name))
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("repro directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules"), []byte(o.Repro.Ruleset), 0o644); err != nil {
		return "", fmt.Errorf("write rules: %w", err)
	}
	return dir, writeCorpus(filepath.Join(dir, "corpus"), o.Repro.Corpus)
}

// findXFW returns the absolute path of the xfw binary to check: the one
// flagPath names, else xfwProgram beside this program's own binary
// (executable says where that is).
func findXFW(flagPath string, executable func() (string, error)) (string, error) {
	if flagPath != "" {
		p, err := filepath.Abs(flagPath)
		if err != nil {
			return "", fmt.Errorf("--xfw %s: %w", flagPath, err)
		}
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("--xfw %s: not an executable xfw binary: %w", flagPath, err)
		}
		return p, nil
	}
	self, err := executable()
	if err != nil {
		return "", fmt.Errorf("find xfw-difftest's own binary: %w", err)
	}
	p := filepath.Join(filepath.Dir(self), xfwProgram)
	if _, err := exec.LookPath(p); err != nil {
		return "", fmt.Errorf("no xfw binary beside xfw-difftest (%w): build both (make build) or name it with --xfw PATH", err)
	}
	return p, nil
}
