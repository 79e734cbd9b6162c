package iptables

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// restoreOutcome is everything a restore's caller can observe.
type restoreOutcome struct {
	saved, output, err string
	status             int
	tested             []string
	setLookups         []string
}

// restoreObserved runs a restore of input on a fresh base with parsers
// goroutines parsing ahead, the input read through wrap.
func restoreObserved(t *testing.T, input string, opts RestoreOptions, parsers int, wrap func(io.Reader) io.Reader) restoreOutcome {
	t.Helper()
	var out restoreOutcome
	var output strings.Builder
	opts.Output = &output
	opts.Sets = func(name string) (SetInfo, bool) {
		out.setLookups = append(out.setLookups, name)
		if name == "s1" {
			return SetInfo{Family: ir.IPv4, Dims: 1, Type: "hash:ip"}, true
		}
		return SetInfo{}, false
	}
	if opts.Test {
		opts.Tested = func(rs *ir.Ruleset) { out.tested = append(out.tested, savedRules(rs)) }
	}
	base := ir.NewRuleset(ir.IPv4)
	if err := run(t, base, "-N old", "-A INPUT -j old", "-A old -s 10.9.9.9 -j ACCEPT"); err != nil {
		t.Fatal(err)
	}
	rs, err := restoreWith(ir.IPv4, wrap(strings.NewReader(input)), func(func(string) bool) (*ir.Ruleset, error) { return base, nil }, opts, parsers)
	out.saved, out.output = savedRules(rs), output.String()
	if err != nil {
		out.err, out.status = err.Error(), -1
		var e *Error
		if errors.As(err, &e) {
			out.status = e.Status
		}
	}
	return out
}

// restoreCommonLines are valid in every table once its blocks have
// declared KUBE-SVC-X and KUBE-SEP-A.
var restoreCommonLines = []string{
	"-A OUTPUT -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j ACCEPT\n",
	"-A OUTPUT -d 10.96.0.1/32 -p tcp -m comment --comment \"default/kubernetes:https cluster IP\" -m tcp --dport 443 -j KUBE-SVC-X\n",
	"-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A\n",
	"-A KUBE-SVC-X -j RETURN\n",
	"-A KUBE-SEP-A -s 10.244.0.5/32 -j ACCEPT\n",
	"-A OUTPUT ! -s 1.1.1.1 -p udp --sport 53 -j ACCEPT\n",
	"-A OUTPUT -m set --match-set s1 src -j ACCEPT\n",
	"[5:6] -A OUTPUT -p tcp --dport 8080 -j ACCEPT\n",
	"# a comment\n",
	"\n",
}

