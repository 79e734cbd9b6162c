package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// userNSNetns starts a process in a new user namespace (the caller's
// root mapped to its root) and a network namespace that user namespace
// owns, and returns its pid, for nsenter -t PID -n, once the process is
// in both (unshare has run sleep): before, its namespaces are the
// caller's. The process is ended at cleanup.
func userNSNetns(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--net", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	proc := "/proc/" + strconv.Itoa(pid)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		comm, _ := os.ReadFile(proc + "/comm")
		if string(comm) == "sleep\n" && nsDiffers(t, proc, "net") && nsDiffers(t, proc, "user") {
			return pid
		}
		if time.Now().After(end) {
			t.Fatalf("unshare's process %d did not reach its own namespaces", pid)
		}
	}
}

// nsDiffers says whether the process at proc is in another namespace of
// kind (net, user) than the caller.
func nsDiffers(t *testing.T, proc, kind string) bool {
	t.Helper()
	theirs, err := os.Readlink(proc + "/ns/" + kind)
	if err != nil {
		return false
	}
	ours, err := os.Readlink("/proc/self/ns/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	return theirs != ours
}

// nsenterRun runs argv in pid's network namespace only (the caller's user
// namespace stays), stdin given, and returns its exit status and output.
func nsenterRun(t *testing.T, pid int, stdin string, argv ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid), "-n"}, argv...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("nsenter %v: %v", argv, err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// TestOwnerUserNSAgainstKernel runs the same owner rules, both families,
// with iptables-legacy and with xfw, each from the initial user namespace
// into a network namespace a child user namespace owns: the kernel
// refuses --uid-owner and --gid-owner there (owner_check: the writer's
// user namespace must own the network namespace), with "Invalid
// argument" and iptables-restore's "line N failed", and loads
// --socket-exists; xfw's statuses, messages and resulting rules equal the
// kernel's.
func TestOwnerUserNSAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "unshare", "nsenter")
	bin := xfwPath(t)
	kpid, xpid := userNSNetns(t), userNSNetns(t)
	t.Cleanup(func() { nsenterRun(t, xpid, "", bin, "stop") })
	restore := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A OUTPUT -m owner --uid-owner 0 -j ACCEPT\nCOMMIT\n"
	for _, prog := range []string{"iptables", "ip6tables"} {
		steps := []struct {
			stdin string
			args  []string
		}{
			{"", []string{"-A", "OUTPUT", "-m", "owner", "--uid-owner", "0", "-j", "ACCEPT"}},
			{"", []string{"-A", "OUTPUT", "-m", "owner", "!", "--gid-owner", "5-7", "-j", "DROP"}},
			{"", []string{"-A", "OUTPUT", "-m", "owner", "--socket-exists", "-j", "ACCEPT"}},
			{restore, []string{"-restore", "--noflush"}},
			{"", []string{"-S"}},
		}
		for _, s := range steps {
			kargv := append([]string{prog + "-legacy", "-w", "60"}, s.args...)
			xargv := append([]string{bin, prog, "-w", "60"}, s.args...)
			if s.args[0] == "-restore" {
				kargv = append([]string{prog + "-legacy-restore", "-w", "60"}, s.args[1:]...)
				xargv = append([]string{bin, prog + "-restore", "-w", "60"}, s.args[1:]...)
			}
			krc, kout, kerr := nsenterRun(t, kpid, s.stdin, kargv...)
			xrc, xout, xerr := nsenterRun(t, xpid, s.stdin, xargv...)
			if krc != xrc || kout != xout || kerr != xerr {
				t.Errorf("%s %v: xfw exit %d, stdout %q, stderr %q; the kernel's %d, %q, %q",
					prog, s.args, xrc, xout, xerr, krc, kout, kerr)
			}
		}
	}
	// The premise: the kernel refused the uid and gid rules.
	if _, out, _ := nsenterRun(t, kpid, "", "iptables-legacy", "-w", "60", "-S", "OUTPUT"); strings.Contains(out, "-owner") {
		t.Errorf("the kernel loaded --uid-owner from outside the namespace's user namespace (premise):\n%s", out)
	}
}
