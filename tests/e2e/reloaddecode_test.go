package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRestoreDecodesKeptTablesOnly reloads, in xfw and iptables-legacy
// twins, a ruleset of three tables loaded with counters (-c): a restore
// that replaces filter and nat (no --noflush) must decode only mangle's
// rule of the running ruleset (XFW_TRACE counts the rules decoded), a
// --noflush restore all of them; after each, every table's iptables-save
// -c is the kernel's (mangle's counters go on, the replaced tables' start
// again).
func TestRestoreDecodesKeptTablesOnly(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	const first = "*filter\n:INPUT ACCEPT [3:300]\n[5:500] -A INPUT -p tcp -j ACCEPT\n[6:600] -A OUTPUT -p udp -j DROP\nCOMMIT\n" +
		"*nat\n:PREROUTING ACCEPT [0:0]\n:svc - [0:0]\n[1:100] -A PREROUTING -j svc\n[2:200] -A svc -p tcp -j DNAT --to-destination 10.0.0.1\n[4:400] -A OUTPUT -j RETURN\nCOMMIT\n" +
		"*mangle\n:PREROUTING ACCEPT [8:800]\n[7:700] -A PREROUTING -p udp -j MARK --set-xmark 0x1/0xffffffff\nCOMMIT\n"
	// INPUT is declared: a flushing restore that does not declare a
	// built-in chain keeps its policy's counters in xfw, where the kernel
	// zeroes them (not this test's concern).
	const reload = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -j ACCEPT\nCOMMIT\n*nat\n-A OUTPUT -j RETURN\nCOMMIT\n"
	tw := newTwins(t, xfwPath(t))
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, first, "-c")
	})
	if t.Failed() {
		return
	}
	for _, c := range []struct {
		name    string
		extra   []string
		decoded string
	}{
		{"flush", nil, "load: 1 of 6 rules decoded"},
		{"noflush", []string{"--noflush"}, "load: 3 of 3 rules decoded"},
	} {
		reloadDecoding(t, tw, c.name, reload, c.extra, c.decoded)
	}
}

// reloadDecoding restores reload (with extra options) into tw's twins and
// requires xfw's trace (XFW_TRACE) to hold decoded, the count of the
// running ruleset's rules the restore decoded; then every table's
// iptables-save -c of xfw must be the kernel's. name labels the errors.
func reloadDecoding(t *testing.T, tw *twins, name, reload string, extra []string, decoded string) {
	t.Helper()
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		if kind == "kernel" {
			fw.restore(t, tp, 4, reload, extra...)
			return
		}
		f, err := os.CreateTemp("", "xfw-reload-*.txt")
		if err != nil {
			t.Error(err)
			return
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(reload); err != nil {
			t.Error(err)
			return
		}
		f.Close()
		argv := append(append([]string{"env", "XFW_TRACE=1", fw.bin, "iptables-restore", "-w", "60"}, extra...), f.Name())
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: xfw restore failed (%v): %v", name, err, res)
			return
		}
		if !strings.Contains(res.Stderr, decoded) {
			t.Errorf("%s: no %q in the restore's trace:\n%s", name, decoded, res.Stderr)
		}
	})
	for _, table := range []string{"filter", "nat", "mangle"} {
		saved := map[string]string{}
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			argv := append(fw.cmd(4, "-save"), "-c", "-t", table)
			res, err := nettest.Exec(tp.FwNS, argv...)
			if err != nil || res.ExitCode != 0 {
				t.Errorf("%s save: %v %v", kind, err, res)
				return
			}
			var lines []string
			for _, l := range strings.Split(res.Stdout, "\n") {
				if !strings.HasPrefix(l, "#") {
					lines = append(lines, l)
				}
			}
			saved[kind] = strings.Join(lines, "\n")
		})
		if saved["xfw"] != saved["kernel"] {
			t.Errorf("%s: table %s saved by xfw:\n%s\nby the kernel:\n%s", name, table, saved["xfw"], saved["kernel"])
		}
	}
}
