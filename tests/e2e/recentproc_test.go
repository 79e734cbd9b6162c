package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The recent lists' files (/proc/net/xt_recent/NAME) of the kernel and
// `xfw recent NAME`, driven alike in twin topologies.

// recentFiles is a twin's way to the recent lists: the kernel's proc
// files or xfw recent.
type recentFiles struct {
	fw firewall
	tp *nettest.Topology
}

// write writes text to list (one write, as echo does) and says whether it
// succeeded; viaStdin has xfw read it from its standard input.
func (f recentFiles) write(t *testing.T, list, text string, viaStdin bool) bool {
	t.Helper()
	var res *nettest.Result
	var err error
	switch {
	case f.fw.kind == "kernel":
		res, err = nettest.ExecStdin(nettest.DefaultExecTimeout, f.tp.FwNS, text, "sh", "-c", `cat > "/proc/net/xt_recent/$0"`, list)
	case viaStdin:
		res, err = nettest.ExecStdin(nettest.DefaultExecTimeout, f.tp.FwNS, text, f.fw.bin, "recent", list, "-")
	default:
		res, err = nettest.Exec(f.tp.FwNS, f.fw.bin, "recent", list, strings.TrimSuffix(text, "\n"))
	}
	if err != nil && res == nil {
		t.Fatalf("%s: write %q to %s: %v", f.fw.kind, text, list, err)
	}
	return res.ExitCode == 0
}

// read returns list's entries, and whether the list exists.
func (f recentFiles) read(t *testing.T, list string) (string, bool) {
	t.Helper()
	argv := []string{"cat", "/proc/net/xt_recent/" + list}
	if f.fw.kind == "xfw" {
		argv = []string{f.fw.bin, "recent", list}
	}
	res, err := nettest.Exec(f.tp.FwNS, argv...)
	if err != nil && res == nil {
		t.Fatalf("%s: read %s: %v", f.fw.kind, list, err)
	}
	return res.Stdout, res.ExitCode == 0
}

// recentListing normalises a list's entries for comparison: hosts by
// name (named), jiffies left out (their count kept), sorted (the
// kernel lists in hash order, xfw from least recently stamped).
func recentListing(t *testing.T, text string, named func(netip.Addr) string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		// src=ADDR ttl: T last_seen: J oldest_pkt: K J, J, …
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[0], "src=") || f[1] != "ttl:" || f[3] != "last_seen:" || f[5] != "oldest_pkt:" {
			t.Errorf("entry line %q is not recent_seq_show's", line)
			continue
		}
		addr, err := netip.ParseAddr(strings.TrimPrefix(f[0], "src="))
		if err != nil {
			t.Errorf("entry line %q: %v", line, err)
			continue
		}
		out = append(out, fmt.Sprintf("src=%s ttl: %s oldest_pkt: %s stamps: %d", named(addr), f[2], f[6], len(f)-7))
	}
	slices.Sort(out)
	return out
}

