// Package nettest builds real network topologies in network namespaces for Go
// tests and sends real packets through them.
//
// A Topology is three namespaces, gen, fw and sink, joined by veth pairs
// gen<->fw and fw<->sink, with IPv4 and IPv6 addresses and routes so that gen
// reaches sink through fw, which forwards. Tests attach the firewall to fw and
// observe what crosses it:
//
//   - Exec and Run run commands inside a namespace (ip netns exec);
//   - InNamespace runs Go code inside a namespace on a dedicated OS thread;
//   - Inject sends hand-made Ethernet frames out of an interface (AF_PACKET),
//     built with Ethernet, IPv4, IPv6, TCP, UDP, ICMPv4, ICMPv6 and the
//     fragment helpers, so tests can craft fragments, options, extension
//     headers, VLAN tags, odd TCP flags and truncated packets;
//   - StartCapture records the frames seen on an interface, parsed by Parse;
//   - StartUDPServer, StartTCPServer, TCPConnect, UDPSend and Ping exercise
//     the kernel's sockets from inside a namespace and report outcomes such as
//     refused, not permitted (an OUTPUT drop) and timed out.
//
// Safety: nothing here touches the namespace the test process runs in. Every
// namespace is created by New with a name of the form
// "<base>-<pid>-<random>-<role>", deleted by t.Cleanup (which also runs when a
// test panics), and namespaces left behind by processes that died are removed
// by CleanupStale, which New calls once per base and process. All waits are bounded.
//
// The tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2's ip, and a
// kernel with network namespaces, veth and AF_PACKET; RequireRoot fails the
// test with a clear message when any is missing.
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
