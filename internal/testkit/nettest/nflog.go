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

// nfLogGuardPath serialises the short steps that read or change
// nfLogLockPath's state (joining, leaving): a user takes it exclusively
// for them only. Taking nfLogLockPath itself exclusively to join would
// wait for every running user to end (flock's exclusive lock waits for
// all shared holders), so sessions of different subnets, which may run
// side by side, would run one after another.
const nfLogGuardPath = "/run/xfw-difftest-nflog.guard"

// EnableNetnsLogging sets nf_log_all_netns (the kernel's LOG target then
// prints for every network namespace) and returns its restoration, which
// restores the value found by the first of the users running together,
// once the last of them ends: a test that restored the value it read on
// its own would silence the kernel's LOG under another's feet. (A user
// that dies leaves the value set; the next one restores it.)
func EnableNetnsLogging() (func() error, error) {
	unguard, err := nfLogGuard()
	if err != nil {
		return nil, err
	}
	defer unguard()
	f, err := os.OpenFile(nfLogLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nf_log lock %s: %w", nfLogLockPath, err)
	}
	fail := func(err error) (func() error, error) {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
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
	return func() error {
		defer f.Close()
		unguard, err := nfLogGuard()
		if err != nil {
			return err
		}
		defer unguard()
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
	}, nil
}

// nfLogGuard takes nfLogGuardPath exclusively and returns its release.
func nfLogGuard() (func(), error) {
	g, err := os.OpenFile(nfLogGuardPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nf_log guard %s: %w", nfLogGuardPath, err)
	}
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX); err != nil {
		g.Close()
		return nil, fmt.Errorf("nf_log guard %s: %w", nfLogGuardPath, err)
	}
	return func() { g.Close() }, nil
}
