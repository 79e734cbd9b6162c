package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// churnDevices creates and deletes veth pairs with addresses in ns, again
// and again, as a container host does, until the test ends (the process
// it starts is ended by pid).
func churnDevices(t *testing.T, ns string) {
	t.Helper()
	loop := `while :; do
  for i in 1 2 3 4 5 6 7 8; do
    ip link add ch$i type veth peer name ch${i}p 2>/dev/null
    ip addr add 10.252.$i.1/24 dev ch$i 2>/dev/null
    ip -6 addr add fd00:252:$i::1/64 dev ch$i nodad 2>/dev/null
    ip link set ch$i up 2>/dev/null
  done
  for i in 1 2 3 4 5 6 7 8; do ip link del ch$i 2>/dev/null; done
done`
	cmd := exec.Command("ip", "netns", "exec", ns, "sh", "-c", loop)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the device churn: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		for i := 1; i <= 8; i++ {
			_, _ = nettest.Exec(ns, "ip", "link", "del", fmt.Sprintf("ch%d", i))
		}
	})
}

// TestCommandsWhileDevicesChurn: iptables and ip6tables commands, and
// `xfw sync`, succeed while devices and addresses come and go in the
// namespace, as on a host that starts and stops containers while their
// rules are written. The kernel marks a device, address or route dump
// that a change interrupted, and a device listed may be gone when xfw
// attaches to it; neither may fail a command (they did: 4 to 6 of 40
// commands refused, "list interfaces: results may be incomplete or
// inconsistent" and "query TCX egress of ...: no such device"). The rules
// written are then all in force.
func TestCommandsWhileDevicesChurn(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	for _, fam := range []int{4, 6} {
		fw.restore(t, tp, fam, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	}
	churnDevices(t, tp.FwNS)
	const commands = 40
	failed := 0
	for i := range commands {
		cmd := "iptables"
		if i%2 == 1 {
			cmd = "ip6tables"
		}
		argv := []string{"env", "XFW_CMDSERVER=off", bin, cmd, "-w", "-A", "FORWARD", "-p", "udp", "--dport", fmt.Sprint(8100 + i), "-j", "DROP"}
		if res := execAny(t, tp.FwNS, argv...); res.ExitCode != 0 {
			failed++
			t.Errorf("%s -A (#%d) while devices change: exit %d: %s", cmd, i, res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		if i%10 == 9 {
			if res := execAny(t, tp.FwNS, bin, "sync"); res.ExitCode != 0 {
				t.Errorf("xfw sync while devices change: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
			}
		}
	}
	t.Logf("%d of %d commands failed while devices changed", failed, commands)
	// The agent's syncs and the commands it serves, in the same churn.
	_, out := startAgent(t, bin, tp)
	waitFor(t, "the agent to follow the interfaces", func() bool {
		return strings.Contains(out.String(), "following the interfaces")
	})
	for i := range 10 {
		argv := []string{"env", "XFW_CMDSERVER=only", bin, "iptables", "-w", "-A", "INPUT", "-p", "udp", "--dport", fmt.Sprint(8200 + i), "-j", "ACCEPT"}
		if res := execAny(t, tp.FwNS, argv...); res.ExitCode != 0 {
			t.Errorf("iptables -A served by the agent while devices change: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
		}
	}
	for _, bad := range []string{"sync failed", "could not be protected", "status: "} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("the agent logged %q while devices changed:\n%s", bad, out.String())
			break
		}
	}
	for fam, n := range map[int]int{4: commands / 2, 6: commands / 2} {
		if got := strings.Count(fw.save(t, tp, fam), "-j DROP"); got != n {
			t.Errorf("IPv%d: %d DROP rules in force, want %d", fam, got, n)
		}
	}
	// In force in the data plane too: the first IPv4 rule's port is
	// dropped, a port no rule names forwarded.
	if got := udpArrivals(t, tp, 8100); got != 0 {
		t.Errorf("%d of 3 datagrams to port 8100 forwarded; FORWARD drops them", got)
	}
	if got := udpArrivals(t, tp, 8099); got != 3 {
		t.Errorf("%d of 3 datagrams to port 8099 forwarded; no rule drops them", got)
	}
}