// savedRules is iptables-save's output of rs with counters, without its
// comment lines (they hold the time).
func savedRules(rs *ir.Ruleset) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(SaveAll(rs, "", true), "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// restoreLinePool are the lines random restore inputs are made of: valid
// and invalid commands, chain and table lines, comments and oddities.
var restoreLinePool = []string{
	"-A INPUT -s 10.0.0.1/32 -p tcp -m tcp --dport 80 -j ACCEPT\n",
	"-A INPUT -d 10.96.0.1/32 -p tcp -m comment --comment \"default/kubernetes:https cluster IP\" -m tcp --dport 443 -j KUBE-SVC-X\n",
	"-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A\n",
	"-A KUBE-SVC-X -j KUBE-SEP-B\n",
	"-A KUBE-SEP-A -s 10.244.0.5/32 -j MARK --set-xmark 0x4000/0x4000\n",
	"-A KUBE-SEP-B -p tcp -j DNAT --to-destination 10.244.1.7:8443\n",
	"-A PREROUTING -j DNAT --to-destination 10.1.1.1:80\n",
	"-A POSTROUTING -j MASQUERADE --random-fully\n",
	"-A old -j RETURN\n",
	"-A INPUT -j old\n",
	"-A INPUT -j NOSUCH\n",
	"-A INPUT -m set --match-set s1 src -j DROP\n",
	"-A INPUT -m set --match-set nosuch src -j DROP\n",
	"-A INPUT --bogus-option\n",
	"-A INPUT ! -s 1.1.1.1 -p udp --sport 53 -j ACCEPT\n",
	"-A INPUT -s 1.2.3.4\x00 ignored after the NUL\n",
	"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n",
	"[5:6] -A INPUT -j ACCEPT\n",
	"[5 -A INPUT -j ACCEPT\n",
	"-I INPUT -j DROP\n",
	"-D INPUT 1\n",
	"-D INPUT 99\n",
	"-N KUBE-SVC-X\n",
	"-N KUBE-SEP-A\n",
	"-X KUBE-SEP-B\n",
	"-E old renamed\n",
	"-F\n",
	"-Z\n",
	"-P INPUT DROP\n",
	"-P INPUT BOGUS\n",
	"-S INPUT\n",
	"-h\n",
	"-t nat -A INPUT -j ACCEPT\n",
	"-A INPUT -s not-an-address -j ACCEPT\n",
	":KUBE-SVC-X - [0:0]\n",
	":KUBE-SEP-A - [0:0]\n",
	":KUBE-SEP-B - [0:0]\n",
	":old - [0:0]\n",
	":INPUT ACCEPT [1:2]\n",
	":FORWARD DROP\n",
	":INPUT BOGUS [0:0]\n",
	"# a comment\n",
	"\n",
	"\x00-A INPUT -j ACCEPT\n",
	"COMMIT\n",
	"*filter\n",
	"*nat\n",
	"*mangle\n",
	"*raw\n",
	"*nosuchtable\n",
	"*\n",
	"garbage outside a table\n",
}

// randomRestoreInput returns an input of table blocks made mostly of the
// pool's valid lines (so most inputs get far), with invalid lines at
// random places.
func randomRestoreInput(rng *rand.Rand) string {
	var b strings.Builder
	tables := []string{"*filter\n", "*nat\n", "*mangle\n", "*raw\n"}
	for range 1 + rng.Intn(4) {
		b.WriteString(tables[rng.Intn(len(tables))])
		b.WriteString(":KUBE-SVC-X - [0:0]\n:KUBE-SEP-A - [0:0]\n")
		lines := rng.Intn(600)
		if rng.Intn(4) == 0 {
			lines = 2000 + rng.Intn(2000) // many batches
		}
		for range lines {
			if rng.Intn(800) == 0 {
				b.WriteString(restoreLinePool[rng.Intn(len(restoreLinePool))])
			} else {
				b.WriteString(restoreCommonLines[rng.Intn(len(restoreCommonLines))])
			}
		}
		if rng.Intn(10) != 0 {
			b.WriteString("COMMIT\n")
		}
	}
	if rng.Intn(8) == 0 {
		b.WriteString("-A INPUT -j ACCEPT") // no newline at the end
	}
	return b.String()
}

// TestRestoreReadAheadSameOutcome checks that parsing command lines ahead
// (readahead.go) changes nothing a caller observes: random inputs restored
// with 1, 2 and 4 parsers and input read whole, byte by byte or in halves
// give the ruleset, error, exit status, output, --test rulesets and set
// lookups (in order) of parsing each line in its turn.
func TestRestoreReadAheadSameOutcome(t *testing.T) {
	whole := func(r io.Reader) io.Reader { return r }
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{{"whole", whole}, {"bytes", iotest.OneByteReader}, {"halves", iotest.HalfReader}}
	optsOf := []RestoreOptions{{}, {NoFlush: true}, {Counters: true}, {Table: "nat"}, {Test: true}, {NoFlush: true, Test: true}}
	seeds := 60
	if testing.Short() {
		seeds = 12
	}
	for seed := range seeds {
		rng := rand.New(rand.NewSource(int64(seed)))
		input := randomRestoreInput(rng)
		opts := optsOf[seed%len(optsOf)]
		want := restoreObserved(t, input, opts, 0, whole)
		for _, parsers := range []int{1, 2, 4} {
			rd := readers[(seed+parsers)%len(readers)]
			if rd.name == "bytes" && len(input) > 20000 {
				rd = readers[2]
			}
			t.Run(fmt.Sprintf("seed%d/%d-parsers/%s", seed, parsers, rd.name), func(t *testing.T) {
				got := restoreObserved(t, input, opts, parsers, rd.wrap)
				if got.err != want.err || got.status != want.status {
					t.Errorf("error %q (status %d), parsing in turn %q (%d)", got.err, got.status, want.err, want.status)
				}
				if got.saved != want.saved {
					t.Errorf("ruleset differs from parsing in turn:\n%s\nwant\n%s", got.saved, want.saved)
				}
				if got.output != want.output || strings.Join(got.tested, "\n") != strings.Join(want.tested, "\n") {
					t.Errorf("output or --test rulesets differ from parsing in turn")
				}
				if strings.Join(got.setLookups, ",") != strings.Join(want.setLookups, ",") {
					t.Errorf("set lookups %v, parsing in turn %v", got.setLookups, want.setLookups)
				}
			})
		}
	}
}

// TestRestoreReadAheadOutcomes checks that the random inputs of
// TestRestoreReadAheadSameOutcome reach both successes and failures at
// many different lines (the comparison would prove little otherwise).
func TestRestoreReadAheadOutcomes(t *testing.T) {
	ok, failedLines := 0, map[string]bool{}
	for seed := range 60 {
		rng := rand.New(rand.NewSource(int64(seed)))
		out := restoreObserved(t, randomRestoreInput(rng), RestoreOptions{}, 2, func(r io.Reader) io.Reader { return r })
		if out.err == "" {
			ok++
		} else {
			failedLines[out.err] = true
		}
	}
	if ok < 3 || len(failedLines) < 10 {
		t.Errorf("%d successes and %d distinct errors in 60 inputs, want at least 3 and 10", ok, len(failedLines))
	}
}

// TestRestoreReadAheadStopsOnError checks that a restore failing early
// returns without waiting for the rest of an input that is still open.
func TestRestoreReadAheadStopsOnError(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// The failing line; the writer then keeps the input open.
		_, _ = io.WriteString(pw, "*filter\n-A INPUT --bogus\n")
	}()
	_, err := restoreWith(ir.IPv4, pr, func(func(string) bool) (*ir.Ruleset, error) { return nil, nil }, RestoreOptions{}, 2)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusParameter {
		t.Fatalf("error %v, want a parameter problem", err)
	}
}

