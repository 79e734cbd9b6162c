package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// limitTablesRules has a burst-2 limit (no token comes back within the
// test) and an nth match (every second datagram) in filter INPUT and in
// mangle PREROUTING, each counting the datagrams to 5601 it lets through.
const limitTablesRules = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p udp -m udp --dport 5601 -m limit --limit 1/hour --limit-burst 2
-A PREROUTING -p udp -m udp --dport 5601 -m statistic --mode nth --every 2 --packet 0
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 5601 -m limit --limit 1/hour --limit-burst 2
-A INPUT -p udp -m udp --dport 5601 -m statistic --mode nth --every 2 --packet 0
COMMIT
`

// TestLimitOtherTableAgainstKernel checks that a command committing one
// table leaves the limit buckets and nth counters of the others as they
// are, as the kernel's iptables replaces only the table it commits: three
// datagrams empty both buckets; a rule appended to mangle fills mangle's
// bucket again and restarts its nth counter, and leaves filter's as they
// are; one appended to filter the other way round.
// Each step sends three datagrams; the rules' counters must be the
// kernel's after each.
func TestLimitOtherTableAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy")
	tw := newTwins(t, xfwPath(t))
	rules := map[string]string{
		"filter":     "INPUT -p udp -m udp --dport 5601 -m limit --limit 1/hour --limit-burst 2",
		"mangle":     "PREROUTING -p udp -m udp --dport 5601 -m limit --limit 1/hour --limit-burst 2",
		"filter nth": "INPUT -p udp -m udp --dport 5601 -m statistic --mode nth --every 2 --packet 0",
		"mangle nth": "PREROUTING -p udp -m udp --dport 5601 -m statistic --mode nth --every 2 --packet 0",
	}
	steps := []struct {
		name    string
		command []string // appended to iptables (nil: none)
		want    map[string]uint64
	}{
		// nth: the first and third datagram after a restart, the
		// second of the next three when going on.
		{"load", nil, map[string]uint64{"filter": 2, "mangle": 2, "filter nth": 2, "mangle nth": 2}},
		{"mangle -A", []string{"-t", "mangle", "-A", "PREROUTING", "-p", "udp", "--dport", "5699"},
			map[string]uint64{"filter": 2, "mangle": 4, "filter nth": 3, "mangle nth": 4}},
		{"filter -A", []string{"-A", "INPUT", "-p", "udp", "--dport", "5698"},
			map[string]uint64{"filter": 4, "mangle": 4, "filter nth": 5, "mangle nth": 5}},
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, limitTablesRules)
	})
	for _, st := range steps {
		got := map[string]map[string]uint64{}
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			if st.command != nil {
				argv := append(fw.cmd(4, ""), append([]string{"-w", lockWait}, st.command...)...)
				nettest.MustExec(t, tp.FwNS, argv...)
			}
			for i := 0; i < 3; i++ {
				if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.FwIn.IPv4, 5601), []byte("lim")); a.Outcome != nettest.OK {
					t.Errorf("%s: send to fw:5601: %v", kind, a)
				}
			}
		})
		for kind, tp := range tw.tps {
			got[kind] = map[string]uint64{}
			for name, rule := range rules {
				table, _, _ := strings.Cut(name, " ")
				argv := append(tw.fws[kind].cmd(4, "-save"), "-c", "-t", table)
				res := nettest.MustExec(t, tp.FwNS, argv...)
				got[kind][name] = counters(t, res)[rule].packets
			}
		}
		for table, want := range st.want {
			if got["kernel"][table] != want {
				t.Errorf("%s: kernel's %s rule counted %d, want %d (premise)", st.name, table, got["kernel"][table], want)
			}
			if got["xfw"][table] != got["kernel"][table] {
				t.Errorf("%s: xfw's %s rule counted %d, the kernel's %d", st.name, table, got["xfw"][table], got["kernel"][table])
			}
		}
	}
}
