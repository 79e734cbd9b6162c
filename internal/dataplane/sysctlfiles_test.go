package dataplane

import (
	"errors"
	"os"
	"testing"
)

// TestSysctlFilesKept checks the sysctl reads of a kept session: the same
// bytes (and errors) as os.ReadFile, through a descriptor kept open while
// one of the last two sessions read it, and afresh outside such sessions.
func TestSysctlFilesKept(t *testing.T) {
	const path = sysctlProcPrefix + "net/ipv4/ip_default_ttl"
	setSession := func(active, keep bool) {
		session.mu.Lock()
		session.active, session.keep = active, keep
		session.mu.Unlock()
	}
	kept := func() bool {
		sysctlFiles.mu.Lock()
		defer sysctlFiles.mu.Unlock()
		return sysctlFiles.open[path] != nil
	}
	t.Cleanup(func() {
		setSession(false, false)
		endSessionSysctls(false)
	})
	want, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	for _, c := range []struct {
		name         string
		active, keep bool
		wantKept     bool
	}{
		{"no session", false, false, false},
		{"a session of a process that keeps nothing", true, false, false},
		{"a kept session", true, true, true},
	} {
		setSession(c.active, c.keep)
		for range 2 { // the second read goes through the kept descriptor
			got, err := readSysctlFile(path)
			if err != nil || string(got) != string(want) {
				t.Errorf("%s: %q, %v; want %q", c.name, got, err, want)
			}
		}
		if kept() != c.wantKept {
			t.Errorf("%s: file kept open %v, want %v", c.name, kept(), c.wantKept)
		}
	}
	if _, err := readSysctlFile(sysctlProcPrefix + "net/ipv6/conf/no-such-dev0/hop_limit"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing sysctl: %v, want not exist", err)
	}
	endSessionSysctls(true) // read in this session: kept
	endSessionSysctls(true) // not read in this one, read in the one before: kept
	if !kept() {
		t.Errorf("closed after one session without a read")
	}
	endSessionSysctls(true)
	if kept() {
		t.Errorf("still open after two sessions without a read")
	}
}
