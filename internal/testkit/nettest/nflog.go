package nettest

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// nfLogAllNetns lets the kernel's LOG target print for namespaces other
// than the initial one.
const nfLogAllNetns = "/proc/sys/net/netfilter/nf_log_all_netns"

// nfLogLockPath coordinates nf_log_all_netns between its users (xfw
// difftest sessions, the logd tests), in any process: each holds it shared
// while it runs; the file keeps the value to restore; the last out
// restores it.
const nfLogLockPath = "/run/xfw-difftest-nflog.lock"

// EnableNetnsLogging sets nf_log_all_netns (the kernel's LOG target then
// prints for every network namespace) and returns its restoration, which
// restores the value found by the first of the users running together,
// once the last of them ends: a test that restored the value it read on
// its own would silence the kernel's LOG under another's feet. (A user
// that dies leaves the value set; the next one restores it.)
func EnableNetnsLogging() (func() error, error) {
	f, err := os.OpenFile(nfLogLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err)
	}
	fail := func(err error) (func() error, error) {
		f.Close()
		return nil, err
	}
	// Others running: join them with a shared hold. An exclusive one
	// waits until no other user holds the lock at all, which users
	// overlapping one another (flock prefers no waiter) can put off for
	// minutes.
	if saved, ok, err := joinNetnsLogging(f); err != nil {
		return fail(err)
	} else if ok {
		return releaseNetnsLogging(f, saved), nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fail(fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err))
	}
	saved, err := io.ReadAll(f)
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", nfLogLockPath, err))
	}
	if len(saved) == 0 {
		if saved, err = os.ReadFile(nfLogAllNetns); err != nil {
			return fail(fmt.Errorf("read %s: %w", nfLogAllNetns, err))
		}
		if _, err := f.WriteAt(saved, 0); err != nil {
			return fail(fmt.Errorf("write %s: %w", nfLogLockPath, err))
		}
	}
	if err := os.WriteFile(nfLogAllNetns, []byte("1\n"), 0o644); err != nil {
		return fail(fmt.Errorf("enable LOG in namespaces (%s): %w", nfLogAllNetns, err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return fail(fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err))
	}
	return releaseNetnsLogging(f, saved), nil
}

// joinNetnsLogging takes f's lock shared and keeps it when another user
// runs (the value to restore is saved in f and nf_log_all_netns is set):
// no other can restore the value while it is held. Otherwise it lets go
// and reports false.
func joinNetnsLogging(f *os.File) ([]byte, bool, error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return nil, false, fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err)
	}
	saved, err := io.ReadAll(f)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", nfLogLockPath, err)
	}
	cur, err := os.ReadFile(nfLogAllNetns)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", nfLogAllNetns, err)
	}
	if len(saved) > 0 && string(cur) == "1\n" {
		return saved, true, nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		return nil, false, fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, false, fmt.Errorf("%s: %w", nfLogLockPath, err)
	}
	return nil, false, nil
}

// releaseNetnsLogging is EnableNetnsLogging's restoration for a user
// holding f's lock shared, saved the value the first user found.
func releaseNetnsLogging(f *os.File, saved []byte) func() error {
	return func() error {
		defer f.Close()
		// Let go, then see whether anyone still holds it.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
			return fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return nil // another session runs: it restores
		}
		if err := os.WriteFile(nfLogAllNetns, saved, 0o644); err != nil {
			return fmt.Errorf("restore %s: %w", nfLogAllNetns, err)
		}
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("reset %s: %w", nfLogLockPath, err)
		}
		return nil
	}
}
