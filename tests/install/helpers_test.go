// Package install_test checks how xfw installs as the system's iptables:
// `make install DESTDIR=…` and `make uninstall`, `make deb`'s package (its
// files, control fields and maintainer scripts), the systemd units
// (systemd-analyze verify) and the manual page (man -l).
//
// Nothing here touches the machine: installs go to temporary directories,
// the package is inspected with dpkg-deb and never installed, and the
// postinst's and prerm's update-alternatives commands run with --root in a
// temporary tree (a guard checks the machine's iptables alternatives are
// unchanged). The tests need make, the Go toolchain and clang (make
// builds), dpkg-deb, dpkg-shlibdeps (dpkg-dev), update-alternatives, man
// (man-db), groff and systemd-analyze (systemd); they fail, never skip,
// when one is missing.
package install_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// families are the alternatives groups xfw joins.
var families = []string{"iptables", "ip6tables"}

// altNames are the names the iptables and ip6tables alternatives link to
// (iptables-xfw, iptables-xfw-restore, …), each with the command it stands
// for (iptables, iptables-restore, …).
var altNames = func() map[string]string {
	names := map[string]string{}
	for _, fam := range families {
		for _, suffix := range []string{"", "-restore", "-save"} {
			names[fam+"-xfw"+suffix] = fam + suffix
		}
	}
	return names
}()

// units are the systemd units the install lays out.
var units = []string{"xfw-restore.service", "xfw-agent.service"}

// repoRoot returns the repository's top directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// requireTools fails (never skips) when a tool the tests rely on is missing.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (scripts/deps.sh installs it): %v", tool, err)
		}
	}
}

// run runs name with args (in dir when not empty, with env added to the
// environment) and returns its standard output; it fails the test, showing
// standard error, when the command fails.
func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := runStatus(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// runStatus runs name with args and returns its outputs and error.
func runStatus(dir string, env []string, name string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if name == "make" {
		// A make of its own, not a sub-make of the `make test` that runs
		// the tests: an inherited MAKEFLAGS (-w in a sub-make) would print
		// "Entering directory" lines into the output the tests read.
		cmd.Env = append(cmd.Env, "MAKEFLAGS=", "MAKELEVEL=")
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// makeInstall runs `make install` into a new temporary directory with the
// extra make variables vars, and returns the directory.
func makeInstall(t testing.TB, vars ...string) string {
	t.Helper()
	requireTools(t, "make", "go", "clang", "gzip")
	dest := t.TempDir()
	run(t, repoRoot(t), nil, "make", append([]string{"-s", "install", "DESTDIR=" + dest}, vars...)...)
	return dest
}

// xfwOutput runs the repository's bin/xfw (built by the make above) with
// args and returns its standard output.
func xfwOutput(t testing.TB, args ...string) string {
	t.Helper()
	return run(t, "", nil, filepath.Join(repoRoot(t), "bin", "xfw"), args...)
}
