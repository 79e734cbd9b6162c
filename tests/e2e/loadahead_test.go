package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// loadedAheadLine is the agent's message for programs loaded ahead.
var loadedAheadLine = regexp.MustCompile(`programs loaded and verified ahead for the first command in \d+ ms \(xfw_xdp id (\d+)\)`)

// loadedAheadIDs returns the XDP program IDs the agent reported loaded
// ahead so far, in order.
func loadedAheadIDs(out *syncBuffer) []int {
	var ids []int
	for _, m := range loadedAheadLine.FindAllStringSubmatch(out.String(), -1) {
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, id)
	}
	return ids
}

// xdpProgramID returns the ID of the XDP program on fw's gen-side
// interface, or 0.
func xdpProgramID(t *testing.T, tp *nettest.Topology) int {
	t.Helper()
	res, err := nettest.Exec(tp.FwNS, "ip", "link", "show", "dev", tp.FwIn.Ifname)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("ip link show %s: %v %+v", tp.FwIn.Ifname, err, res)
	}
	m := regexp.MustCompile(`prog/xdp id (\d+)`).FindStringSubmatch(res.Stdout)
	if m == nil {
		return 0
	}
	id, _ := strconv.Atoi(m[1])
	return id
}

// programExists reports whether BPF program id is still loaded.
func programExists(id int) bool {
	res, err := nettest.Exec("", "bpftool", "prog", "show", "id", fmt.Sprint(id))
	return err == nil && res.ExitCode == 0
}

// TestAgentLoadsAhead: an agent serving commands in a namespace where xfw
// is not loaded loads and verifies the programs ahead; the first command
// it serves attaches those (the XDP program's ID is the one it reported)
// and the rule it added filters. After xfw stop it loads ahead again; when
// another process loads xfw instead, it gives its own programs up and
// serves the next command with the namespace's.
func TestAgentLoadsAhead(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "bpftool")
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	_, out := startAgent(t, bin, tp)
	waitFor(t, "the programs loaded ahead", func() bool { return len(loadedAheadIDs(out)) == 1 })
	ahead := loadedAheadIDs(out)[0]
	if got := xdpProgramID(t, tp); got != 0 {
		t.Fatalf("XDP program %d attached before any command (loaded ahead: %d)", got, ahead)
	}

	drop := cmdStep{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7100", "-j", "DROP"}}
	if got := runStep(t, tp.FwNS, bin, "only", drop); !strings.HasPrefix(got, "exit 0\n") {
		t.Fatalf("first served command:\n%s", got)
	}
	if got := xdpProgramID(t, tp); got != ahead {
		t.Errorf("after the first served command the XDP program is %d, want %d (loaded ahead)", got, ahead)
	}
	if n := udpArrivals(t, tp, 7100); n != 0 {
		t.Errorf("%d of 3 datagrams to port 7100 forwarded after -j DROP", n)
	}
	if n := udpArrivals(t, tp, 7101); n != 3 {
		t.Errorf("%d of 3 datagrams to port 7101 forwarded (no rule)", n)
	}

	// Stopped: loaded ahead again, different programs.
	fw.stop(t, tp)
	waitFor(t, "the programs loaded ahead again after xfw stop", func() bool { return len(loadedAheadIDs(out)) == 2 })
	again := loadedAheadIDs(out)[1]
	if again == ahead {
		t.Fatalf("loaded ahead again with the same XDP program %d", again)
	}

	// Another process loads xfw: the agent gives its own programs up.
	if got := runStep(t, tp.FwNS, bin, "off", drop); !strings.HasPrefix(got, "exit 0\n") {
		t.Fatalf("command in its own process:\n%s", got)
	}
	own := xdpProgramID(t, tp)
	if own == 0 || own == again {
		t.Fatalf("after a command in its own process the XDP program is %d (loaded ahead by the agent: %d)", own, again)
	}
	waitFor(t, "the agent to give up its programs loaded ahead", func() bool { return !programExists(again) })
	accept := cmdStep{argv: []string{"iptables", "-w", "-I", "FORWARD", "1", "-p", "udp", "--dport", "7100", "-j", "ACCEPT"}}
	if got := runStep(t, tp.FwNS, bin, "only", accept); !strings.HasPrefix(got, "exit 0\n") {
		t.Fatalf("served command after another process loaded xfw:\n%s", got)
	}
	if got := xdpProgramID(t, tp); got != own {
		t.Errorf("served command replaced the running XDP program %d with %d", own, got)
	}
	if n := udpArrivals(t, tp, 7100); n != 3 {
		t.Errorf("%d of 3 datagrams to port 7100 forwarded after -I ... ACCEPT", n)
	}
	if ids := loadedAheadIDs(out); len(ids) != 2 {
		t.Errorf("the agent loaded ahead %d times while xfw was loaded (IDs %v)", len(ids), ids)
	}
}
