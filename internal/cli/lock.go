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

// waitSpec is -w [seconds]: wait for the lock instead of failing.
type waitSpec struct {
	set     bool
	seconds int // 0: forever
	// gone ends the wait when closed (Env.Gone): the waiting is polled
	// then, every lockPoll, since a blocking flock cannot be called off.
	gone <-chan struct{}
}

// errCallerGone ends the lock wait of a command whose caller is gone.
var errCallerGone = errors.New("Fatal: called off while waiting for the lock (the caller or the xfw agent serving it ended)")

// lockPoll is how often a waiting command retries the lock.
const lockPoll = 10 * time.Millisecond

// lock takes the xfw lock and returns its release; while it is held, the
// command's data-plane steps share one opened state (dataplane.BeginSession).
func lock(w waitSpec) (func(), error) {
	f, err := statefile.OpenLock(lockPath)
	if err != nil {
		return nil, fmt.Errorf("Fatal: can't open lock file %s: %s", lockPath, strerror(err))
	}
	deadline := time.Now().Add(time.Duration(w.seconds) * time.Second)
	how := syscall.LOCK_EX | syscall.LOCK_NB
	if w.set && w.seconds == 0 && w.gone == nil {
		// Waiting for ever: block in flock, which returns as soon as the
		// holder releases the lock (polling would add up to lockPoll to
		// every contended command).
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil {
			// While the lock is held no other xfw process changes what is
			// loaded: the command's steps share one opened state.
			endSession := dataplane.BeginSession()
			return func() { endSession(); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("Fatal: can't lock %s: %v", lockPath, err)
		}
		if !w.set {
			f.Close()
			return nil, errors.New("Another app is currently holding the xtables lock. Perhaps you want to use the -w option?")
		}
		if w.gone != nil {
			select {
			case <-w.gone:
				f.Close()
				return nil, errCallerGone
			default:
			}
		}
		if w.seconds == 0 && w.gone == nil {
			// Waiting without a limit: block in the kernel, which
			// hands the lock over as soon as its holder lets go
			// (polling would add up to lockPoll to every wait).
			for {
				err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
				if !errors.Is(err, syscall.EINTR) {
					break
				}
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("Fatal: can't lock %s: %v", lockPath, err)
			}
			continue // taken: the non-blocking attempt above now succeeds
		}
		if w.seconds != 0 && time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("Another app is currently holding the xtables lock. Stopped waiting after %ds.", w.seconds)
		}
		time.Sleep(lockPoll)
	}
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
