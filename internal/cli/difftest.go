package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// The differential tester is its own program, xfw-difftest
// (cmd/xfw-difftest), so that none of the test harness is linked into xfw;
// `xfw difftest ARGS…` runs it.

func init() {
	commands["difftest"] = runDifftest
}

// difftestProgram is the differential tester's binary name.
const difftestProgram = "xfw-difftest"

// exitNoRun is xfw-difftest's status for a comparison that could not run,
// returned when xfw-difftest itself cannot be run.
const exitNoRun = 3

// runDifftest is `xfw difftest`: it replaces this process with
// xfw-difftest (found by findDifftest), passing args through after an
// --xfw naming this binary, so that the xfw checked is the one run. Its
// exit status and signals are then xfw-difftest's own.
func runDifftest(name string, args []string, env Env) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw %s: find xfw's own binary: %v\n", name, err)
		return exitNoRun
	}
	prog, err := findDifftest(self)
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw %s: %v\n", name, err)
		return exitNoRun
	}
	argv := append([]string{prog, "--xfw=" + self}, args...)
	err = syscall.Exec(prog, argv, os.Environ())
	fmt.Fprintf(env.Stderr, "xfw %s: run %s: %v\n", name, prog, err)
	return exitNoRun
}

// findDifftest returns the xfw-difftest binary beside the xfw binary self,
// else the one in PATH.
func findDifftest(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), difftestProgram)
	if _, err := exec.LookPath(beside); err == nil {
		return beside, nil
	}
	inPath, err := exec.LookPath(difftestProgram)
	if err != nil {
		return "", fmt.Errorf("%s is neither beside %s nor in PATH: build it (make build builds bin/xfw and bin/%s)", difftestProgram, self, difftestProgram)
	}
	return inPath, nil
}
