package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestMovedInterfacePasses moves a veth end that runs xfw's programs out
// of fw's namespace (as Docker moves a container's end into the
// container, bpf/netns.h): there its packets are not judged by fw's
// rulesets. fw's OUTPUT drops everything from the moved end's address,
// which only the other namespace sends: its ping to fw must be answered.
func TestMovedInterfacePasses(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "mv0", "type", "veth", "peer", "name", "mv1")
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A OUTPUT -s 10.250.0.2/32 -j DROP\nCOMMIT\n")
	if out := nettest.MustExec(t, tp.FwNS, "ip", "-d", "link", "show", "mv1"); !strings.Contains(out, "prog/xdp") {
		t.Fatalf("xfw did not attach to mv1 before the move (the test's premise):\n%s", out)
	}
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "mv1", "netns", tp.SinkNS)
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", "10.250.0.1/30", "dev", "mv0")
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "mv0", "up")
	nettest.MustExec(t, tp.SinkNS, "ip", "addr", "add", "10.250.0.2/30", "dev", "mv1")
	nettest.MustExec(t, tp.SinkNS, "ip", "link", "set", "mv1", "up")
	if out := nettest.MustExec(t, tp.SinkNS, "ip", "-d", "link", "show", "mv1"); !strings.Contains(out, "prog/xdp") {
		t.Fatalf("mv1 lost xfw's program in the move (the test's premise):\n%s", out)
	}
	// mv0 is attached at the next command, as any new interface.
	nettest.MustExec(t, tp.FwNS, bin, "sync")
	// The new link's first exchange resolves fw's address: an ARP
	// request lost while the link comes up is repeated only a second
	// later, so the answer gets 10 s, not the usual 2 (a judged drop
	// never answers, however long the wait).
	a := nettest.Ping(tp.SinkNS, netip.MustParseAddr("10.250.0.1"), nettest.WithTimeout(10*time.Second))
	if a.Outcome != nettest.OK {
		t.Errorf("ping from the moved end's namespace: %s (%v), want an answer: fw's OUTPUT judged it", a.Outcome, a.Err)
	}
}
