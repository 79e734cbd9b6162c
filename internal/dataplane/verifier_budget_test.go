package dataplane

import (
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// verifierBudget is the most instructions the kernel's verifier may
// process for each of xfw's entry programs (docs/design.md, "Verifier
// budget"). The kernel refuses a program at 1,000,000; the margin absorbs
// the features still to come and other kernels' verifiers, which count
// differently. Raise it only with a reason in the commit.
const verifierBudget = 600_000

// TestVerifierBudget loads xfw's programs as the agent does and checks
// that each stays within verifierBudget; with -v it prints the numbers
// (how to measure a change: go test -v -run TestVerifierBudget) and the
// load's wall and system CPU time (nearly all of it the verifier's).
func TestVerifierBudget(t *testing.T) {
	inFreshNetns(t, func() {
		spec, err := loadSpec()
		if err != nil {
			t.Fatal(err)
		}
		var before, after syscall.Rusage
		start := time.Now()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		s, err := load(spec)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sys := time.Duration(syscall.TimevalToNsec(after.Stime) - syscall.TimevalToNsec(before.Stime))
		t.Logf("load: wall %v, system CPU %v", time.Since(start).Round(time.Millisecond), sys.Round(time.Millisecond))
		for _, prog := range []struct {
			name string
			prog *ebpf.Program
		}{{xdpProgName, s.xdp}, {tcProgName, s.tc}, {tcInProgName, s.tcIn}} {
			info, err := prog.prog.Info()
			if err != nil {
				t.Fatalf("%s: %v", prog.name, err)
			}
			n, ok := info.VerifiedInstructions()
			if !ok {
				t.Fatalf("%s: the kernel does not report verified instructions", prog.name)
			}
			t.Logf("%s: verified_insns %d (budget %d)", prog.name, n, verifierBudget)
			if n > verifierBudget {
				t.Errorf("%s: the verifier processed %d instructions, over the budget of %d: make the new code a global function (docs/design.md, \"Verifier budget\")",
					prog.name, n, verifierBudget)
			}
		}
	})
}
