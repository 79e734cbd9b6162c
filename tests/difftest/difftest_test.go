// Package difftest_test runs xfw's differential oracle (internal/testkit/difftest)
// as a test: random rulesets and the realistic ones through the kernel's
// iptables-legacy and through xfw, in twin namespace topologies, packet by
// packet. It needs root, iproute2, ethtool and iptables-legacy, and the
// binaries `make build` makes, bin/xfw and bin/xfw-difftest (which the
// Rerun lines of its reports name); it fails, never skips, without them.
//
// The budget is bounded (a few minutes on two cores); DIFFTEST_SEED,
// DIFFTEST_COUNT (random rulesets per family), DIFFTEST_PACKETS (per random
// ruleset) and DIFFTEST_REALISTIC_PACKETS change it, and
// `make difftest SEED=… COUNT=…` runs a long campaign with the
// xfw-difftest program.
package difftest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
)

// Defaults of the bounded budget.
const (
	defaultSeed    = 1
	defaultCount   = 10 // random rulesets per family: 20 in all
	defaultPackets = 2000
	// realisticPackets is the packets per realistic ruleset (16 of them,
	// REJECT-heavy: three runs each when only known differences show).
	realisticPackets = 1000
	// realisticConversations is the conversations per realistic
	// ruleset that uses connection tracking.
	realisticConversations = 40
	// caseTimeout bounds one case, shrinking included.
	caseTimeout = 2 * time.Minute
)

// envInt reads an integer environment variable, or returns def.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// repoRoot returns the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// xfwPath returns the xfw binary built by `make build`, after checking
// that xfw-difftest, which reproduces a reported case, is beside it.
func xfwPath(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "bin")
	for _, name := range []string{"xfw-difftest", "xfw"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s binary missing (%v): run `make build` (make test does)", name, err)
		}
	}
	return filepath.Join(bin, "xfw")
}

// eachFamily runs fn for IPv4 and for IPv6, each in a subtest of its
// own: a session holds the host's lock until its test ends, so each
// family's session must end with its subtest.
func eachFamily(t *testing.T, fn func(*testing.T, ir.Family)) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		t.Run(fam.String(), func(t *testing.T) { fn(t, fam) })
	}
}

// session opens a session of family fam for the test; it is closed (and
// its namespaces removed) when the test ends, failed or not.
func session(t *testing.T, fam ir.Family, tune ...func(*difftest.Config)) *difftest.Session {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the differential test needs root (network namespaces, iptables-legacy, XDP): run it as root, as make test does")
	}
	cfg := difftest.Config{Family: fam, XFW: xfwPath(t), Logf: t.Logf}
	for _, f := range tune {
		f(&cfg)
	}
	s, err := difftest.NewSession(context.Background(), cfg)
	if err != nil {
		t.Fatalf("difftest session: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the session: %v", err)
		}
	})
	return s
}

// check runs a case and fails the test with the report (and the minimal
// reproduction) when the firewalls disagree, or when the case could not be
// compared.
func check(t *testing.T, s *difftest.Session, c difftest.Case) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	start := time.Now()
	// Documented REJECT differences are not reduced (a few dozen runs
	// each); everything else is, but for conversations: a run waits for
	// each of their steps, and reducing takes dozens of runs (the report
	// names each differing probe with its conversation and step).
	shrink := true
	for _, p := range c.Corpus.Probes {
		if p.Step > 0 {
			shrink = false
			break
		}
	}
	o, err := s.Check(ctx, c, difftest.CheckOptions{Shrink: shrink})
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	r := o.Result
	switch {
	case r.Rejected != "":
		t.Errorf("%s: both firewalls refused the ruleset (a generator or test data bug):\n%s\n%s", c.Name, r.Rejected, c.Ruleset)
	case r.Lossy != "":
		t.Errorf("%s: inconclusive even after slower retries: %s", c.Name, r.Lossy)
	case o.OnlyKnown():
		// The documented differences of xfw's REJECT replies
		// (docs/differences.md; internal/testkit/difftest/known.go says
		// exactly which): the firewalls agree on everything with REJECT
		// replaced by DROP on both sides, and each remaining difference is
		// one of those. Reported in full, not hidden.
		t.Logf("%s(%v)", o.Report(), time.Since(start).Round(time.Millisecond))
	case o.Failed():
		t.Errorf("%s\nruleset:\n%s", o.Report(), c.Ruleset)
	default:
		t.Logf("%s(%v)", o.Report(), time.Since(start).Round(time.Millisecond))
	}
}

// TestRandomRulesets compares random rulesets (every match, target and
// chain structure xfw supports) with packets aimed at their edges, both
// families.
func TestRandomRulesets(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed)
	count := envInt(t, "DIFFTEST_COUNT", defaultCount)
	runRandom(t, seed, count, difftest.GenOptions{})
}

// setRulesets is how many random rulesets with ipsets per family the
// bounded run checks (their seeds follow the plain ones').
const setRulesets = 3

// TestRandomRulesetsWithSets compares random rulesets that also use
// ipsets (-m set on a hash:net with nomatch entries and a hash:ip, loaded
// into the kernel's ipset and xfw's), both families.
func TestRandomRulesetsWithSets(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed) + envInt(t, "DIFFTEST_COUNT", defaultCount)
	runRandom(t, seed, setRulesets, difftest.GenOptions{Sets: true})
}

// appendRulesets is how many random rulesets per family the bounded run
// loads into xfw with their base chains' last appendTail rules appended
// one by one (the in-place path, compiler.AppendRule), seeds after the
// ones with sets.
const (
	appendRulesets = 3
	appendTail     = 10
)

