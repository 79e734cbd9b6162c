package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestAgentReattachesDetachedTCX: a TCX program detached from an interface
// sends no netlink event; the agent's periodic check, which stops at an
// unchanged fingerprint of the attachments once everything is in order,
// still notices (the program ids on the hooks are in the fingerprint) and
// puts back xfw's egress and ingress programs, each within a few --poll.
// Run with the agent serving commands, where the link list comes from the
// netlink watch and is not dumped again while no link changes.
func TestAgentReattachesDetachedTCX(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, protectRules)
	_, out := startAgent(t, bin, tp)
	waitFor(t, "the agent's first check", func() bool { return strings.Contains(out.String(), "following the interfaces") })
	// Several checks find everything in order: the next ones stop at the
	// fingerprint.
	time.Sleep(500 * time.Millisecond)

	for i, c := range []struct {
		ifname string
		hook   ebpf.AttachType
	}{{nettest.FwOutIfname, ebpf.AttachTCXEgress}, {nettest.FwInIfname, ebpf.AttachTCXIngress}} {
		before := strings.Count(out.String(), "re-attached to "+c.ifname)
		detachTCX(t, tp.FwNS, c.ifname, c.hook)
		waitFor(t, "the agent to re-attach to "+c.ifname, func() bool {
			return strings.Count(out.String(), "re-attached to "+c.ifname) > before
		})
		if res := status(t, bin, tp); res.ExitCode != 0 {
			t.Errorf("detach %d: xfw status after the agent's re-attach: exit %d\n%s", i, res.ExitCode, res.Stdout)
		}
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to port 7100 forwarded after the re-attaches", got)
	}
}

// detachTCX detaches the programs on ifname's TCX hook in ns (xfw's are
// attached without a link: a detach by program, which no netlink event
// announces).
func detachTCX(t *testing.T, ns, ifname string, hook ebpf.AttachType) {
	t.Helper()
	err := nettest.InNamespace(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: hook})
		if err != nil {
			return err
		}
		if len(res.Programs) == 0 {
			t.Fatalf("no program on %s's %v hook to detach", ifname, hook)
		}
		for _, p := range res.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				return err
			}
			err = link.RawDetachProgram(link.RawDetachProgramOptions{Target: l.Attrs().Index, Program: prog, Attach: hook})
			prog.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("detach %s's %v programs: %v", ifname, hook, err)
	}
}

// TestAgentClosesRemovedDevicesSysctls: the agent reads every device's
// input sysctls each second through descriptors it keeps open; a device
// removed takes its sysctls with it, and the agent closes their
// descriptors (a host where containers come and go would otherwise pile
// them up): the end of the session in which it mirrors the changed input
// sysctls does. Without commands served, no command's session does.
func TestAgentClosesRemovedDevicesSysctls(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, protectRules)
	cmd, out := startAgent(t, bin, tp, "--no-commands")
	waitFor(t, "the agent's first check", func() bool { return strings.Contains(out.String(), "following the interfaces") })
	pid := cmd.Process.Pid // ip netns exec execs the agent
	const dev = "idlex0"
	held := func() int {
		n := 0
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if p, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.Contains(p, "/conf/"+dev+"/") {
				n++
			}
		}
		return n
	}
	nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "name", dev, "type", "veth", "peer", "name", "idlex1")
	waitFor(t, "the agent to read "+dev+"'s sysctls", func() bool { return held() > 0 })
	nettest.MustExec(t, tp.FwNS, "ip", "link", "del", "dev", dev)
	waitForOr(t, "the agent to close "+dev+"'s sysctls", func() bool { return held() == 0 }, func() {
		t.Logf("%d descriptors of %s's sysctls still open", held(), dev)
	})
}
