package install_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Debian's iptables package registers these backends (its postinst), with
// these priorities; xfw's must be lower than both so that installing xfw
// never switches a host to it.
var debianBackends = map[string]int{"legacy": 10, "nft": 20}

// TestDeb builds the package with `make deb` and checks its control fields,
// its files, its maintainer scripts and what their update-alternatives
// commands do (run with --root in a temporary tree; the package is never
// installed).
func TestDeb(t *testing.T) {
	requireTools(t, "make", "go", "clang", "dpkg", "dpkg-deb", "dpkg-shlibdeps", "update-alternatives", "sh")
	out := t.TempDir()
	lines := strings.Fields(run(t, repoRoot(t), []string{"DEB_OUT_DIR=" + out}, "make", "-s", "deb"))
	if len(lines) == 0 {
		t.Fatal("make deb printed no package path")
	}
	deb := lines[len(lines)-1]
	if filepath.Dir(deb) != out {
		t.Fatalf("make deb built %s, not in DEB_OUT_DIR %s", deb, out)
	}
	t.Run("control", func(t *testing.T) { checkControl(t, deb) })
	t.Run("contents", func(t *testing.T) { checkContents(t, deb) })
	t.Run("scripts", func(t *testing.T) { checkScripts(t, deb) })
	t.Run("alternatives", func(t *testing.T) { checkAlternatives(t, deb) })
}

// checkControl checks the package's name, version, architecture and
// dependencies, and its file name.
func checkControl(t *testing.T, deb string) {
	fields := map[string]string{}
	for _, line := range strings.Split(run(t, "", nil, "dpkg-deb", "--field", deb), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
			fields[k] = v
		}
	}
	base := strings.TrimSpace(strings.TrimPrefix(xfwOutput(t, "version"), "xfw "))
	arch := strings.TrimSpace(run(t, "", nil, "dpkg", "--print-architecture"))
	if fields["Package"] != "xfw" {
		t.Errorf("Package: %q, want xfw", fields["Package"])
	}
	if v := fields["Version"]; v != base && !strings.HasPrefix(v, base+"+git") {
		t.Errorf("Version: %q, want %s or %s+git…", v, base, base)
	}
	if fields["Architecture"] != arch {
		t.Errorf("Architecture: %q, want %s", fields["Architecture"], arch)
	}
	depends := strings.Split(fields["Depends"], ", ")
	if !slices.Contains(depends, "iptables") || !slices.ContainsFunc(depends, func(d string) bool {
		return strings.HasPrefix(d, "libc6 (>= ")
	}) {
		t.Errorf("Depends: %q, want libc6 (>= …) and iptables", fields["Depends"])
	}
	for _, k := range []string{"Maintainer", "Description", "Installed-Size"} {
		if fields[k] == "" {
			t.Errorf("no %s field", k)
		}
	}
	if want := fmt.Sprintf("xfw_%s_%s.deb", fields["Version"], arch); filepath.Base(deb) != want {
		t.Errorf("package file %s, want %s", filepath.Base(deb), want)
	}
}

// checkContents checks that the package holds exactly what `make install`
// lays out, owned by root.
func checkContents(t *testing.T, deb string) {
	want := map[string]installedEntry{}
	for _, e := range wantInstalled("usr/sbin", "usr/share/man") {
		want["./"+e.path] = e
	}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "", nil, "dpkg-deb", "--contents", deb)), "\n") {
		// drwxr-xr-x root/root 0 2024-01-01 00:00 ./path[/] [-> target]
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		perms, owner, path := f[0], f[1], strings.TrimSuffix(f[5], "/")
		if owner != "root/root" {
			t.Errorf("%s is owned by %s", path, owner)
		}
		w, ok := want[path]
		if !ok {
			if perms[0] != 'd' {
				t.Errorf("the package holds %s, which it should not", path)
			}
			continue
		}
		delete(want, path)
		if want := modeString(w.mode); perms != want {
			t.Errorf("%s: %s, want %s", path, perms, want)
		}
		if w.link != "" && (len(f) < 8 || f[6] != "->" || f[7] != w.link) {
			t.Errorf("%s: %q, want a link to %s", path, line, w.link)
		}
	}
	for p := range want {
		t.Errorf("the package lacks %s", p)
	}
}

// modeString renders m as ls and dpkg-deb do ("drwxr-xr-x", "lrwxrwxrwx").
func modeString(m fs.FileMode) string {
	s := []byte(m.Perm().String())
	switch {
	case m&fs.ModeDir != 0:
		s[0] = 'd'
	case m&fs.ModeSymlink != 0:
		s[0] = 'l'
	}
	return string(s)
}

