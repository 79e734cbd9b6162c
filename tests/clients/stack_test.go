// Package clients runs real iptables clients — ufw, fail2ban, firewalld,
// Docker — unmodified, as Debian installs them, with xfw as the system's
// iptables and, for comparison, with the kernel's iptables-legacy: same
// commands, same probes from a client namespace, same rulesets required.
//
// Each client runs in the fw namespace of a topology the test builds, in a
// private mount namespace (the one `ip netns exec` creates, kept alive by a
// holder process) where a copy of /etc/alternatives points iptables,
// ip6tables and their -save/-restore at xfw (or at iptables-legacy), the
// way update-alternatives does on a real host; the clients call
// /usr/sbin/iptables* by absolute path, which resolves through that copy.
// For xfw, xfw is also bind-mounted over /usr/sbin/ipset. The clients'
// configuration directories are bind-mounted copies and /run is a private
// tmpfs, so nothing of the host is read for writing or changed; everything
// vanishes with the holder and the topology.
package clients

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

const (
	// kindKernel and kindXFW name the two firewalls a scenario runs on.
	kindKernel = "kernel"
	kindXFW    = "xfw"
	// nsBase starts this package's namespace names.
	nsBase = "xc"
	// commandTimeout bounds one client command.
	commandTimeout = 60 * time.Second
	// holderReadyTimeout bounds the holder's mounts.
	holderReadyTimeout = 10 * time.Second
	// holderLifetime bounds the holder if the test process dies without
	// killing it (its sleep ends, its mount namespace goes).
	holderLifetime = "3600"
)

// clientPackages are the Debian packages the tests run (scripts/deps.sh
// installs them).
var clientPackages = []string{"ufw", "fail2ban", "firewalld", "ipset", "busybox-static", "docker.io"}

// iptablesNames are the alternatives a scenario points at its firewall.
var iptablesNames = []string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
}

// xfwPath returns the xfw binary built by `make build`.
func xfwPath(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "bin", "xfw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("xfw binary missing (%v): run `make build` (make test does)", err)
	}
	return p
}

// requirePackages fails (never skips) when a client package is missing.
func requirePackages(t testing.TB) {
	t.Helper()
	nettest.RequireRoot(t)
	for _, pkg := range clientPackages {
		out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", pkg).Output()
		if err != nil || string(out) != "installed" {
			t.Fatalf("package %s is not installed (scripts/deps.sh installs it; make test runs it): %v", pkg, err)
		}
	}
}

// bind is one bind mount made in the holder's mount namespace; with fstype,
// a new mount of that type instead (src its source, opts its options, dst
// made first).
type bind struct{ src, dst, fstype, opts string }

// stack is one firewall (the kernel's iptables-legacy or xfw) in the fw
// namespace of its own topology, with the holder of its mount namespace.
type stack struct {
	kind   string
	xfw    string
	topo   *nettest.Topology
	dir    string
	holder *exec.Cmd
	// confDir holds the scenario's copies of the client's configuration.
	confDir string
}

// newStack builds a topology and the private mount namespace of its fw
// namespace: the alternatives pointing at the stack's firewall, the binds
// the scenario asks for, a private /run. Everything is removed by
// t.Cleanup: the daemons the test started first (registered later), then
// xfw, the holder, the topology.
func newStack(t testing.TB, kind, xfw string, binds []bind) *stack {
	t.Helper()
	s := &stack{kind: kind, xfw: xfw, topo: nettest.New(t, nettest.WithBase(nsBase)), dir: t.TempDir()}
	alt := filepath.Join(s.dir, "alternatives")
	if out, err := exec.Command("cp", "-a", "/etc/alternatives", alt).CombinedOutput(); err != nil {
		t.Fatalf("copy /etc/alternatives: %v %s", err, out)
	}
	for _, name := range iptablesNames {
		target := xfw
		if kind == kindKernel {
			target = "/usr/sbin/" + strings.Replace(name, "tables", "tables-legacy", 1)
		}
		link := filepath.Join(alt, name)
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	all := append([]bind{{src: alt, dst: "/etc/alternatives"}}, binds...)
	if kind == kindXFW {
		all = append(all, bind{src: xfw, dst: "/usr/sbin/ipset"})
	}
	s.startHolder(t, all)
	return s
}

// startHolder starts the process whose mount namespace the stack's commands
// enter, and waits until its mounts are made.
func (s *stack) startHolder(t testing.TB, binds []bind) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, b := range binds {
		if b.fstype == "" {
			fmt.Fprintf(&script, "mount --bind %s %s\n", shellQuote(b.src), shellQuote(b.dst))
			continue
		}
		fmt.Fprintf(&script, "mkdir -p %s\nmount -t %s -o %s %s %s\n", shellQuote(b.dst), shellQuote(b.fstype),
			shellQuote(b.opts), shellQuote(b.src), shellQuote(b.dst))
	}
	script.WriteString("mount -t tmpfs -o mode=0755 xfwtest /run\necho ready\nexec sleep " + holderLifetime + "\n")
	cmd := exec.Command("ip", "netns", "exec", s.topo.FwNS, "sh", "-c", script.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	s.holder = cmd
	t.Cleanup(s.stop)
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("holder of %s's mount namespace failed: %s", s.kind, stderr.String())
		}
	case <-time.After(holderReadyTimeout):
		t.Fatalf("holder of %s's mount namespace not ready after %v: %s", s.kind, holderReadyTimeout, stderr.String())
	}
}

