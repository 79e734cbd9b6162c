package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestIpsetLocksItsNamespaceOnly: `xfw ipset` takes the lock of its
// network namespace, not xfw's lock of every namespace. While another
// process holds xfw's lock an ipset add in fw completes and reaches the
// packets (gen's datagrams through fw dropped); while another process
// holds fw's namespace lock, an ipset del and an `iptables -w` append in
// fw wait for it (neither fails nor runs before its release), then both
// take effect (gen's datagrams pass again, the rule is saved), and an
// append without -w fails at once with iptables' message and status 4, as
// while xfw's lock is held.
func TestIpsetLocksItsNamespaceOnly(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	const port = 7700
	if res := execAny(t, tp.FwNS, bin, "ipset", "create", "blk", "hash:ip"); res.ExitCode != 0 {
		t.Fatalf("ipset create: exit %d: %s", res.ExitCode, res.Stderr)
	}
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A FORWARD -p udp -m udp --dport 7700 -m set --match-set blk src -j DROP\nCOMMIT\n")
	if got := udpArrivals(t, tp, port); got != 3 {
		t.Fatalf("before the add: %d of 3 datagrams forwarded", got)
	}
	gen := tp.Gen.IPv4.String()

	release := holdXfwLock(t)
	// Waiting for xfw's lock, the add would end at nettest's time limit
	// (exit -1).
	res, _ := nettest.Exec(tp.FwNS, bin, "ipset", "add", "blk", gen)
	release()
	if res == nil || res.ExitCode != 0 {
		t.Fatalf("ipset add while another process holds xfw's lock: %+v", res)
	}
	if got := udpArrivals(t, tp, port); got != 0 {
		t.Errorf("after the add: %d of 3 datagrams forwarded, want 0", got)
	}

	releaseNS := holdNamespaceLock(t, tp.FwNS)
	deleted := runLater(tp.FwNS, bin, "ipset", "del", "blk", gen)
	appended := runLater(tp.FwNS, "env", "XFW_CMDSERVER=off", bin, "iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "43000", "-j", "ACCEPT")
	now := execAny(t, tp.FwNS, "env", "XFW_CMDSERVER=off", bin, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "43001", "-j", "ACCEPT")
	const busy = "Another app is currently holding the xtables lock. Perhaps you want to use the -w option?\n"
	if now.ExitCode != 4 || now.Stderr != busy {
		t.Errorf("iptables -A without -w while fw's namespace lock is held: exit %d, stderr %q", now.ExitCode, now.Stderr)
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case res := <-deleted:
		t.Errorf("ipset del ran while fw's namespace lock was held: %+v", res)
	case res := <-appended:
		t.Errorf("iptables -w -A ran while fw's namespace lock was held: %+v", res)
	default:
	}
	releaseNS()
	if res := <-deleted; res == nil || res.ExitCode != 0 {
		t.Fatalf("ipset del after the namespace lock's release: %+v", res)
	}
	if res := <-appended; res == nil || res.ExitCode != 0 {
		t.Errorf("iptables -w -A after the namespace lock's release: %+v", res)
	}
	if got := udpArrivals(t, tp, port); got != 3 {
		t.Errorf("after the del: %d of 3 datagrams forwarded, want 3", got)
	}
	if save := fw.save(t, tp, 4); !strings.Contains(save, "--dport 43000 -j ACCEPT") || strings.Contains(save, "--dport 43001") {
		t.Errorf("after the namespace lock's release (43000 waited, 43001 failed):\n%s", save)
	}
}

// runLater runs argv in namespace ns in the background; the channel gets
// its result (nil when it could not run).
func runLater(ns string, argv ...string) <-chan *nettest.Result {
	done := make(chan *nettest.Result, 1)
	go func() {
		res, _ := nettest.Exec(ns, argv...)
		done <- res
	}()
	return done
}

// holdNamespaceLock takes the lock xfw's commands of network namespace ns
// take (a flock of the namespace's nsfs file, which /run/netns/NS is) and
// returns its release, which the test's end calls too.
func holdNamespaceLock(t *testing.T, ns string) (release func()) {
	t.Helper()
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		t.Fatal(err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			unlockFile(f)
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}
