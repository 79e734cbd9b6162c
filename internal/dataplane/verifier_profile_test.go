package dataplane

import (
	"bufio"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// verifierProfileTop is how many functions TestVerifierProfile lists.
const verifierProfileTop = 25

// TestVerifierProfile loads the program XFW_VERIFIER_PROFILE names (xfw_xdp,
// xfw_tc_egress or xfw_tc_ingress) with the verifier's instruction log and
// prints how many instructions it logged in each global function, the most
// first: where the program's verification time goes (docs/design.md,
// "Verifier budget"). The log shows most processed instructions, not all
// (its total is ~10% below verified_insns). Skipped without the variable;
// the log of a program is a few hundred MB. XFW_VERIFIER_LOG names a file
// to write the whole log to, for counting by source line.
func TestVerifierProfile(t *testing.T) {
	name := os.Getenv("XFW_VERIFIER_PROFILE")
	if name == "" {
		t.Skip("set XFW_VERIFIER_PROFILE to a program name")
	}
	inFreshNetns(t, func() {
		spec := trimmedSpec(t)
		if spec.Programs[name] == nil {
			t.Fatalf("BPF object lacks program %s", name)
		}
		for n := range spec.Programs {
			if n != name {
				delete(spec.Programs, n)
			}
		}
		coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
			Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelInstruction | ebpf.LogLevelStats, LogSizeStart: 1 << 30},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer coll.Close()
		if path := os.Getenv("XFW_VERIFIER_LOG"); path != "" {
			if err := os.WriteFile(path, []byte(coll.Programs[name].VerifierLog), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		counts, total := verifiedPerFunction(coll.Programs[name].VerifierLog)
		funcs := make([]string, 0, len(counts))
		for f := range counts {
			funcs = append(funcs, f)
		}
		sort.Slice(funcs, func(i, j int) bool { return counts[funcs[i]] > counts[funcs[j]] })
		t.Logf("%s: %d instructions processed", name, total)
		for i, f := range funcs {
			if i == verifierProfileTop {
				break
			}
			t.Logf("%8d  %s", counts[f], f)
		}
	})
}

// verifiedPerFunction counts the processed instructions of a level-1
// verifier log by the global function being validated ("Validating f()
// func#N..." starts one; before the first, the entry program, named "").
func verifiedPerFunction(log string) (map[string]int, int) {
	counts := map[string]int{}
	total, fn := 0, "(entry program)"
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Validating "); ok {
			fn, _, _ = strings.Cut(rest, " ")
			continue
		}
		// An instruction: "NNN: (op) ...".
		idx, rest, ok := strings.Cut(line, ": (")
		if !ok || idx == "" || strings.Trim(idx, "0123456789") != "" || rest == "" {
			continue
		}
		counts[fn]++
		total++
	}
	return counts, total
}