// TestRestoreOntoBase checks RestoreOnto's base: called once, its rules
// kept under --noflush, its error returned as it is.
func TestRestoreOntoBase(t *testing.T) {
	calls := 0
	base := func() (*ir.Ruleset, error) {
		calls++
		rs := ir.NewRuleset(ir.IPv4)
		if err := run(t, rs, "-A INPUT -s 10.1.1.1 -j ACCEPT"); err != nil {
			return nil, err
		}
		return rs, nil
	}
	rs, err := RestoreOnto(ir.IPv4, strings.NewReader("*filter\n-A INPUT -j DROP\nCOMMIT\n"), base, RestoreOptions{NoFlush: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := savedRules(rs); calls != 1 || !strings.Contains(got, "-A INPUT -s 10.1.1.1/32 -j ACCEPT\n[0:0] -A INPUT -j DROP\n") {
		t.Errorf("%d calls of base, ruleset\n%s", calls, got)
	}
	unreadable := errors.New("running ruleset unreadable")
	_, err = RestoreOnto(ir.IPv4, strings.NewReader("*filter\n-A INPUT --bogus\nCOMMIT\n"), func() (*ir.Ruleset, error) { return nil, unreadable }, RestoreOptions{})
	if !errors.Is(err, unreadable) {
		t.Errorf("error %v, want base's", err)
	}
}

// linesAtATime returns up to linesPerRead lines of its input per Read,
// counting the lines read: how far a restore has read ahead.
type linesAtATime struct {
	lines []string
	part  string
	read  atomic.Int64
}

// linesPerRead is how many lines a linesAtATime Read returns: the reader
// ends a batch where the buffered lines end, so each batch is 64 lines.
const linesPerRead = 64

// Read returns (the rest of) the next linesPerRead lines.
func (l *linesAtATime) Read(p []byte) (int, error) {
	if l.part == "" {
		i := int(l.read.Load())
		if i >= len(l.lines) {
			return 0, io.EOF
		}
		j := min(i+linesPerRead, len(l.lines))
		l.part = strings.Join(l.lines[i:j], "")
		l.read.Store(int64(j))
	}
	n := copy(p, l.part)
	l.part = l.part[n:]
	return n, nil
}

// TestRestoreReadsAheadDuringBase checks that the input is read and
// parsed further ahead than aheadBatches while the base ruleset loads:
// base waits until 9,000 of 10,000 lines were read (with aheadBatches
// alone, batches of 64 lines here, the reader stopped at about 1,200
// until base returned).
func TestRestoreReadsAheadDuringBase(t *testing.T) {
	const rules = 10000
	in := &linesAtATime{lines: []string{"*filter\n"}}
	for i := range rules {
		in.lines = append(in.lines, fmt.Sprintf("-A INPUT -s 10.%d.%d.1 -j ACCEPT\n", i/256, i%256))
	}
	in.lines = append(in.lines, "COMMIT\n")
	base := func(func(string) bool) (*ir.Ruleset, error) {
		for deadline := time.Now().Add(10 * time.Second); in.read.Load() < 9000; {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%d lines read ahead while the base loads, want 9000 or more", in.read.Load())
			}
			time.Sleep(time.Millisecond)
		}
		return nil, nil
	}
	rs, err := restoreWith(ir.IPv4, in, base, RestoreOptions{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rs.Chain("INPUT").Rules); n != rules {
		t.Errorf("%d rules in INPUT, want %d", n, rules)
	}
}

// TestAheadRoomNarrow checks that narrow brings the tokens in circulation
// down to aheadBatches, whether the reader had taken few or most.
func TestAheadRoomNarrow(t *testing.T) {
	for _, taken := range []int{0, 3, aheadBatches, 1000, startAheadBatches} {
		a := newAheadRoom()
		for range taken {
			if !a.take(nil) {
				t.Fatal("no token")
			}
		}
		a.narrow()
		for range taken {
			a.release()
		}
		if got := len(a.tokens); got != aheadBatches || a.owed != 0 {
			t.Errorf("%d taken: %d tokens, %d owed after narrow and release, want %d and 0", taken, got, a.owed, aheadBatches)
		}
	}
}

// TestRestoreReplacingTables checks what RestoreReplacing tells its base:
// the tables the input flushes (named in its first lines), not a table it
// does not name, none with --noflush or --test, only -T's table with -T,
// none without parsing ahead; and that a restore replacing a table the
// base returned without rules gives the same ruleset as one onto the
// full base.
func TestRestoreReplacingTables(t *testing.T) {
	const input = "*filter\n-A INPUT -j DROP\nCOMMIT\n*nat\n-A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1\nCOMMIT\n"
	full, err := Restore(ir.IPv4, strings.NewReader("*filter\n-A OUTPUT -j ACCEPT\nCOMMIT\n*nat\n-A OUTPUT -j RETURN\nCOMMIT\n*mangle\n-A OUTPUT -j MARK --set-mark 1\nCOMMIT\n"), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		opts    RestoreOptions
		parsers int
		want    string
	}{
		{"flush", RestoreOptions{}, 2, "filter nat"},
		{"noflush", RestoreOptions{NoFlush: true}, 2, ""},
		{"test", RestoreOptions{Test: true}, 2, ""},
		{"table nat", RestoreOptions{Table: "nat"}, 2, "nat"},
		{"no parsing ahead", RestoreOptions{}, 0, ""},
	}
	for _, c := range cases {
		var got []string
		base := func(replaced func(string) bool) (*ir.Ruleset, error) {
			rs := full.CloneChains()
			for _, table := range []string{ir.TableFilter, ir.TableNat, ir.TableMangle} {
				if replaced(table) {
					got = append(got, table)
					for _, ch := range rs.TableByName(table).Chains {
						ch.Rules = nil
					}
				}
			}
			return rs, nil
		}
		rs, err := restoreWith(ir.IPv4, strings.NewReader(input), base, c.opts, c.parsers)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: replaced %q, want %q", c.name, got, c.want)
		}
		want, err := restoreWith(ir.IPv4, strings.NewReader(input), func(func(string) bool) (*ir.Ruleset, error) { return full, nil }, c.opts, c.parsers)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := saveNoStamp(rs), saveNoStamp(want); a != b {
			t.Errorf("%s: saved\n%s\nwant\n%s", c.name, a, b)
		}
	}
}

// saveNoStamp is SaveAll's output of every table without its comments.
func saveNoStamp(rs *ir.Ruleset) string {
	var out []string
	for _, l := range strings.SplitAfter(SaveAll(rs, "", true), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
