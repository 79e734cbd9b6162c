package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// setgcRules is TestSetTargetFullSetCollects' ruleset (recentHosts'
// @Hn): port 1 adds the source for a second, port 3 for the set's
// default (600 s), port 2 counts the members.
const setgcRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 1 -j SET --add-set gc src --timeout 1
-A FORWARD -p udp -m udp --dport 3 -j SET --add-set gc src
-A FORWARD -p udp -m udp --dport 2 -m set --match-set gc src -j ACCEPT
COMMIT
`

// TestSetTargetFullSetCollects checks, against the kernel's xt_SET and
// ipset, that a full set (maxelem 2) whose members have expired takes new
// members from the SET target (the kernel collects expired elements, by
// its periodic collection or when an add finds the set full), and that a
// set full of live members still refuses one: H1 and H2 added for a
// second, then after they expire H3 and H4 added and H5 refused; the
// members and the counters must agree.
func TestSetTargetFullSetCollects(t *testing.T) {
	eachFamily(t, setTargetFullSetCollects)
}

func setTargetFullSetCollects(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	members := map[string][]string{}
	var mu sync.Mutex
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName := map[int]string{4: "inet", 6: "inet6"}[fam]
		ipsetCmd("create gc hash:ip timeout 600 maxelem 2 family " + famName)
		fw.restore(t, tp, fam, rh.rules(setgcRules))
		for h := byte(1); h <= 2; h++ {
			rh.send(t, tp, kind, recSend{h, 1, 64, 1})
		}
		// Both expire (and the kernel's collection, every second for
		// this timeout, may run meanwhile).
		time.Sleep(2500 * time.Millisecond)
		for h := byte(3); h <= 5; h++ {
			rh.send(t, tp, kind, recSend{h, 3, 64, 1})
		}
		for h := byte(1); h <= 5; h++ {
			rh.send(t, tp, kind, recSend{h, 2, 64, 1})
		}
		time.Sleep(200 * time.Millisecond)
		record(nameHosts(fw.save(t, tp, fam), rh.host, 7))
		m := setjMembers(t, tp, kind, bin, func(s string) string { return nameHosts(s, rh.host, 7) })
		mu.Lock()
		members[kind] = m
		mu.Unlock()
	})
	k := compareRounds(t, results, ":OUTPUT", ":INPUT")
	if strings.Join(members["kernel"], "\n") != strings.Join(members["xfw"], "\n") {
		t.Errorf("members differ:\nkernel %q\nxfw    %q", members["kernel"], members["xfw"])
	}
	if want := []string{"add gc @H3 long", "add gc @H4 long"}; fmt.Sprint(members["kernel"]) != fmt.Sprint(want) {
		t.Errorf("kernel members %q, want %q", members["kernel"], want)
	}
	for key, kc := range k[0] {
		if strings.Contains(key, "--match-set gc src -j ACCEPT") && kc.packets != 2 {
			t.Errorf("kernel: %s: %d packets, want 2", key, kc.packets)
		}
	}
}
