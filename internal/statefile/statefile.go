// Package statefile writes and reads xfw's state files (the ipset store's
// file, the lock) without the classic pitfalls of files in shared
// directories such as /run or /tmp: a new file is created with O_EXCL under
// a random name in the target's directory, mode 0600, never through a
// symbolic link, and renamed over the old one only once it is complete and
// synced; reads refuse a symbolic link in the last path component.
//
// It imports only the standard library and x/sys; ipset and cli import it.
package statefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mode is the permission of every file statefile creates.
const Mode = 0o600

// DirMode is the permission of a directory statefile creates.
const DirMode = 0o700

// tempTries bounds the attempts at a free random temporary name.
const tempTries = 16

// WriteAtomic replaces path with data: it writes a new file beside it
// (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, a random name), syncs it and
// renames it over path. A missing directory is created with mode 0700.
// A reader sees the old or the new contents, never a mix.
func WriteAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	f, tmp, err := createTemp(dir, filepath.Base(path))
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	ok = true
	return nil
}

// createTemp creates a new file of a random name beginning with base in dir.
func createTemp(dir, base string) (*os.File, string, error) {
	var lastErr error
	for i := 0; i < tempTries; i++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", fmt.Errorf("random name: %w", err)
		}
		name := filepath.Join(dir, "."+base+"."+hex.EncodeToString(b[:])+".tmp")
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, Mode)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", fmt.Errorf("create %s: %w", name, err)
		}
		lastErr = err
	}
	return nil, "", fmt.Errorf("create a temporary file in %s: %w", dir, lastErr)
}

// ReadFile reads path, refusing a symbolic link (ELOOP) in its last
// component. A missing file is os.ErrNotExist, as os.ReadFile says it.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("open %s: a symbolic link, refused: %w", path, err)
		}
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// OpenLock opens (creating it, mode 0600) the lock file at path for
// flock, refusing a symbolic link.
func OpenLock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, Mode)
}
