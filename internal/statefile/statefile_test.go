package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	path := filepath.Join(dir, "state")
	for _, data := range []string{"one", "two, longer"} {
		if err := WriteAtomic(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("ReadFile = %q, %v; want %q", got, err, data)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != Mode {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), os.FileMode(Mode))
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Mode().Perm() != DirMode {
		t.Errorf("directory mode %v, want %v", dst.Mode().Perm(), os.FileMode(DirMode))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the state file (no temporary left)", len(ents))
	}
}

// TestSymlinks: a planted link is neither followed when reading nor
// written through (the rename replaces the link itself).
func TestSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("ReadFile through a link: err = %v, want a refusal", err)
	}
	if _, err := OpenLock(path); err == nil {
		t.Error("OpenLock followed a symbolic link")
	}
	if err := WriteAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(victim)
	if string(got) != "keep" {
		t.Errorf("the link's target was written: %q", got)
	}
	if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink != 0 {
		t.Error("the link is still in place")
	}
}

func TestReadMissing(t *testing.T) {
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none")); !os.IsNotExist(err) {
		t.Errorf("err = %v, want not exist", err)
	}
}
