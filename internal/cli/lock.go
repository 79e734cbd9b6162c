package cli

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/statefile"

	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

// lockPath serialises xfw commands like iptables' /run/xtables.lock. One
// lock for all namespaces, as iptables has.
const lockPath = "/run/xfw.lock"

// nsLockPath is the calling thread's network namespace (nsfs): its flock
// serialises the commands that change one namespace's xfw, whatever their
// mount namespace (a container's /run of its own holds another lockPath),
// without a file per namespace. Every holder of an open descriptor of a
// namespace shares one nsfs inode, hence one lock.
const nsLockPath = "/proc/thread-self/ns/net"

// waitSpec is -w [seconds]: wait for the lock instead of failing.
type waitSpec struct {
	set     bool
	seconds int // 0: forever
	// spent is how much of seconds an earlier lock of the same command
	// took (lock: one -w N for both locks).
	spent time.Duration
	// gone ends the wait when closed (Env.Gone).
	gone <-chan struct{}
}

// errCallerGone ends the lock wait of a command whose caller is gone.
var errCallerGone = errors.New("Fatal: called off while waiting for the lock (the caller or the xfw agent serving it ended)")

// lock takes the xfw lock, then the network namespace's (lockNamespace),
// and returns their release; while they are held, the command's
// data-plane steps share one opened state (dataplane.BeginSession). Both
// are taken as w says: a command without -w fails while an ipset command
// of its namespace holds the namespace's lock, as it did while that held
// xfw's lock; -w N waits N seconds for the two together.
func lock(w waitSpec) (func(), error) {
	start := time.Now()
	f, err := takeLock(lockPath, func() (*os.File, error) { return statefile.OpenLock(lockPath) }, w)
	if err != nil {
		return nil, err
	}
	w.spent = time.Since(start)
	ns, err := takeLock(nsLockPath, openNamespace, w)
	if err != nil {
		f.Close()
		return nil, err
	}
	endSession := dataplane.BeginSession()
	return func() { endSession(); ns.Close(); f.Close() }, nil
}

// lockNamespace takes the network namespace's lock alone (nsLockPath) and
// returns its release, with a session as lock's. The ipset commands take
// it: sets are the namespace's, and the kernel's ipset commands wait for
// no other namespace's commands, as xfw's lock would make them.
func lockNamespace(w waitSpec) (func(), error) {
	ns, err := takeLock(nsLockPath, openNamespace, w)
	if err != nil {
		return nil, err
	}
	endSession := dataplane.BeginSession()
	return func() { endSession(); ns.Close() }, nil
}

// openNamespace opens the calling thread's network namespace to lock it.
func openNamespace() (*os.File, error) { return os.Open(nsLockPath) }

// takeLock opens the lock at path and takes it, at once or, with w.set, by
// waiting (waitLock); it returns the open file holding the lock, or the
// error as iptables words it.
func takeLock(path string, open func() (*os.File, error), w waitSpec) (*os.File, error) {
	f, err := open()
	if err != nil {
		return nil, fmt.Errorf("Fatal: can't open lock file %s: %s", path, strerror(err))
	}
	err = flockRetry(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) && w.set {
		var handedOver bool
		if handedOver, err = waitLock(f, w); handedOver {
			return nil, err // f is the abandoned wait's to close
		}
	}
	if err != nil {
		f.Close()
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			return nil, errors.New("Another app is currently holding the xtables lock. Perhaps you want to use the -w option?")
		case errors.Is(err, errCallerGone):
			return nil, err
		}
		return nil, fmt.Errorf("Fatal: can't lock %s: %v", path, err)
	}
	return f, nil
}

// flockRetry is flock(2) on f, retried when a signal interrupts it.
func flockRetry(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// waitLock waits for the lock of f, held elsewhere, in a blocking flock,
// which the kernel ends as soon as the holder lets go (a poll would add up
// to its interval to every contended command). A wait that can end
// otherwise, at -w's seconds or when the caller is gone (a served
// command), blocks on a thread of its own; given up, it returns
// handedOver and the command's error: that thread closes f, releasing the
// lock, once its flock returns.
func waitLock(f *os.File, w waitSpec) (handedOver bool, err error) {
	if w.seconds == 0 && w.gone == nil {
		return false, flockRetry(f, syscall.LOCK_EX)
	}
	taken := make(chan error, 1)
	go func() { taken <- flockRetry(f, syscall.LOCK_EX) }()
	var timeout <-chan time.Time
	if w.seconds != 0 {
		t := time.NewTimer(time.Duration(w.seconds)*time.Second - w.spent)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-taken:
		select {
		case <-w.gone: // gone too: the command does not run
			if err == nil {
				return false, errCallerGone
			}
		default:
		}
		return false, err
	case <-w.gone:
		err = errCallerGone
	case <-timeout:
		err = fmt.Errorf("Another app is currently holding the xtables lock. Stopped waiting after %ds.", w.seconds)
	}
	go func() {
		<-taken
		f.Close()
	}()
	return true, err
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// errnoText renders an open error as strerror does.
func errnoText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if errors.As(pe.Err, &errno) {
			return errno.Error()
		}
	}
	return err.Error()
}

// testCompile compiles rs without loading it, so --test reports what the
// data plane cannot enforce.
func testCompile(rs *ir.Ruleset, sets *ipsetLookup) error {
	ifaces, err := dataplane.CompilerInterfaces()
	if err != nil {
		return err
	}
	if _, err := compiler.Compile(rs, compiler.Options{Interfaces: ifaces, SetCounts: setCounts(sets)}); err != nil {
		return err
	}
	return checkDataPlaneSupport(rs, sets)
}

// strerror is C's strerror(3) text of err's errno ("Permission denied"),
// as iptables prints it, or err's own text when it carries no errno.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	t := errno.Error()
	if t == "" {
		return t
	}
	return strings.ToUpper(t[:1]) + t[1:]
}
