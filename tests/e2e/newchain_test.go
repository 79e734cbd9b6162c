package e2e

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestNewChainReusesGenerationAgainstKernel creates chains (-N, in filter
// and nat) between rounds of pings through both twins and compares every
// counter after each: xfw must install its running generation again
// instead of compiling (an empty chain nothing jumps to adds nothing to
// it; XFW_TRACE names the step and XFW_CHECK_REUSE compiles anyway and
// must find the same generation), rules' counters go on and the filter
// policies' restart, as libiptc's commit does. A chain the next command
// jumps to must then work as a compiled one.
func TestNewChainReusesGenerationAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:ZED - [0:0]\n"+
			"-A INPUT -p icmp -j ZED\n-A INPUT -p tcp --dport 9 -j ACCEPT\n-A FORWARD -p icmp -m limit --limit 100/s -j ACCEPT\n"+
			"-A ZED -p icmp --icmp-type echo-request -j ACCEPT\nCOMMIT\n"+
			"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n")
	})
	ping := func() {
		tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
			for _, dst := range []nettest.Endpoint{tp.FwIn, tp.Sink} {
				if a := nettest.Ping(tp.GenNS, dst.IPv4); a.Outcome != nettest.OK {
					t.Errorf("ping %s: %v", dst.IPv4, a.Outcome)
				}
			}
		})
	}
	compare := func(step string) {
		saves := map[string]map[string]counter{}
		for kind, tp := range tw.tps {
			saves[kind] = counters(t, tw.fws[kind].save(t, tp, 4))
		}
		for key, k := range saves["kernel"] {
			if x, ok := saves["xfw"][key]; !ok || x.packets != k.packets {
				t.Errorf("after %s: %s: xfw %d packets (present %v), kernel %d", step, key, x.packets, ok, k.packets)
			}
		}
	}
	run := func(step string, reuse bool, args ...string) {
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			argv := append(append(fw.cmd(4, ""), "-w", "60"), args...)
			if kind == "xfw" {
				argv = append([]string{"env", "XFW_CMDSERVER=off", "XFW_TRACE=1", "XFW_CHECK_REUSE=1"}, argv...)
			}
			res, err := nettest.Exec(tp.FwNS, argv...)
			if err != nil || res.ExitCode != 0 {
				t.Errorf("%s: %s: %v %+v", kind, step, err, res)
				return
			}
			if kind != "xfw" || !reuse {
				return
			}
			if !strings.Contains(res.Stderr, "XFW_CHECK_REUSE: compiled, the same") {
				t.Errorf("%s: the running generation was not installed again:\n%s", step, res.Stderr)
			}
			if strings.Contains(res.Stderr, "commit: compile") {
				t.Errorf("%s compiled:\n%s", step, res.Stderr)
			}
		})
	}
	ping()
	run("-N AAA", true, "-N", "AAA")
	ping()
	compare("-N AAA")
	run("-t nat -N SVC", true, "-t", "nat", "-N", "SVC")
	ping()
	compare("-t nat -N SVC")
	run("-A AAA", false, "-A", "AAA", "-p", "icmp", "-j", "ACCEPT")
	run("-I INPUT -j AAA", false, "-I", "INPUT", "-p", "icmp", "-j", "AAA")
	ping()
	compare("a jump to the new chain")
	run("-N MMM", true, "-N", "MMM")
	ping()
	compare("-N MMM")
	// A table -N creates (with its built-in chains) is compiled.
	run("-t raw -N RRR", false, "-t", "raw", "-N", "RRR")
	ping()
	compare("-t raw -N RRR")
}