// stop removes xfw from the namespace and ends the holder.
func (s *stack) stop() {
	if s.kind == kindXFW {
		_, _ = s.run(s.xfw, "stop")
	}
	if s.holder != nil && s.holder.Process != nil {
		_ = s.holder.Process.Kill()
		_ = s.holder.Wait()
	}
}

// command returns argv run in the stack's network and mount namespaces.
func (s *stack) command(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	full := append([]string{"-t", strconv.Itoa(s.holder.Process.Pid), "-m", "-n", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// run runs argv in the stack's namespaces and returns its combined output;
// the error says how it failed, with the output.
func (s *stack) run(argv ...string) (string, error) {
	return s.runEnv(nil, argv...)
}

// runEnv is run with extra environment variables.
func (s *stack) runEnv(env []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := s.command(ctx, env, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s (%s): %w\n%s", strings.Join(argv, " "), s.kind, err, out)
	}
	return string(out), nil
}

// startDaemon starts argv in the stack's namespaces in the background; the
// test's cleanup ends it (SIGTERM, then SIGKILL) before the holder.
func (s *stack) startDaemon(t testing.TB, env []string, logPath string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := s.command(context.Background(), env, argv...)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", argv[0], err)
	}
	t.Cleanup(func() {
		defer logFile.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// runIP runs ip(8) in the test's own namespace (ip -n configures the
// topology's namespaces).
func runIP(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	return string(out), err
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// savedRuleset returns the family's filter table as iptables-save prints
// it, without comments and counters, for comparing the two firewalls.
func (s *stack) savedRuleset(fam int) (string, error) {
	return s.savedTable(fam, "filter")
}

// savedTable returns the family's table as iptables-save prints it,
// without comments and counters.
func (s *stack) savedTable(fam int, table string) (string, error) {
	prog := "iptables-save"
	if fam == 6 {
		prog = "ip6tables-save"
	}
	out, err := s.run(prog, "-t", table)
	if err != nil {
		return "", err
	}
	return normalizeSave(out), nil
}

var saveCounters = regexp.MustCompile(` \[\d+:\d+\]$`)

// normalizeSave drops comment lines and chain counters.
func normalizeSave(save string) string {
	var b strings.Builder
	for _, line := range strings.Split(save, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b.WriteString(saveCounters.ReplaceAllString(line, ""))
		b.WriteString("\n")
	}
	return b.String()
}

// whyRefused loads the kernel stack's ruleset into xfw with
// iptables-restore --test (nothing changes) and returns what xfw says about
// it: the message naming the extension xfw lacks, when that is why the
// rulesets differ.
func whyRefused(kernel, xfw *stack, fam int) string {
	prog := "iptables"
	if fam == 6 {
		prog = "ip6tables"
	}
	save, err := kernel.run(prog+"-save", "-t", "filter")
	if err != nil {
		return err.Error()
	}
	f := filepath.Join(xfw.dir, "kernel-ruleset")
	if err := os.WriteFile(f, []byte(save), 0o600); err != nil {
		return err.Error()
	}
	out, err := xfw.run(xfw.xfw, prog+"-restore", "-w", "10", "--test", f)
	if err == nil {
		return "xfw accepts the kernel's ruleset (" + prog + "-restore --test)"
	}
	return strings.TrimSpace(out)
}
