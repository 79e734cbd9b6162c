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

// Parameters of TestSetTargetMarksRaceIpsetAdd.
const (
	// markRaceSets is how many written hash:net sets race at once (each
	// takes one of a generation's set lookups).
	markRaceSets = 8
	// markRaceRounds is how many rounds run per family (host 0x40 + r
	// adds itself in round r, so at most 63).
	markRaceRounds = 40
	// markRaceCPHost is the last byte of the host inside the control
	// plane's net (gen's subnet's first quarter: /26, /122).
	markRaceCPHost = 0x0a
)

// markRaceRules returns TestSetTargetMarksRaceIpsetAdd's ruleset: port
// 1000+i adds the source to set ri<i>, ports 2000+i and 3000+i count the
// sources that set ri<i> matches (the SET target's members and the
// control plane's).
func markRaceRules() string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := 0; i < markRaceSets; i++ {
		fmt.Fprintf(&b, "-A FORWARD -p udp -m udp --dport %d -j SET --add-set ri%d src\n", 1000+i, i)
		fmt.Fprintf(&b, "-A FORWARD -p udp -m udp --dport %d -m set --match-set ri%d src -j ACCEPT\n", 2000+i, i)
		fmt.Fprintf(&b, "-A FORWARD -p udp -m udp --dport %d -m set --match-set ri%d src -j ACCEPT\n", 3000+i, i)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// TestSetTargetMarksRaceIpsetAdd checks that a prefix length the SET
// target marks (the first member of an empty hash:net, a host) is never
// lost to an `ipset add` of another length marking its own at the same
// time: each round flushes the sets (fresh tables, no length marked),
// then one datagram per set from a new host is sent while an `ipset
// restore` adds a net of another length (the first quarter of gen's
// subnet) to every set, the datagrams spread over the command's run, a
// little later each round. Every host added must then be matched, and
// every net: a lost length would leave its member in the table unmatched
// (a ban set that no longer bans). The kernel's ipset has no such race:
// the test checks xfw alone, with counters.
func TestSetTargetMarksRaceIpsetAdd(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) { setTargetMarksRace(t, bin, fam) })
	}
}

func setTargetMarksRace(t *testing.T, bin string, fam int) {
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	silenceSink(t, tp)
	rh := newRecentHosts(tp, fam)
	ipsetCmd := ipsetRunner(t, tp, "xfw", bin)
	famName := map[int]string{4: "inet", 6: "inet6"}[fam]
	for i := 0; i < markRaceSets; i++ {
		ipsetCmd(fmt.Sprintf("create ri%d hash:net family %s", i, famName))
	}
	fw.restore(t, tp, fam, markRaceRules())
	sub := tp.GenNet4.Addr()
	if fam == 6 {
		sub = tp.GenNet6.Addr()
	}
	cpNet := netip.PrefixFrom(sub, sub.BitLen()-6) // hosts 0x40 + r are beyond it
	var flush, add strings.Builder
	for i := 0; i < markRaceSets; i++ {
		fmt.Fprintf(&flush, "flush ri%d\n", i)
		fmt.Fprintf(&add, "add ri%d %s\n", i, cpNet)
	}
	restore := func(text string) {
		res, err := nettest.ExecStdin(time.Minute, tp.FwNS, text, bin, "ipset", "restore")
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("ipset restore: %v %s", err, res)
		}
	}
	b := sub.AsSlice()
	b[len(b)-1] = markRaceCPHost
	cpHost, _ := netip.AddrFromSlice(b)
	for r := 1; r <= markRaceRounds; r++ {
		restore(flush.String())
		var wg sync.WaitGroup
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// 0 to 39 ms into the command, then 1 ms apart.
			time.Sleep(time.Duration(r%40) * time.Millisecond)
			for i := 0; i < markRaceSets; i++ {
				rh.send(t, tp, "xfw", recSend{byte(r), uint16(1000 + i), 64, 1})
				time.Sleep(time.Millisecond)
			}
		}(r)
		restore(add.String())
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
		for i := 0; i < markRaceSets; i++ {
			rh.send(t, tp, "xfw", recSend{byte(r), uint16(2000 + i), 64, 1})
			sendFrom(t, tp, rh, cpHost, uint16(3000+i))
		}
	}
	time.Sleep(200 * time.Millisecond)
	k := counters(t, fw.save(t, tp, fam))
	for i := 0; i < markRaceSets; i++ {
		for _, port := range []int{2000 + i, 3000 + i} {
			key := fmt.Sprintf("FORWARD -p udp -m udp --dport %d -m set --match-set ri%d src -j ACCEPT", port, i)
			if c, ok := k[key]; !ok || c.packets != markRaceRounds {
				t.Errorf("%s: %d packets, want %d (a member added and not matched)", key, c.packets, markRaceRounds)
			}
		}
	}
}

// sendFrom sends one datagram from src (gen's side) to the sink's port.
func sendFrom(t *testing.T, tp *nettest.Topology, rh recentHosts, src netip.Addr, port uint16) {
	l4 := nettest.UDP{SrcPort: 5000, DstPort: port, Payload: []byte("x")}
	var pkt []byte
	if rh.fam == 6 {
		pkt = nettest.IPv6{Src: src, Dst: rh.sink, HopLimit: 64}.Packet(l4)
	} else {
		pkt = nettest.IPv4{Src: src, Dst: rh.sink, TTL: 64}.Packet(l4)
	}
	injectN(t, tp, "xfw", tp.GenToFw().Frame(pkt), 1)
}
