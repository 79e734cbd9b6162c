package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRestoreFirstLoadFailsCleanly checks a first restore in a namespace
// while its programs load ahead (dataplane.Preload): one that fails (a
// bad line after thousands of good ones) leaves nothing behind (no XDP
// program on the namespace's interfaces, nothing to save), and the next
// one loads, attaches and saves its ruleset.
func TestRestoreFirstLoadFailsCleanly(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	const rules = 5000
	var good strings.Builder
	good.WriteString("*filter\n")
	for i := range rules {
		fmt.Fprintf(&good, "-A INPUT -s 10.%d.%d.1/32 -p tcp -m tcp --dport 22 -j ACCEPT\n", i/256, i%256)
	}
	// try's error is the exit status, judged here.
	res, _ := fw.try(tp, 4, "-restore", good.String()+"-A INPUT -j NOSUCHCHAIN\nCOMMIT\n")
	if res == nil || res.ExitCode != 2 || !strings.Contains(res.Stderr, fmt.Sprintf("line: %d", rules+2)) {
		t.Fatalf("bad restore: %v, want exit 2 at line %d", res, rules+2)
	}
	attached := func() bool {
		return strings.Contains(nettest.MustExec(t, tp.FwNS, "ip", "-d", "link", "show"), "prog/xdp")
	}
	if attached() {
		t.Fatalf("a failed first restore left an XDP program attached")
	}
	if saved := fw.save(t, tp, 4); strings.Contains(saved, "-A ") {
		t.Fatalf("a failed first restore left rules:\n%s", saved)
	}
	fw.restore(t, tp, 4, good.String()+"COMMIT\n")
	if !attached() {
		t.Fatalf("the restore after it attached no XDP program")
	}
	if n := strings.Count(fw.save(t, tp, 4), "-A INPUT "); n != rules {
		t.Fatalf("%d rules saved, want %d", n, rules)
	}
}