// recProcRules is TestRecentFilesAgainstKernel's ruleset: dport 1 puts
// the source on list proc, dport 2 passes the sources the list has.
const recProcRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 1 -m recent --set --name proc
-A FORWARD -p udp -m udp --dport 2 -m recent --rcheck --name proc -j ACCEPT
-A FORWARD -p udp -m udp --dport 2 -j DROP
COMMIT
`

// recProcStep is one step of the test: a write to list proc (ok: whether
// it must succeed in both), a read of list (into the transcript), or
// datagrams from hosts to dport.
type recProcStep struct {
	write    string
	stdin    bool
	read     string
	hosts    []byte
	dport    uint16
	describe string
}

// recProcSteps are the test's steps ("@Hn" in a write is host n).
var recProcSteps = []recProcStep{
	{hosts: []byte{1}, dport: 1, describe: "host 1 listed by a packet"},
	{write: "+@H2\n", describe: "add"},
	{write: "+@H2\n", describe: "stamp again"},
	{write: "+@H3\n", stdin: true, describe: "add, from standard input"},
	{read: "proc"},
	{hosts: []byte{1, 2, 3, 4}, dport: 2, describe: "1 to 3 pass"},
	{write: "-@H2\n", describe: "remove"},
	{write: "-@H4\n", describe: "remove an address not listed"},
	{read: "proc"},
	{hosts: []byte{1, 2, 3, 4}, dport: 2, describe: "1 and 3 pass"},
	{write: "/\n", describe: "flush"},
	{read: "proc"},
	{hosts: []byte{1, 2, 3, 4}, dport: 2, describe: "none passes"},
	{write: "+@H4\n+@H1\n", describe: "only the first line counts"},
	{write: "+1.2.3\n", describe: "bad address"},
	{write: "x\n", describe: "bad command"},
	{write: "+@H1 \n", describe: "trailing blank"},
	{read: "proc"},
	{read: "nosuchlist"},
	{hosts: []byte{1, 2, 3, 4}, dport: 2, describe: "4 passes"},
}

// TestRecentFilesAgainstKernel drives a recent list through
// /proc/net/xt_recent/NAME in the kernel's twin and `xfw recent NAME` in
// xfw's (adds, a second stamp, removes, a flush, a write of two lines,
// bad writes, a list that does not exist), and compares each write's
// success, the listings (jiffies left out) and the traffic the list then
// lets through, in both families.
func TestRecentFilesAgainstKernel(t *testing.T) {
	eachFamily(t, recentFilesAgainstKernel)
}

func recentFilesAgainstKernel(t *testing.T, bin string, fam int) {
	recentProcTwins(t, bin, fam, func(kind string, tp *nettest.Topology, fw firewall, rh recentHosts, record twinRecorder, note func(...string)) {
		files := recentFiles{fw: fw, tp: tp}
		named := hostNamer(rh.host, 4)
		for i, s := range recProcSteps {
			switch {
			case s.read != "":
				text, ok := files.read(t, s.read)
				note(fmt.Sprintf("step %d: read %s: exists %v", i+1, s.read, ok))
				note(recentListing(t, text, named)...)
			case s.hosts != nil:
				for _, h := range s.hosts {
					rh.send(t, tp, kind, recSend{h, s.dport, 64, 1})
				}
				drainFw(t, tp)
				record(nameHosts(fw.save(t, tp, fam), rh.host, 4))
			default:
				ok := files.write(t, "proc", rh.rules(s.write), s.stdin)
				note(fmt.Sprintf("step %d: %s: success %v", i+1, s.describe, ok))
			}
		}
	})
}

// recentProcTwins runs fn in twins loaded with recProcRules, fn recording
// rounds of counters and noting lines of what it reads, and compares
// both; it returns the kernel's rounds.
func recentProcTwins(t *testing.T, bin string, fam int, fn func(kind string, tp *nettest.Topology, fw firewall, rh recentHosts, record twinRecorder, note func(...string))) []map[string]counter {
	tw := newTwins(t, bin)
	var mu sync.Mutex
	notes := map[string][]string{}
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		fw.restore(t, tp, fam, recProcRules)
		fn(kind, tp, fw, newRecentHosts(tp, fam), record, func(lines ...string) {
			mu.Lock()
			defer mu.Unlock()
			notes[kind] = append(notes[kind], lines...)
		})
	})
	k := compareRounds(t, results, ":INPUT", ":OUTPUT")
	if kn, xn := notes["kernel"], notes["xfw"]; !slices.Equal(kn, xn) {
		t.Errorf("recent lists differ:\nkernel:\n  %s\nxfw:\n  %s", strings.Join(kn, "\n  "), strings.Join(xn, "\n  "))
	}
	return k
}

// hostNamer returns a function naming hosts 1 to n of host "@Hn" and
// other addresses as they are.
func hostNamer(host func(byte) netip.Addr, n byte) func(netip.Addr) string {
	names := map[netip.Addr]string{}
	for h := byte(1); h <= n; h++ {
		names[host(h)] = fmt.Sprintf("@H%d", h)
	}
	return func(a netip.Addr) string {
		if name, ok := names[a]; ok {
			return name
		}
		return a.String()
	}
}

// TestRecentEvictionAgainstKernel fills a recent list to the kernel's
// ip_list_tot (100 addresses) with packets, stamps the first address
// again, and adds a 101st by a packet and a 102nd through the list's file:
// each evicts the least recently stamped entry (hosts 2, then 3). The
// listings and the traffic the list lets through are compared with the
// kernel's, in both families.
func TestRecentEvictionAgainstKernel(t *testing.T) {
	eachFamily(t, recentEvictionAgainstKernel)
}

// recListTot is the kernel's ip_list_tot: the entries a list keeps.
const recListTot = 100

func recentEvictionAgainstKernel(t *testing.T, bin string, fam int) {
	k := recentProcTwins(t, bin, fam, func(kind string, tp *nettest.Topology, fw firewall, rh recentHosts, record twinRecorder, note func(...string)) {
		for h := byte(1); h <= recListTot; h++ {
			rh.send(t, tp, kind, recSend{h, 1, 64, 1})
		}
		rh.send(t, tp, kind, recSend{1, 1, 64, 1})              // host 1 most recent again
		rh.send(t, tp, kind, recSend{recListTot + 1, 1, 64, 1}) // evicts host 2
		files := recentFiles{fw: fw, tp: tp}
		if !files.write(t, "proc", "+"+rh.host(recListTot+2).String()+"\n", false) { // evicts host 3
			t.Errorf("%s: adding host %d failed", kind, recListTot+2)
		}
		text, _ := files.read(t, "proc")
		note(recentListing(t, text, hostNamer(rh.host, recListTot+2))...)
		for _, h := range []byte{1, 2, 3, 4, recListTot + 1, recListTot + 2} {
			rh.send(t, tp, kind, recSend{h, 2, 64, 1})
		}
		drainFw(t, tp)
		record(fw.save(t, tp, fam))
	})
	// The kernel's own answers show the evictions: hosts 1, 4, 101 and
	// 102 pass, 2 and 3 are gone.
	key := "FORWARD -p udp -m udp --dport 2 -m recent --rcheck --name proc --mask " + map[int]string{4: "255.255.255.255", 6: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}[fam] + " --rsource -j ACCEPT"
	if len(k) == 1 && k[0][key].packets != 4 {
		t.Errorf("kernel: %s: %d packets, want 4", key, k[0][key].packets)
	}
}
