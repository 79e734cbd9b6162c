package install_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// installedEntry is one path `make install` lays out.
type installedEntry struct {
	path string      // relative to DESTDIR
	mode fs.FileMode // type and permission bits
	link string      // a symbolic link's target
}

// wantInstalled returns what `make install` lays out with sbin as SBINDIR
// and man as MANDIR (both without the leading "/").
func wantInstalled(sbin, man string) []installedEntry {
	want := []installedEntry{
		{path: filepath.Join(sbin, "xfw"), mode: 0o755},
		{path: filepath.Join(sbin, "xfw-cmd"), mode: 0o755},
		{path: filepath.Join(sbin, "xfw-difftest"), mode: 0o755},
		{path: filepath.Join(man, "man8", "xfw.8.gz"), mode: 0o644},
		{path: "etc/xfw", mode: fs.ModeDir | 0o755},
	}
	for _, u := range units {
		want = append(want, installedEntry{path: filepath.Join("lib/systemd/system", u), mode: 0o644})
	}
	for alt := range altNames {
		want = append(want, installedEntry{path: filepath.Join(sbin, alt), mode: fs.ModeSymlink | 0o777, link: "xfw-cmd"})
	}
	return want
}

// checkInstalled checks that dest holds exactly want's files and links
// (directories leading to them aside).
func checkInstalled(t *testing.T, dest string, want []installedEntry) {
	t.Helper()
	wantPaths := map[string]installedEntry{}
	for _, w := range want {
		wantPaths[w.path] = w
	}
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dest, p)
		w, ok := wantPaths[rel]
		if !ok {
			if !d.IsDir() {
				t.Errorf("make install laid out %s, which it should not", rel)
			}
			return nil
		}
		delete(wantPaths, rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if got := info.Mode() & (fs.ModeType | fs.ModePerm); got != w.mode {
			t.Errorf("%s: mode %v, want %v", rel, got, w.mode)
		}
		if w.link != "" {
			if got, _ := os.Readlink(p); got != w.link {
				t.Errorf("%s links to %q, want %q", rel, got, w.link)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range wantPaths {
		t.Errorf("make install did not lay out %s", p)
	}
}

// TestMakeInstall installs into a temporary DESTDIR and checks every file,
// that the alternatives' names run as the commands they stand for, the
// units' commands, the compressed manual page, and that `make uninstall`
// removes it all.
func TestMakeInstall(t *testing.T) {
	dest := makeInstall(t)
	checkInstalled(t, dest, wantInstalled("usr/sbin", "usr/share/man"))

	for alt, canonical := range altNames {
		got := run(t, "", nil, filepath.Join(dest, "usr/sbin", alt), "--version")
		if want := xfwOutput(t, canonical, "--version"); got != want {
			t.Errorf("%s --version printed %q; xfw %s --version prints %q", alt, got, canonical, want)
		}
	}
	checkExecStart(t, dest, "/usr/sbin/xfw")

	man, err := os.ReadFile(filepath.Join(dest, "usr/share/man/man8/xfw.8.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gunzip(t, man), readRepoFile(t, "docs/xfw.8"); got != want {
		t.Error("usr/share/man/man8/xfw.8.gz is not docs/xfw.8 compressed")
	}

	if err := os.WriteFile(filepath.Join(dest, "etc/xfw/rules.v4"), []byte("*filter\nCOMMIT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, repoRoot(t), nil, "make", "-s", "uninstall", "DESTDIR="+dest)
	checkInstalled(t, dest, []installedEntry{{path: "etc/xfw/rules.v4", mode: 0o644}})
}

// TestMakeInstallPrefix installs with PREFIX=/usr/local: the binaries and
// the manual page move, the units stay in /lib/systemd/system and run the
// binary where it is.
func TestMakeInstallPrefix(t *testing.T) {
	dest := makeInstall(t, "PREFIX=/usr/local")
	checkInstalled(t, dest, wantInstalled("usr/local/sbin", "usr/local/share/man"))
	checkExecStart(t, dest, "/usr/local/sbin/xfw")
}

// checkExecStart checks the units' ExecStart lines: xfw at binary.
func checkExecStart(t *testing.T, dest, binary string) {
	t.Helper()
	want := map[string]string{
		"xfw-restore.service": binary + " boot-restore",
		"xfw-agent.service":   binary + " agent",
	}
	for _, u := range units {
		text, err := os.ReadFile(filepath.Join(dest, "lib/systemd/system", u))
		if err != nil {
			t.Fatal(err)
		}
		got := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindAllStringSubmatch(string(text), -1)
		if len(got) != 1 || got[0][1] != want[u] {
			t.Errorf("%s: ExecStart lines %q, want one: %q", u, got, want[u])
		}
	}
}

// unitSettings are settings each unit must have, as systemd would read
// them (one "Key=value" line each).
var unitSettings = map[string][]string{
	"xfw-restore.service": {
		"Type=oneshot", "RemainAfterExit=yes", "DefaultDependencies=no",
		"Wants=network-pre.target", "Before=network-pre.target shutdown.target",
		"After=local-fs.target systemd-modules-load.service",
		"WantedBy=multi-user.target",
	},
	"xfw-agent.service": {
		"After=xfw-restore.service", "Restart=always", "RestartSec=1",
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_BPF CAP_SYS_ADMIN CAP_PERFMON",
		"SystemCallFilter=@system-service bpf perf_event_open",
		"WantedBy=multi-user.target",
	},
}

// TestUnitsVerify runs systemd-analyze verify on the installed units (with
// their commands pointing into the install, which it checks exist, and the
// installed manual page, which it looks up) and checks their key settings.
func TestUnitsVerify(t *testing.T) {
	requireTools(t, "systemd-analyze", "man")
	dest := makeInstall(t)
	binary := filepath.Join(dest, "usr/sbin/xfw")
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		text, err := os.ReadFile(filepath.Join(dest, "lib/systemd/system", u))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for _, s := range unitSettings[u] {
			if !slices.Contains(lines, s) {
				t.Errorf("%s lacks %q", u, s)
			}
		}
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(text), "/usr/sbin/xfw", binary)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, errOut, err := runStatus("", []string{"MANPATH=" + filepath.Join(dest, "usr/share/man")},
		"systemd-analyze", append([]string{"verify"}, paths...)...)
	if err != nil || out != "" || errOut != "" {
		t.Errorf("systemd-analyze verify: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// TestManPage renders docs/xfw.8 with man and groff's warnings on, and
// checks that it documents every command xfw's usage lists, the commands
// the usage leaves out, the alternatives' names and the units.
func TestManPage(t *testing.T) {
	requireTools(t, "man", "groff", "make", "go", "clang")
	page := filepath.Join(repoRoot(t), "docs", "xfw.8")
	if _, errOut, err := runStatus("", nil, "groff", "-man", "-ww", "-z", page); err != nil || errOut != "" {
		t.Errorf("groff -man -ww: %v\n%s", err, errOut)
	}
	rendered, errOut, err := runStatus("", []string{"LC_ALL=C", "MANWIDTH=200"}, "man", "-l", page)
	if err != nil || errOut != "" {
		t.Fatalf("man -l docs/xfw.8: %v\n%s", err, errOut)
	}
	for _, s := range []string{"NAME", "SYNOPSIS", "COMMANDS", "FILES", "ENVIRONMENT", "EXIT STATUS", "SEE ALSO"} {
		if !regexp.MustCompile(`(?m)^` + s + `$`).MatchString(rendered) {
			t.Errorf("man -l docs/xfw.8 has no %s section", s)
		}
	}
	run(t, repoRoot(t), nil, "make", "-s", "build")
	commands := append(usageCommands(t), "status", "sync", "watch", "difftest", "boot-restore", "agent")
	section := manSection(t, rendered, "COMMANDS")
	for _, c := range commands {
		// An entry's tag is indented by 7 columns (its text by 14); a tag
		// may name two commands ("iptables ..., ip6tables ...").
		if !regexp.MustCompile(`(?m)^ {7}(.*, )?` + regexp.QuoteMeta(c) + `( |$)`).MatchString(section) {
			t.Errorf("the manual page's COMMANDS have no entry for %q", c)
		}
	}
	mentions := []string{"xfw-restore.service", "xfw-agent.service", "/etc/xfw/rules.v4", "/etc/xfw/rules.v6",
		"/etc/xfw/ipsets", "/var/lib/xfw", "update-alternatives --set iptables /usr/sbin/iptables-xfw"}
	for alt := range altNames {
		mentions = append(mentions, alt)
	}
	for _, m := range mentions {
		if !regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(m) + `($|[\s,.):/])`).MatchString(rendered) {
			t.Errorf("the manual page does not mention %q", m)
		}
	}
}

// manSection returns the text of section name of a rendered manual page.
func manSection(t *testing.T, rendered, name string) string {
	t.Helper()
	_, after, ok := strings.Cut(rendered, "\n"+name+"\n")
	if !ok {
		t.Fatalf("the manual page has no %s section", name)
	}
	if next := regexp.MustCompile(`(?m)^[A-Z]`).FindStringIndex(after); next != nil {
		after = after[:next[0]]
	}
	return after
}

// usageCommands returns the commands bin/xfw's usage text lists: the first
// word of its lines indented by two spaces.
func usageCommands(t *testing.T) []string {
	t.Helper()
	_, usage, _ := runStatus("", nil, filepath.Join(repoRoot(t), "bin", "xfw"))
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)`).FindAllStringSubmatch(usage, -1) {
		cmds = append(cmds, m[1])
	}
	if len(cmds) < 8 {
		t.Fatalf("found only %q in xfw's usage:\n%s", cmds, usage)
	}
	return cmds
}

// gunzip returns data decompressed.
func gunzip(t *testing.T, data []byte) string {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// readRepoFile returns a file of the repository.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
