package iptables

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The oracle: golden data recorded from the real iptables 1.8.9 (legacy
// backend) and the tests that replay it against this package.
//
// testdata/oracle_*.txt list the cases; testdata/oracle_*.json hold what
// the real tools answered. Regenerate the JSON files on a machine with
// iptables 1.8.9, as root, with
//
//	XFW_GEN_ORACLE=1 go test ./internal/iptables/ -run TestGenerateOracle
//
// Every command runs inside a network namespace created for the purpose
// and deleted afterwards; the host's firewall is never touched.

// oracleRule is one rule specification tried with "iptables -A CHAIN".
type oracleRule struct {
	Fam    int      `json:"fam"`
	Chain  string   `json:"chain"`
	Args   []string `json:"args"`
	RC     int      `json:"rc"`
	Stderr string   `json:"stderr"`
	Rules  []string `json:"rules"`
}

// oracleStep is one command of a scenario or one iptables-restore run.
type oracleStep struct {
	Fam    int      `json:"fam"`
	Args   []string `json:"args,omitempty"`
	Input  string   `json:"input,omitempty"`
	RC     int      `json:"rc"`
	Stdout string   `json:"stdout"`
	Stderr string   `json:"stderr"`
	// Save is iptables-save -c of the step's family after the step,
	// without comment lines.
	Save string `json:"save"`
}

// oracleScenario is a named sequence of steps in one namespace.
type oracleScenario struct {
	Name  string       `json:"name"`
	Steps []oracleStep `json:"steps"`
}

// parseCaseLine splits "FAM WORDS…" (words as iptables-restore splits them).
func parseCaseLine(line string) (ir.Family, []string, error) {
	words, err := Tokenize(line)
	if err != nil {
		return 0, nil, err
	}
	if len(words) == 0 {
		return 0, nil, errors.New("empty case line")
	}
	switch words[0] {
	case "4":
		return ir.IPv4, words[1:], nil
	case "6":
		return ir.IPv6, words[1:], nil
	}
	return 0, nil, fmt.Errorf("bad family in %q", line)
}

// readCaseFile returns the non-comment lines of a case file.
func readCaseFile(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read cases: %v", err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// scenarioBlocks splits a scenario file into named blocks of lines.
func scenarioBlocks(t *testing.T, name string) (names []string, blocks [][]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read scenarios: %v", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "== ") {
			names = append(names, strings.TrimPrefix(l, "== "))
			blocks = append(blocks, nil)
			continue
		}
		if len(blocks) == 0 || strings.HasPrefix(l, "#") {
			continue
		}
		blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l)
	}
	return names, blocks
}

// netns is a throwaway network namespace.
type netns struct{ name string }

// newNetns creates a namespace.
func newNetns(t *testing.T) *netns {
	t.Helper()
	n := &netns{name: fmt.Sprintf("xfwo%d", os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	return n
}

// run executes a command in the namespace.
func (n *netns) run(stdin string, prog string, args ...string) (rc int, stdout, stderr string) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.name, prog}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rc = ee.ExitCode()
	} else if err != nil {
		rc = -1
		e.WriteString(err.Error())
	}
	return rc, o.String(), e.String()
}

// legacy returns the legacy tool name for a family.
func legacy(fam ir.Family, suffix string) string {
	return ProgramName(fam) + "-legacy" + suffix
}

// save returns iptables-save -c without comments.
func (n *netns) save(fam ir.Family) string {
	_, out, _ := n.run("", legacy(fam, "-save"), "-t", "filter", "-c")
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// reset empties the filter tables of both families.
func (n *netns) reset() {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		n.run("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", legacy(fam, "-restore"))
	}
}

// writeJSON writes v as indented JSON.
func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readJSON loads golden data.
func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("golden data missing (see oracle_test.go): %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
}

// TestGenerateOracle records the golden data from the real tools.
func TestGenerateOracle(t *testing.T) {
	if os.Getenv("XFW_GEN_ORACLE") == "" {
		t.Skip("set XFW_GEN_ORACLE=1 (as root, with iptables 1.8.9 installed) to regenerate the golden data")
	}
	if out, err := exec.Command("iptables-legacy", "--version").Output(); err != nil || !strings.Contains(string(out), "v"+Version+" (legacy)") {
		t.Fatalf("iptables-legacy %s required: %q %v", Version, out, err)
	}
	ns := newNetns(t)

	var rules []oracleRule
	for _, l := range readCaseFile(t, "oracle_rules.txt") {
		fam, words, err := parseCaseLine(l)
		if err != nil || len(words) < 1 {
			t.Fatalf("bad case %q: %v", l, err)
		}
		chain, args := words[0], words[1:]
		ns.reset()
		if !ir.IsBuiltinChain(chain) {
			ns.run("", legacy(fam, ""), "-N", chain)
		}
		rc, _, stderr := ns.run("", legacy(fam, ""), append([]string{"-A", chain}, args...)...)
		res := oracleRule{Fam: int(fam), Chain: chain, Args: args, RC: rc, Stderr: stderr, Rules: []string{}}
		if rc == 0 {
			_, out, _ := ns.run("", legacy(fam, ""), "-S", chain)
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "-A ") {
					res.Rules = append(res.Rules, sc.Text())
				}
			}
		}
		rules = append(rules, res)
	}
	writeJSON(t, "oracle_rules.json", rules)

	var scenarios []oracleScenario
	names, blocks := scenarioBlocks(t, "oracle_scenarios.txt")
	for i, block := range blocks {
		ns.reset()
		sc := oracleScenario{Name: names[i]}
		for _, l := range block {
			if strings.TrimSpace(l) == "" {
				continue
			}
			fam, args, err := parseCaseLine(l)
			if err != nil {
				t.Fatalf("scenario %s: %v", names[i], err)
			}
			rc, stdout, stderr := ns.run("", legacy(fam, ""), args...)
			sc.Steps = append(sc.Steps, oracleStep{Fam: int(fam), Args: args, RC: rc, Stdout: stdout, Stderr: stderr, Save: ns.save(fam)})
		}
		scenarios = append(scenarios, sc)
	}
	writeJSON(t, "oracle_scenarios.json", scenarios)

	var restores []oracleScenario
	names, blocks = scenarioBlocks(t, "oracle_restore.txt")
	for i, block := range blocks {
		ns.reset()
		sc := oracleScenario{Name: names[i]}
		var cur *oracleStep
		var input strings.Builder
		flush := func() {
			if cur == nil {
				return
			}
			cur.Input = input.String()
			rc, stdout, stderr := ns.run(cur.Input, legacy(ir.Family(cur.Fam), "-restore"), cur.Args...)
			cur.RC, cur.Stdout, cur.Stderr, cur.Save = rc, stdout, stderr, ns.save(ir.Family(cur.Fam))
			sc.Steps = append(sc.Steps, *cur)
			cur = nil
			input.Reset()
		}
		for _, l := range block {
			if strings.HasPrefix(l, "--- restore") {
				flush()
				fam, args, err := parseCaseLine(strings.TrimSpace(strings.TrimPrefix(l, "--- restore")))
				if err != nil {
					t.Fatalf("restore %s: %v", names[i], err)
				}
				cur = &oracleStep{Fam: int(fam), Args: args}
				continue
			}
			input.WriteString(strings.ReplaceAll(l, `\NOEOL`, ""))
			if !strings.HasSuffix(l, `\NOEOL`) {
				input.WriteString("\n")
			}
		}
		flush()
		restores = append(restores, sc)
	}
	writeJSON(t, "oracle_restore.json", restores)
}