// checkScripts checks the maintainer scripts: present, executable, valid
// sh, with no conffiles (nothing is shipped in /etc but its directory).
func checkScripts(t *testing.T, deb string) {
	dir := filepath.Join(t.TempDir(), "DEBIAN")
	run(t, "", nil, "dpkg-deb", "--control", deb, dir)
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(dir, s)
		info, err := os.Stat(p)
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		if info.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", s, info.Mode().Perm())
		}
		run(t, "", nil, "sh", "-n", p)
		text := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(readFile(t, p), "") // code, not comments
		if strings.Contains(text, "systemctl enable") || strings.Contains(text, "deb-systemd-helper enable") ||
			regexp.MustCompile(`(systemctl|deb-systemd-invoke) (re)?start`).MatchString(text) {
			t.Errorf("%s enables or starts a unit: installing xfw must not start filtering", s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "conffiles")); err == nil {
		t.Error("the package has conffiles: none are expected")
	}
}

// checkAlternatives runs the postinst's update-alternatives commands in a
// temporary root where Debian's iptables package has registered its
// backends, then the admin's --set, then the prerm's: xfw joins both
// groups below the others, --set switches to it with its slaves, and the
// prerm's removal goes back to the best of the others.
func checkAlternatives(t *testing.T, deb string) {
	guardHostAlternatives(t)
	control := filepath.Join(t.TempDir(), "DEBIAN")
	run(t, "", nil, "dpkg-deb", "--control", deb, control)
	root := t.TempDir()
	run(t, "", nil, "dpkg-deb", "--extract", deb, root)
	for _, d := range []string{"etc/alternatives", "var/lib/dpkg/alternatives", "var/log"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ua := func(args ...string) string {
		return run(t, "", nil, "update-alternatives", append([]string{"--root", root}, args...)...)
	}
	registerDebianBackends(t, root, ua)

	postinst := alternativesCommands(t, filepath.Join(control, "postinst"))
	if len(postinst) != len(families) {
		t.Fatalf("postinst runs %d update-alternatives commands, want %d: %q", len(postinst), len(families), postinst)
	}
	for _, args := range postinst {
		ua(args...)
	}
	for _, fam := range families {
		q := queryAlternatives(t, ua("--query", fam))
		if q.status != "auto" || q.value != "/usr/sbin/"+fam+"-nft" {
			t.Errorf("after the postinst, %s is %s in %s mode, want iptables-nft's in auto mode", fam, q.value, q.status)
		}
		want := alternative{priority: "5", slaves: []string{
			fam + "-restore /usr/sbin/" + fam + "-xfw-restore",
			fam + "-save /usr/sbin/" + fam + "-xfw-save",
		}}
		if got := q.alternatives["/usr/sbin/"+fam+"-xfw"]; !alternativesEqual(got, want) {
			t.Errorf("%s's xfw alternative: %+v, want %+v", fam, got, want)
		}
		ua("--set", fam, "/usr/sbin/"+fam+"-xfw")
		checkSwitchedToXfw(t, root, fam, ua)
	}

	for _, args := range alternativesCommands(t, filepath.Join(control, "prerm")) {
		ua(args...)
	}
	for _, fam := range families {
		q := queryAlternatives(t, ua("--query", fam))
		if _, ok := q.alternatives["/usr/sbin/"+fam+"-xfw"]; ok || q.status != "auto" || q.value != "/usr/sbin/"+fam+"-nft" {
			t.Errorf("after the prerm, %s is %s in %s mode with %d alternatives, want iptables-nft's in auto mode without xfw",
				fam, q.value, q.status, len(q.alternatives))
		}
	}
}

// registerDebianBackends creates stand-ins for iptables-legacy and
// iptables-nft in root and registers them as Debian's iptables postinst
// does.
func registerDebianBackends(t *testing.T, root string, ua func(...string) string) {
	t.Helper()
	for _, fam := range families {
		for backend, priority := range debianBackends {
			for _, suffix := range []string{"", "-restore", "-save"} {
				p := filepath.Join(root, "usr/sbin", fam+"-"+backend+suffix)
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			target := "/usr/sbin/" + fam + "-" + backend
			ua("--install", "/usr/sbin/"+fam, fam, target, fmt.Sprint(priority),
				"--slave", "/usr/sbin/"+fam+"-restore", fam+"-restore", target+"-restore",
				"--slave", "/usr/sbin/"+fam+"-save", fam+"-save", target+"-save")
		}
	}
}

// checkSwitchedToXfw checks that fam's master and slave links in root
// lead to xfw's names, and that those run as the commands they stand for.
func checkSwitchedToXfw(t *testing.T, root, fam string, ua func(...string) string) {
	t.Helper()
	if q := queryAlternatives(t, ua("--query", fam)); q.status != "manual" || q.value != "/usr/sbin/"+fam+"-xfw" {
		t.Errorf("after --set, %s is %s in %s mode, want xfw's in manual mode", fam, q.value, q.status)
	}
	for _, suffix := range []string{"", "-restore", "-save"} {
		name := fam + suffix
		alt := fam + "-xfw" + suffix
		if got := resolveIn(t, root, "/usr/sbin/"+name); got != "/usr/sbin/xfw-cmd" {
			t.Errorf("/usr/sbin/%s leads to %s, want /usr/sbin/xfw-cmd", name, got)
		}
		got := run(t, "", nil, filepath.Join(root, "usr/sbin", alt), "--version")
		if want := xfwOutput(t, name, "--version"); got != want {
			t.Errorf("%s --version printed %q, want %q", alt, got, want)
		}
	}
}

// resolveIn follows the symbolic links of path inside root (absolute
// targets are taken relative to root) and returns where they lead.
func resolveIn(t *testing.T, root, path string) string {
	t.Helper()
	for hops := 0; hops < 10; hops++ {
		target, err := os.Readlink(filepath.Join(root, path))
		if err != nil {
			return path
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	t.Fatalf("%s: too many links", path)
	return ""
}

// alternativesCommands returns the arguments of the update-alternatives
// commands in the shell script at path (continuation lines joined). Their
// arguments must be plain words: the test runs them itself, with --root.
func alternativesCommands(t *testing.T, path string) [][]string {
	t.Helper()
	text := strings.ReplaceAll(readFile(t, path), "\\\n", " ")
	var cmds [][]string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "update-alternatives" {
			continue
		}
		if strings.ContainsAny(line, "\"'$`;|&<>(){}*?") {
			t.Fatalf("%s: update-alternatives command with shell syntax: %q", path, line)
		}
		cmds = append(cmds, f[1:])
	}
	return cmds
}

// alternative is one alternative of a group, as --query prints it.
type alternative struct {
	priority string
	slaves   []string // "name path"
}

// alternativesEqual reports whether a and b are the same alternative.
func alternativesEqual(a, b alternative) bool {
	return a.priority == b.priority && slices.Equal(a.slaves, b.slaves)
}

// query is update-alternatives --query's answer.
type query struct {
	status, value string
	alternatives  map[string]alternative
}

// queryAlternatives parses the output of update-alternatives --query.
func queryAlternatives(t *testing.T, out string) query {
	t.Helper()
	q := query{alternatives: map[string]alternative{}}
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		var name string
		var alt alternative
		inSlaves := false
		for _, line := range strings.Split(block, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch {
			case inSlaves && strings.HasPrefix(line, " "):
				alt.slaves = append(alt.slaves, strings.TrimSpace(line))
			case k == "Status":
				q.status = v
			case k == "Value":
				q.value = v
			case k == "Alternative":
				name = v
			case k == "Priority":
				alt.priority = v
			case line == "Slaves:":
				inSlaves = true
			}
		}
		if name != "" {
			slices.Sort(alt.slaves)
			q.alternatives[name] = alt
		}
	}
	if q.status == "" {
		t.Fatalf("update-alternatives --query printed no Status:\n%s", out)
	}
	return q
}

// guardHostAlternatives fails the test if the machine's own iptables and
// ip6tables alternatives change while it runs.
func guardHostAlternatives(t *testing.T) {
	t.Helper()
	state := func() string {
		var b strings.Builder
		for _, fam := range families {
			for _, p := range []string{"/etc/alternatives/" + fam, "/usr/sbin/" + fam} {
				target, err := os.Readlink(p)
				fmt.Fprintf(&b, "%s -> %q (%v)\n", p, target, err)
			}
			admin, err := os.ReadFile("/var/lib/dpkg/alternatives/" + fam)
			fmt.Fprintf(&b, "admin file of %s: %q (%v)\n", fam, admin, err)
		}
		return b.String()
	}
	before := state()
	t.Cleanup(func() {
		if after := state(); after != before {
			t.Errorf("the machine's iptables alternatives changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// readFile returns the file at path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