// TestRandomRulesetsAppended compares random rulesets that xfw loads
// partly by `iptables -A` and `-D` (each base chain's last rules appended
// twice, the first copies deleted, in place in the running generation)
// with the kernel's restore of the whole.
func TestRandomRulesetsAppended(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed) + envInt(t, "DIFFTEST_COUNT", defaultCount) + setRulesets
	runRandom(t, seed, appendRulesets, difftest.GenOptions{}, func(c *difftest.Config) { c.AppendTail = appendTail })
}

// Stateful random rulesets per family the bounded run checks (seeds
// after the appended ones), with statefulPackets independent probes and
// statefulConversations conversations each (DIFFTEST_STATEFUL_COUNT,
// DIFFTEST_STATEFUL_PACKETS and DIFFTEST_CONVERSATIONS change them).
const (
	statefulRulesets      = 3
	statefulPackets       = 400
	statefulConversations = 60
)

// TestRandomRulesetsStateful compares stateful random rulesets (-m
// conntrack with --ctstate, --ctstatus, --ctproto and --ctdir, -m state,
// "accept ESTABLISHED,RELATED first") against the kernel's nf_conntrack,
// with independent probes and then conversations: TCP, UDP, ICMP and other
// flows packet by packet, each packet once the one before has settled, and
// ICMP errors quoting them. Both sides' connection tables are flushed
// before each run.
func TestRandomRulesetsStateful(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed) + envInt(t, "DIFFTEST_COUNT", defaultCount) + setRulesets + appendRulesets
	count := envInt(t, "DIFFTEST_STATEFUL_COUNT", statefulRulesets)
	runRandom(t, seed, count, difftest.GenOptions{Conntrack: true}, func(c *difftest.Config) { c.Conntrack = true })
}

// runRandom checks count random rulesets per family from seed on.
func runRandom(t *testing.T, seed, count int64, opts difftest.GenOptions, tune ...func(*difftest.Config)) {
	packets := int(envInt(t, "DIFFTEST_PACKETS", defaultPackets))
	convs := 0
	what, flag := "", ""
	if opts.Sets {
		what, flag = " with sets", " --sets"
	}
	if opts.Conntrack {
		packets = int(envInt(t, "DIFFTEST_STATEFUL_PACKETS", statefulPackets))
		convs = int(envInt(t, "DIFFTEST_CONVERSATIONS", statefulConversations))
		what += " (stateful)"
		flag += fmt.Sprintf(" --conntrack --conversations %d", convs)
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			s := session(t, fam, tune...)
			for i := int64(0); i < count; i++ {
				sd := seed + i
				text := difftest.GenerateRuleset(sd, s.Plan(), opts)
				if opts.Sets && len(difftest.SetLines(text)) == 0 {
					t.Fatalf("seed %d: the ruleset carries no sets:\n%s", sd, text)
				}
				var corpus *difftest.Corpus
				var err error
				if opts.Conntrack {
					corpus, err = difftest.GenerateStatefulCorpus(sd, s.Plan(), text, difftest.StatefulOptions{Probes: packets, Conversations: convs})
				} else {
					corpus, err = difftest.GenerateCorpus(sd, s.Plan(), text, packets)
				}
				if err != nil {
					t.Fatalf("seed %d: %v\n%s", sd, err, text)
				}
				check(t, s, difftest.Case{
					Name: fmt.Sprintf("random %s ruleset%s, seed %d", fam, what, sd), Ruleset: text, Corpus: corpus,
					Rerun: fmt.Sprintf("bin/xfw-difftest --family %d --seed %d --rulesets 1 --packets %d%s", fam, sd, packets, flag),
				})
			}
			if rules, inPlace := s.Appended(); rules > 0 {
				t.Logf("%d iptables -I, -A and -D commands, %d of them done in place", rules, inPlace)
				if inPlace == 0 {
					t.Errorf("none of the %d -I, -A and -D commands took the in-place path", rules)
				}
			}
		})
	}
}

// TestRealisticRulesets compares the hand-written rulesets of
// internal/testkit/difftest/testdata and the filter tables of the conformance
// suite's iptables-save dumps.
func TestRealisticRulesets(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed)
	packets := int(envInt(t, "DIFFTEST_REALISTIC_PACKETS", realisticPackets))
	sets, err := difftest.Realistic()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := difftest.DumpsDir(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	dumps, skipped, err := difftest.Dumps(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skipped {
		t.Logf("dumps/%s skipped: %s", s.Name, s.Reason)
	}
	sets = append(sets, dumps...)
	// Rulesets with a nat table last: the kernel keeps a nat table once
	// made (emptied, not removed, for the next ruleset), and xfw tracks
	// connections while one exists, so a ruleset after them would run
	// stateful in both.
	slices.SortStableFunc(sets, func(a, b difftest.Named) int {
		return btoi(difftest.HasNATTable(a.Text)) - btoi(difftest.HasNATTable(b.Text))
	})
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			// Dumps with -m conntrack or -m state: both connection
			// tables flushed before each run, and conversations after
			// the independent probes.
			s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
			for _, n := range sets {
				if n.Family != fam {
					continue
				}
				var corpus *difftest.Corpus
				var err error
				if difftest.Stateful(n.Text) {
					corpus, err = difftest.GenerateStatefulCorpus(seed, s.Plan(), n.Text,
						difftest.StatefulOptions{Probes: packets, Conversations: realisticConversations})
				} else {
					corpus, err = difftest.GenerateCorpus(seed, s.Plan(), n.Text, packets)
				}
				if err != nil {
					t.Errorf("%s: %v", n.Name, err)
					continue
				}
				check(t, s, difftest.Case{Name: n.Name, Ruleset: n.Text, Corpus: corpus})
			}
		})
	}
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
