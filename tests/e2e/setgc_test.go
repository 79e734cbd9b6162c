package e2e

import (
	"fmt"
	"net/netip"
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
		drainFw(t, tp)
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

// setplenRules is TestSetTargetForgetsPrefixLengths' ruleset: port 1
// adds the source to hash:net n, port 3 deletes it, port 2 counts n's
// members.
const setplenRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 1 -j SET --add-set n src
-A FORWARD -p udp -m udp --dport 3 -j SET --del-set n src
-A FORWARD -p udp -m udp --dport 2 -m set --match-set n src -j ACCEPT
COMMIT
`

// TestSetTargetForgetsPrefixLengths checks, against the kernel's xt_SET
// and ipset, that a hash:net forgets a prefix length with its last
// element (the kernel's nets[] counts), whether `ipset del` or the SET
// target deleted it: the SET target's elements take the longest length
// still present, the host length when none is. The hosts' /28 (/124) is
// added, a /30 (/126) elsewhere added and deleted by ipset (H1 then adds
// nothing new: its /28 is there), H1's --del-set deletes the /28, and H2
// is then added as a host.
func TestSetTargetForgetsPrefixLengths(t *testing.T) {
	eachFamily(t, setTargetForgetsPrefixLengths)
}

func setTargetForgetsPrefixLengths(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	members := map[string][]string{}
	var mu sync.Mutex
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName, hostBits, other := "inet", 4, "203.0.113.4/30"
		if fam == 6 {
			famName, other = "inet6", "2001:db8:ffff::4/126"
		}
		ipsetCmd("create n hash:net family " + famName)
		fw.restore(t, tp, fam, rh.rules(setplenRules))
		hostNet := netip.PrefixFrom(rh.host(1), rh.host(1).BitLen()-hostBits).Masked().String()
		ipsetCmd("add n " + hostNet)
		ipsetCmd("add n " + other)
		ipsetCmd("del n " + other)
		rh.send(t, tp, kind, recSend{1, 1, 64, 1}) // its /28: there already
		rh.send(t, tp, kind, recSend{1, 3, 64, 1}) // the /28 deleted
		rh.send(t, tp, kind, recSend{2, 1, 64, 1}) // H2 itself added
		for h := byte(1); h <= 3; h++ {
			rh.send(t, tp, kind, recSend{h, 2, 64, 1}) // H2 only
		}
		drainFw(t, tp)
		record(nameHosts(fw.save(t, tp, fam), rh.host, 7))
		m := setjMembers(t, tp, kind, bin, func(s string) string {
			return strings.ReplaceAll(nameHosts(s, rh.host, 7), hostNet, "@N")
		})
		mu.Lock()
		members[kind] = m
		mu.Unlock()
	})
	k := compareRounds(t, results, ":OUTPUT", ":INPUT")
	if strings.Join(members["kernel"], "\n") != strings.Join(members["xfw"], "\n") {
		t.Errorf("members differ:\nkernel %q\nxfw    %q", members["kernel"], members["xfw"])
	}
	if want := []string{"add n @H2"}; fmt.Sprint(members["kernel"]) != fmt.Sprint(want) {
		t.Errorf("kernel members %q, want %q", members["kernel"], want)
	}
	for key, kc := range k[0] {
		if strings.Contains(key, "--match-set n src -j ACCEPT") && kc.packets != 1 {
			t.Errorf("kernel: %s: %d packets, want 1", key, kc.packets)
		}
	}
}

// setwinRules is TestSetTargetKeepsAddsDuringReload's ruleset: every
// datagram to ports 10000-19999 adds its source and port to w.
const setwinRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 10000:19999 -j SET --add-set w src,dst
COMMIT
`

// setwinSends is how many datagrams (each a member of its own) H1 sends
// while the restore runs.
const setwinSends = 300

// TestSetTargetKeepsAddsDuringReload checks, against the kernel's xt_SET
// and ipset, that members the SET target adds while an `ipset restore`
// reloads the rules (1,100 members added to the written set itself: too
// many to patch, so xfw builds its table afresh) are all kept: H1 sends
// to a new port every few milliseconds before, while and after the
// restore runs, and the members must be the kernel's, H1's and the
// restored ones.
func TestSetTargetKeepsAddsDuringReload(t *testing.T) {
	eachFamily(t, setTargetKeepsAddsDuringReload)
}

func setTargetKeepsAddsDuringReload(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	members := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName := map[int]string{4: "inet", 6: "inet6"}[fam]
		ipsetCmd("create w hash:ip,port family " + famName)
		fw.restore(t, tp, fam, rh.rules(setwinRules))
		var restore strings.Builder
		for i := 0; i < 1100; i++ {
			fmt.Fprintf(&restore, "add w %s,udp:%d\n", rh.host(2), 20000+i)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < setwinSends; i++ {
				l4 := nettest.UDP{SrcPort: 5000, DstPort: uint16(10000 + i), Payload: []byte("x")}
				var pkt []byte
				if fam == 6 {
					pkt = nettest.IPv6{Src: rh.host(1), Dst: rh.sink, HopLimit: 64}.Packet(l4)
				} else {
					pkt = nettest.IPv4{Src: rh.host(1), Dst: rh.sink, TTL: 64}.Packet(l4)
				}
				if err := tp.InjectFromGen(tp.GenToFw().Frame(pkt)); err != nil {
					t.Errorf("%s: inject: %v", kind, err)
					return
				}
				time.Sleep(3 * time.Millisecond)
			}
		}()
		time.Sleep(100 * time.Millisecond)
		argv := []string{"ipset", "restore"}
		if kind == "xfw" {
			argv = append([]string{bin}, argv...)
		}
		if res, err := nettest.ExecStdin(time.Minute, tp.FwNS, restore.String(), argv...); err != nil || res.ExitCode != 0 {
			t.Errorf("%s: ipset restore: %v %s", kind, err, res)
		}
		<-done
		drainFw(t, tp)
		m := setjMembers(t, tp, kind, bin, func(s string) string { return nameHosts(s, rh.host, 7) })
		mu.Lock()
		members[kind] = m
		mu.Unlock()
	})
	count := func(list []string, host string) int {
		n := 0
		for _, l := range list {
			if strings.HasPrefix(l, "add w "+host+",") {
				n++
			}
		}
		return n
	}
	for _, kind := range []string{"kernel", "xfw"} {
		if h1, h2 := count(members[kind], "@H1"), count(members[kind], "@H2"); h1 != setwinSends || h2 != 1100 {
			t.Errorf("%s: %d members of H1 (want %d), %d of H2 (want 1100)", kind, h1, setwinSends, h2)
		}
	}
	if strings.Join(members["kernel"], "\n") != strings.Join(members["xfw"], "\n") {
		t.Errorf("members differ: kernel %d, xfw %d", len(members["kernel"]), len(members["xfw"]))
	}
}
