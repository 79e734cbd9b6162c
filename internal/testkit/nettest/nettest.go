package nettest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
)

var (
	requireOnce sync.Once
	requireErr  error
)

// RequireRoot fails the test (t.Fatal, never a skip) unless the process can
// build topologies: it must be root, have iproute2's ip, and run on a kernel
// with named network namespaces, veth and AF_PACKET sockets. The probe runs
// once per process, in a throwaway namespace.
func RequireRoot(t testing.TB) {
	t.Helper()
	requireOnce.Do(func() { requireErr = probe() })
	if requireErr != nil {
		t.Fatalf("nettest: this test needs root and kernel network features: %v", requireErr)
	}
}

// probe checks the requirements of RequireRoot.
func probe() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not running as root (euid %d): run the tests as root, e.g. sudo go test", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2's ip command not found (apt-get install iproute2, or run scripts/deps.sh): %w", err)
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("kernel without network namespaces: %w", err)
	}
	prefix := newPrefix(defaultBase)
	register(prefix)
	defer unregister(prefix, 0)
	name := prefix + "-probe"
	if _, err := ipCmd("netns", "add", name); err != nil {
		return fmt.Errorf("cannot create a network namespace: %w", err)
	}
	defer func() { _, _ = ipCmd("netns", "delete", name) }()
	if _, err := ipCmd("-n", name, "link", "add", "name", "probe0", "type", "veth", "peer", "name", "probe1"); err != nil {
		return fmt.Errorf("cannot create a veth pair (is the veth module available?): %w", err)
	}
	return InNamespace(name, func() error {
		fd, err := packetSocket(0)
		if err != nil {
			return fmt.Errorf("cannot open an AF_PACKET socket: %w", err)
		}
		closeFD(fd)
		if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
			return fmt.Errorf("kernel without IPv6: %w", err)
		}
		return nil
	})
}

// InNamespace runs fn on a fresh OS thread that has joined the named network
// namespace, and returns fn's error. The thread is never handed back to the
// Go scheduler: it stays locked and exits when fn returns, so no other
// goroutine ever runs in the namespace by accident. Sockets created by fn
// belong to the namespace for their whole life and may be used from any
// goroutine afterwards. A panic in fn is returned as an error. fn must be
// bounded in time: InNamespace waits for it.
func InNamespace(ns string, fn func() error) error {
	if ns == "" {
		return errors.New("nettest: InNamespace needs a namespace name (refusing to run in the current namespace)")
	}
	errc := make(chan error, 1)
	go func() {
		// Deliberately never unlocked: when this goroutine exits, the runtime
		// terminates the thread instead of reusing it.
		runtime.LockOSThread()
		errc <- runLocked(ns, fn)
	}()
	return <-errc
}

// runLocked joins ns on the current, locked thread and runs fn there.
func runLocked(ns string, fn func() error) (err error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("open network namespace %q: %w", ns, err)
	}
	defer func() { _ = h.Close() }()
	if err := netns.Set(h); err != nil {
		return fmt.Errorf("enter network namespace %q: %w", ns, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in network namespace %q: %v\n%s", ns, r, debug.Stack())
		}
	}()
	return fn()
}
