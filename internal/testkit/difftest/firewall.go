package difftest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file drives a side's firewall: loading rulesets and ipsets (the
// kernel's iptables-legacy and ipset, or xfw's), zeroing and saving
// counters, flushing connection tables, and xfw's LOG reader.

// firewallCmd returns the command running what (-restore, -save) of this
// side's firewall.
func (s *Session) firewallCmd(sd *side, what string) []string {
	prefix := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prefix = "ip6tables"
	}
	if sd.kernel {
		return []string{prefix + "-legacy" + what}
	}
	argv := []string{s.cfg.XFW}
	if s.cfg.XDPMode != "" {
		argv = append(argv, "--xdp-mode", s.cfg.XDPMode)
	}
	return append(argv, prefix+what)
}

// ipsetCmd returns the command running ipset on this side: the kernel's,
// or xfw's.
func (s *Session) ipsetCmd(sd *side) []string {
	if sd.kernel {
		return []string{"ipset"}
	}
	return []string{s.cfg.XFW, "ipset"}
}

// emptyFilter is a filter table without rules, all policies ACCEPT.
const emptyFilter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"

// loadSets replaces a side's ipsets with the ones text carries (SetLines):
// the rules are emptied first (a set rules use cannot be destroyed), then
// every set flushed (emptying the list:sets) and destroyed, and the new
// ones restored.
func (s *Session) loadSets(sd *side, text string) error {
	lines := SetLines(text)
	if len(lines) == 0 && !sd.hasSets {
		return nil
	}
	if err := s.restoreRules(sd, emptyFilter); err != nil {
		return err
	}
	run := func(stdin string, args ...string) error {
		argv := append(s.ipsetCmd(sd), args...)
		res, err := nettest.ExecStdin(toolTimeout, sd.topo.FwNS, stdin, argv...)
		if err != nil {
			return fmt.Errorf("%s: exit %d: %s", strings.Join(argv, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		return nil
	}
	// Flush first: a list:set's members cannot be destroyed while it
	// holds them.
	if err := run("", "flush"); err != nil {
		return err
	}
	if err := run("", "destroy"); err != nil {
		return err
	}
	sd.hasSets = false
	if len(lines) == 0 {
		return nil
	}
	if err := run(strings.Join(lines, "\n")+"\n", "restore"); err != nil {
		return err
	}
	sd.hasSets = true
	return nil
}

// restore loads ruleset text into a side's fw, with the ipsets it carries.
func (s *Session) restore(sd *side, text string) error {
	if err := s.loadSets(sd, text); err != nil {
		return err
	}
	return s.restoreRules(sd, text)
}

// restoreRules loads ruleset text into a side's fw (xfw: with its last
// rules appended one by one when Config.AppendTail asks for it).
func (s *Session) restoreRules(sd *side, text string) error {
	var head, tail []string
	if !sd.kernel && s.cfg.AppendTail > 0 {
		var rest []string
		rest, head, tail = splitEnds(text, s.cfg.AppendTail)
		text = strings.Join(rest, "\n")
	}
	if err := s.restoreText(sd, text); err != nil {
		return err
	}
	prog := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prog = "ip6tables"
	}
	// The first rules are inserted at the head, last first; the last ones
	// appended twice, then the first copies deleted by specification (-D
	// removes the first match): the chains end as the ruleset says,
	// through in-place changes.
	var steps [][]string
	add := func(cmd string, lines []string) error {
		for _, line := range lines {
			words, err := iptables.Tokenize(line)
			if err != nil {
				return fmt.Errorf("split %q: %w", line, err)
			}
			if len(words) < 2 || words[0] != "-A" {
				return fmt.Errorf("line %q is no -A", line)
			}
			steps = append(steps, append([]string{cmd}, words[1:]...))
		}
		return nil
	}
	reversed := slices.Clone(head)
	slices.Reverse(reversed)
	// A rule that occurs twice in the ruleset (in iptables-save's form:
	// spellings differ) is appended once: -D could delete its twin.
	restCanon, canon := canonicalRules(s.cfg.Family, text, append(slices.Clone(head), tail...))
	seen := map[string]int{}
	for _, c := range append(restCanon, canon...) {
		for _, r := range c {
			seen[r]++
		}
	}
	var unique []string
	for i, l := range tail {
		if c := canon[len(head)+i]; len(c) > 0 && !slices.ContainsFunc(c, func(r string) bool { return seen[r] > 1 }) {
			unique = append(unique, l)
		}
	}
	for _, st := range []struct {
		cmd   string
		lines []string
	}{{"-I", reversed}, {"-A", tail}, {"-A", unique}, {"-D", unique}} {
		if err := add(st.cmd, st.lines); err != nil {
			return err
		}
	}
	for _, words := range steps {
		// XFW_TRACE tells whether the change was made in place.
		argv := append([]string{"env", "XFW_TRACE=1", s.cfg.XFW, prog, lockWait}, words...)
		res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
		if err != nil {
			return fmt.Errorf("%s %s: exit %d: %s", prog, strings.Join(words, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		s.appended++
		if strings.Contains(res.Stderr, "commit: append in place") || strings.Contains(res.Stderr, "commit: delete in place") || strings.Contains(res.Stderr, "commit: insert in place") {
			s.inPlace++
		}
	}
	return nil
}

// Appended returns how many `iptables -I`, `-A` and `-D` commands xfw ran
// (Config.AppendTail) and how many of them were done in place.
func (s *Session) Appended() (rules, inPlace int) { return s.appended, s.inPlace }

// splitEnds takes up to n of each base chain's first "-A" lines and up to
// n of its last ones (other lines) out of the filter table text, returning
// the rest, the first lines and the last lines, each in order. The first
// lines end before one naming several addresses: it stands for one rule
// per address, which -I would put in reverse order. Only the filter
// table's lines are taken (the text may have other tables, whose chains
// bear the same names).
func splitEnds(text string, n int) (rest, head, tail []string) {
	lines := strings.Split(text, "\n")
	taken := map[int]int{} // line → 1 head, 2 tail
	table := make([]string, len(lines))
	cur := ir.TableFilter
	for i, l := range lines {
		if strings.HasPrefix(l, "*") {
			cur = strings.TrimSpace(l[1:])
		}
		table[i] = cur
	}
	for _, chain := range ir.BuiltinChains {
		var idx []int
		for i, l := range lines {
			if table[i] != ir.TableFilter {
				continue
			}
			if t := strings.TrimRight(l, " "); t == "-A "+chain || strings.HasPrefix(t, "-A "+chain+" ") {
				idx = append(idx, i)
			}
		}
		prefix := true // the head is a prefix of the chain
		for k, i := range idx {
			prefix = prefix && k < n && k < len(idx)/2 && !multiAddress(lines[i])
			switch {
			case prefix:
				taken[i] = 1
			case k >= len(idx)-n && k >= len(idx)/2:
				taken[i] = 2
			}
		}
	}
	for i, l := range lines {
		switch taken[i] {
		case 1:
			head = append(head, l)
		case 2:
			tail = append(tail, l)
		default:
			rest = append(rest, l)
		}
	}
	return rest, head, tail
}

// multiAddress reports a rule line naming several -s or -d addresses.
func multiAddress(line string) bool {
	words, err := iptables.Tokenize(line)
	if err != nil {
		return true
	}
	for i := 0; i+1 < len(words); i++ {
		switch words[i] {
		case "-s", "--source", "--src", "-d", "--destination", "--dst":
			if strings.Contains(words[i+1], ",") {
				return true
			}
		}
	}
	return false
}

// canonicalRules returns, for the rule lines of rest and for extra, each
// line's rules as iptables-save prints them (one per address pair); nil
// for a line that does not parse alone. rest supplies the chain
// declarations.
func canonicalRules(fam ir.Family, rest string, extra []string) (restRules, extraRules [][]string) {
	var decls []string
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			decls = append(decls, l)
		case strings.HasPrefix(l, "-A "):
			lines = append(lines, l)
		}
	}
	lines = append(lines, extra...)
	out := make([][]string, 0, len(lines))
	for _, l := range lines {
		text := "*filter\n" + strings.Join(decls, "\n") + "\n" + l + "\nCOMMIT\n"
		rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{Sets: SetLookup(text)})
		if err != nil {
			out = append(out, nil)
			continue
		}
		var rules []string
		for _, sl := range strings.Split(iptables.Save(rs, false), "\n") {
			if strings.HasPrefix(sl, "-A ") {
				rules = append(rules, sl)
			}
		}
		out = append(out, rules)
	}
	return out[:len(out)-len(extra)], out[len(out)-len(extra):]
}

// restoreText runs a side's restore command on ruleset text.
func (s *Session) restoreText(sd *side, text string) error {
	f, err := os.CreateTemp("", "xfw-difftest-*.rules")
	if err != nil {
		return fmt.Errorf("ruleset file: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("ruleset file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ruleset file: %w", err)
	}
	// Both take a host-wide lock (xtables', xfw's) other programs may hold
	// for a moment.
	argv := append(s.firewallCmd(sd, "-restore"), lockWait, f.Name())
	res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
	if err != nil {
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s: exit %d: %s", strings.Join(argv[:len(argv)-2], " "), res.ExitCode, msg)
	}
	return nil
}

// zero zeroes a side's counters (iptables -Z).
func (s *Session) zero(sd *side) error {
	prog := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prog = "ip6tables"
	}
	for _, table := range s.savedTables() {
		argv := []string{prog + "-legacy", "-w", "-t", table, "-Z"}
		if !sd.kernel {
			argv = []string{s.cfg.XFW, prog, "-w", "-t", table, "-Z"}
		}
		if res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...); err != nil {
			return fmt.Errorf("%s: zero %s counters: %v %s", sd.name, table, err, res.Stderr)
		}
	}
	return nil
}

// save returns a side's iptables-save -c output.
func (s *Session) save(sd *side) (string, error) {
	var out strings.Builder
	for _, table := range s.savedTables() {
		argv := append(s.firewallCmd(sd, "-save"), "-c", "-t", table)
		res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
		if err != nil {
			return "", fmt.Errorf("%s save -t %s: %w", sd.name, table, err)
		}
		out.WriteString(res.Stdout)
	}
	return out.String(), nil
}

// flushConntrack empties a side's connection table: conntrack -F in the
// kernel's fw, xfw conntrack -F in xfw's (nothing to do while xfw tracks
// nothing: its tables exist only with a ruleset that needs them).
func (s *Session) flushConntrack(sd *side) error {
	argv := []string{"conntrack", "-F"}
	if !sd.kernel {
		argv = []string{s.cfg.XFW, "conntrack", "-F"}
	}
	res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...)
	if err != nil {
		if !sd.kernel && strings.Contains(res.Stderr, "not loaded") {
			return nil
		}
		return fmt.Errorf("%s: %s: exit %d: %s", sd.name, strings.Join(argv, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// `xfw log` is ready once it holds the ring buffer open (the ring keeps
// the events written before it reads them). logStartTimeout bounds the
// wait; logStartPoll is how often it looks.
const (
	logStartTimeout = 10 * time.Second
	logStartPoll    = 5 * time.Millisecond
)

// bpfMapTypeRingbuf is BPF_MAP_TYPE_RINGBUF, as a map's fdinfo shows it.
const bpfMapTypeRingbuf = "27"

// holdsRing reports whether process pid has a BPF ring buffer open.
func holdsRing(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "map_type:" && f[1] == bpfMapTypeRingbuf {
				return true
			}
		}
	}
	return false
}

// startLog starts `xfw log` in the xfw side's fw, once xfw is loaded.
func (s *Session) startLog(sd *side) error {
	if sd.logCmd != nil {
		return nil
	}
	cmd := exec.Command("ip", "netns", "exec", sd.topo.FwNS, s.cfg.XFW, "log")
	// No Pdeathsig: it fires when the OS thread that started the child
	// exits, and Go ends threads that were locked into another namespace
	// (nettest.InNamespace): `xfw log` was then killed at random and LOG
	// lines went missing. The session ends it (Close).
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("xfw log: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start xfw log: %w", err)
	}
	sd.logCmd, sd.logDone = cmd, make(chan struct{})
	go func() {
		defer close(sd.logDone)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 4096), maxIPPacket)
		for sc.Scan() {
			sd.log.add(logEvent(sc.Text()))
		}
		_ = cmd.Wait()
		if stderr.Len() > 0 {
			s.cfg.Logf("xfw log: %s", strings.TrimSpace(stderr.String()))
		}
	}()
	// `ip netns exec` runs xfw in its own process.
	for start := time.Now(); !holdsRing(cmd.Process.Pid); {
		select {
		case <-sd.logDone:
			return fmt.Errorf("xfw log ended at its start: %s", strings.TrimSpace(stderr.String()))
		case <-time.After(logStartPoll):
		}
		if time.Since(start) > logStartTimeout {
			return fmt.Errorf("xfw log holds no ring buffer after %v", logStartTimeout)
		}
	}
	return nil
}
