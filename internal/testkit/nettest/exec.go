package nettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	// DefaultExecTimeout bounds a command run by Exec or Run: a bound
	// against hanging, above the 60 s the tests' xfw commands wait for the
	// machine's /run/xfw.lock (-w 60), which other test processes' big
	// restores can hold for tens of seconds on a loaded machine.
	DefaultExecTimeout = 90 * time.Second
	// execWaitDelay is how long a timed-out command's output pipes may stay
	// open (held by its children) after it was killed.
	execWaitDelay = 2 * time.Second
	// ipTimeout bounds one ip(8) command used to build or tear down a
	// topology; they normally take milliseconds.
	ipTimeout = 10 * time.Second
)

// Result is the outcome of a command run by Exec or Run.
type Result struct {
	// Argv is the command as run, without the ip netns exec prefix.
	Argv []string
	// Stdout and Stderr are the command's output.
	Stdout, Stderr string
	// ExitCode is the exit status; -1 if the command did not exit normally
	// (not started, killed on timeout, signalled).
	ExitCode int
}

// String formats the result for test logs.
func (r *Result) String() string {
	return fmt.Sprintf("%q: exit %d\nstdout: %s\nstderr: %s", r.Argv, r.ExitCode,
		strings.TrimSpace(r.Stdout), strings.TrimSpace(r.Stderr))
}

// Exec runs argv inside network namespace ns with "ip netns exec", bounded by
// DefaultExecTimeout. The Result is always filled; the error is non-nil when
// the command could not run, timed out or exited non-zero, and then includes
// its stderr.
func Exec(ns string, argv ...string) (*Result, error) {
	return ExecTimeout(DefaultExecTimeout, ns, argv...)
}

// ExecTimeout is Exec with an explicit time limit.
func ExecTimeout(timeout time.Duration, ns string, argv ...string) (*Result, error) {
	if ns == "" {
		return &Result{Argv: argv, ExitCode: -1},
			errors.New("nettest: Exec needs a namespace name (refusing to run in the current namespace)")
	}
	if len(argv) == 0 {
		return &Result{ExitCode: -1}, errors.New("nettest: Exec needs a command")
	}
	full := append([]string{"netns", "exec", ns}, argv...)
	res, err := runCommand(timeout, "ip", full...)
	res.Argv = argv
	if err != nil {
		return res, fmt.Errorf("in namespace %s: %w", ns, err)
	}
	return res, nil
}

// ExecStdin is ExecTimeout with stdin as the command's standard input.
func ExecStdin(timeout time.Duration, ns, stdin string, argv ...string) (*Result, error) {
	if ns == "" {
		return &Result{Argv: argv, ExitCode: -1},
			errors.New("nettest: Exec needs a namespace name (refusing to run in the current namespace)")
	}
	if len(argv) == 0 {
		return &Result{ExitCode: -1}, errors.New("nettest: Exec needs a command")
	}
	res, err := runCommandStdin(timeout, stdin, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	res.Argv = argv
	if err != nil {
		return res, fmt.Errorf("in namespace %s: %w", ns, err)
	}
	return res, nil
}

// Run runs a shell command line inside namespace ns: Exec(ns, "sh", "-c", cmd).
func Run(ns, cmd string) (*Result, error) {
	return Exec(ns, "sh", "-c", cmd)
}

// MustExec runs argv inside ns like Exec and fails the test if it does not
// succeed; it returns the command's stdout.
func MustExec(t testing.TB, ns string, argv ...string) string {
	t.Helper()
	res, err := Exec(ns, argv...)
	if err != nil {
		t.Fatalf("nettest: %v", err)
	}
	return res.Stdout
}

// ipCmd runs ip(8) with args in the test process's own namespace. It is used
// only to add, list and delete our namespaces and, with -n, to configure
// them: never to change the current namespace.
func ipCmd(args ...string) (*Result, error) {
	return runCommand(ipTimeout, "ip", args...)
}

// runCommand runs name with args, bounded by timeout.
func runCommand(timeout time.Duration, name string, args ...string) (*Result, error) {
	return runCommandStdin(timeout, "", name, args...)
}

// runCommandStdin runs name with args and stdin as its standard input,
// bounded by timeout.
func runCommandStdin(timeout time.Duration, stdin string, name string, args ...string) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = execWaitDelay
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := &Result{
		Argv:     append([]string{name}, args...),
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		ExitCode: -1,
	}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s %s: timed out after %v: %w (stderr: %s)",
			name, strings.Join(args, " "), timeout, ctx.Err(), strings.TrimSpace(res.Stderr))
	case err != nil:
		return res, fmt.Errorf("%s %s: %w (stderr: %s)",
			name, strings.Join(args, " "), err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}
