package e2e

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestPolicyCountersAgainstKernel sends the same pings through both twins
// between commands and compares the built-in chains' policy counters
// after each: iptables-legacy's libiptc writes them back as zero whenever a
// command commits the table (-A, -I, -D, -N, -P, restore --noflush ...),
// while commands that commit nothing (-L, -C, -S, save) keep them.
func TestPolicyCountersAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j ACCEPT\nCOMMIT\n")
	})
	steps := []struct {
		name string
		args []string // iptables arguments, or nil for a restore
		in   string   // restore input
		opts []string // restore options
	}{
		{"append", []string{"-A", "INPUT", "-p", "tcp", "--dport", "10", "-j", "ACCEPT"}, "", nil},
		{"list", []string{"-L", "-n"}, "", nil},
		{"check", []string{"-C", "INPUT", "-p", "tcp", "--dport", "10", "-j", "ACCEPT"}, "", nil},
		{"insert", []string{"-I", "FORWARD", "-p", "udp", "--dport", "11"}, "", nil},
		{"delete", []string{"-D", "INPUT", "-p", "tcp", "--dport", "10", "-j", "ACCEPT"}, "", nil},
		{"new chain", []string{"-N", "extra"}, "", nil},
		{"policy", []string{"-P", "FORWARD", "ACCEPT"}, "", nil},
		{"list rules", []string{"-S"}, "", nil},
		{"restore --noflush", nil, "*filter\n-A extra -p udp --dport 12\nCOMMIT\n", []string{"--noflush"}},
		{"zero one chain", []string{"-Z", "INPUT"}, "", nil},
		// Tables no command has used yet (the kernel makes them).
		{"zero mangle", []string{"-t", "mangle", "-Z"}, "", nil},
		{"list and zero nat", []string{"-t", "nat", "-L", "-n", "-Z"}, "", nil},
		{"zero a raw chain", []string{"-t", "raw", "-Z", "PREROUTING"}, "", nil},
		// A table's built-in chains that a restore does not declare
		// get their policy counters zeroed, flushing or not, with -c
		// or without (iptables-legacy-restore, Linux 6.18).
		{"restore, INPUT not declared", nil, "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p udp --dport 13\nCOMMIT\n", nil},
		{"restore -c, INPUT not declared", nil, "*filter\n:FORWARD ACCEPT [5:300]\nCOMMIT\n", []string{"-c"}},
	}
	ping := func() {
		tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
			for _, dst := range []nettest.Endpoint{tp.FwIn, tp.Sink} {
				if a := nettest.Ping(tp.GenNS, dst.IPv4); a.Outcome != nettest.OK {
					t.Errorf("ping %s: %v", dst.IPv4, a.Outcome)
				}
			}
		})
	}
	for _, st := range steps {
		ping()
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			var res *nettest.Result
			var err error
			if st.args == nil {
				res, err = fw.try(tp, 4, "-restore", st.in, st.opts...)
			} else {
				res, err = nettest.Exec(tp.FwNS, append(append(fw.cmd(4, ""), "-w", "60"), st.args...)...)
			}
			if err != nil || res.ExitCode != 0 {
				t.Errorf("%s: %s: %v %+v", kind, st.name, err, res)
			}
		})
		saves := map[string]map[string]counter{}
		for kind, tp := range tw.tps {
			saves[kind] = counters(t, tw.fws[kind].save(t, tp, 4))
		}
		for _, chain := range []string{":INPUT", ":FORWARD", ":OUTPUT"} {
			k, x := saves["kernel"][chain], saves["xfw"][chain]
			if k.packets != x.packets {
				t.Errorf("after %s: policy %s: xfw %d packets, kernel %d", st.name, chain, x.packets, k.packets)
			}
		}
	}
}
