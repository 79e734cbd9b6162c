package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// xdpModeRules accepts INPUT datagrams to port 7200 and drops those to
// 7201; FORWARD drops port 7100 (protectRules' rule).
const xdpModeRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A INPUT -p udp -m udp --dport 7201 -j DROP\n" +
	"-A FORWARD -p udp -m udp --dport 7100 -j DROP\nCOMMIT\n"

// TestXDPModeVethGeneric: --xdp-mode veth-generic attaches xfw_xdp in
// generic mode to fw's veth devices (and loopback, as auto does), and the
// verdicts are the same: INPUT delivers and drops by the rules, FORWARD
// drops port 7100 and forwards the rest, the rule counters count them.
func TestXDPModeVethGeneric(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, xdpModeRules, bin, "--xdp-mode", "veth-generic", "iptables-restore", "-w", lockWait)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("restore (XDP mode veth-generic): %v %v", err, res)
	}
	for _, ifname := range []string{tp.FwIn.Ifname, tp.FwOut.Ifname} {
		out := nettest.MustExec(t, tp.FwNS, "ip", "link", "show", "dev", ifname)
		if !strings.Contains(out, "xdpgeneric") {
			t.Errorf("%s: xfw_xdp not attached in generic mode:\n%s", ifname, out)
		}
	}
	if st := status(t, bin, tp); st.ExitCode != 0 || !strings.Contains(st.Stdout, "generic") {
		t.Errorf("xfw status: exit %d, want 0 with generic XDP\n%s", st.ExitCode, st.Stdout)
	}
	// INPUT: to fw's address on its gen side.
	for port, want := range map[uint16]int{7200: 3, 7201: 0} {
		dst := netip.AddrPortFrom(tp.FwIn.IPv4, port)
		srv := nettest.StartUDPServer(t, tp.FwNS, dst)
		for i := 0; i < 3; i++ {
			nettest.UDPSend(tp.GenNS, dst, []byte("x"))
		}
		if got := len(srv.Wait(want, arrivalWait)); got != want {
			t.Errorf("INPUT to port %d: %d of 3 datagrams delivered, want %d", port, got, want)
		}
		srv.Close()
	}
	if got := forwardedTo(t, tp, 7100, 3); got != 0 {
		t.Errorf("FORWARD to port 7100: %d of 3 datagrams forwarded, want 0", got)
	}
	if got := forwardedTo(t, tp, 7101, 3); got != 3 {
		t.Errorf("FORWARD to port 7101: %d of 3 datagrams forwarded, want 3", got)
	}
	save := nettest.MustExec(t, tp.FwNS, bin, "iptables-save", "-c")
	for _, want := range []string{"[3:87] -A INPUT -p udp -m udp --dport 7201 -j DROP", "[3:87] -A FORWARD -p udp -m udp --dport 7100 -j DROP"} {
		if !strings.Contains(save, want) {
			t.Errorf("iptables-save -c lacks %q:\n%s", want, save)
		}
	}
}

// TestGuardPassesGenericVeth: with xfw_xdp attached generically to fw's
// veth devices (--xdp-mode generic, veth-generic), the agent's guard
// passes their traffic: it finds the program by the device's generic
// pointer, not only by the veth's own native one (a guard that asked only
// the latter dropped every packet). FORWARD still drops port 7100.
func TestGuardPassesGenericVeth(t *testing.T) {
	nettest.RequireRoot(t)
	for _, mode := range []string{"generic", "veth-generic"} {
		t.Run(mode, func(t *testing.T) {
			bin := xfwPath(t)
			tp := nettest.New(t, nettest.WithStaticNeighbors())
			fw := firewall{kind: "xfw", bin: bin}
			t.Cleanup(func() { fw.stop(t, tp) })
			res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, protectRules, bin, "--xdp-mode", mode, "iptables-restore", "-w", lockWait)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("restore (XDP mode %s): %v %v", mode, err, res)
			}
			t.Setenv("XFW_XDP_MODE", mode) // the agent's attachments too
			_, out := startAgent(t, bin, tp)
			waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
			if got := forwardedTo(t, tp, 7101, 3); got != 3 {
				t.Errorf("%d of 3 datagrams to port 7101 forwarded with the guard on, want 3", got)
			}
			if got := forwardedTo7100(t, tp, 3); got != 0 {
				t.Errorf("%d of 3 datagrams to port 7100 forwarded, want 0", got)
			}
		})
	}
}
