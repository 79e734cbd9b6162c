package e2e

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestCommandAdmitsToGuard: a command that attaches xfw's programs to an
// interface admits it to the guard before it returns, so the traffic its
// rules accept flows at once, not from the agent's next look. The agent
// (its guard pinned in a bpffs of the test's own) is stopped with SIGSTOP,
// an interface is added (the guard drops its traffic), and a command run
// in its own process attaches to it: only the command itself can admit
// it. Without the admission the guard drops every datagram until the
// agent runs again.
func TestCommandAdmitsToGuard(t *testing.T) {
	nettest.RequireRoot(t)
	pins := mountBPFFS(t)
	t.Setenv("XFW_BPFFS", pins)
	bin, tp := hotplugTopology(t)
	cmd, out := startAgent(t, bin, tp, "--no-commands")
	waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT) }) // before startAgent's SIGTERM
	addHotplugLink(t, tp, 1)
	dropped := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7200))
	allowed := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7201))
	send := func() {
		for range 3 {
			for _, port := range []uint16{7200, 7201} {
				nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(hotplugTarget, port), []byte("x"))
			}
		}
	}
	send()
	if d, a := len(dropped.Wait(1, arrivalWait)), len(allowed.Wait(1, arrivalWait)); d+a != 0 {
		t.Fatalf("the new interface carried %d and %d datagrams before any xfw program ran on it; want none (the guard)", d, a)
	}
	res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, "", "env", "XFW_CMDSERVER=off", bin, "iptables", "-w", "-A", "INPUT", "-p", "udp", "--dport", "7202", "-j", "DROP")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("iptables -A: exit %d, %v\n%s", res.ExitCode, err, res.Stderr)
	}
	send()
	if d, a := len(dropped.Wait(1, arrivalWait)), len(allowed.Wait(3, arrivalWait)); d != 0 || a != 3 {
		t.Errorf("right after the command attached to the new interface, with the agent stopped: %d datagrams to the dropped port, %d of 3 to the accepted one; want 0 and 3 (the command admits what it attached)", d, a)
	}
}
