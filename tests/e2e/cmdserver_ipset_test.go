package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ipsetCmdSequence covers the ipset commands as fail2ban's ipset actions
// and scripts run them, onto cmdBase: sets created, members added (with
// -exist, a timeout, service and protocol names, a host name of
// /etc/hosts), deleted and tested, bad input, listings, saves, a restore
// from stdin, a set in use destroyed, and a rule dropping the set's ports
// (the packets sent afterwards show the members in the data plane).
var ipsetCmdSequence = []cmdStep{
	{argv: []string{"iptables-restore", "-w"}, stdin: cmdBase},
	{argv: []string{"ipset", "create", "ports", "bitmap:port", "range", "7200-7299"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "-m", "set", "--match-set", "ports", "dst", "-j", "DROP"}},
	{argv: []string{"ipset", "add", "ports", "7201"}},
	{argv: []string{"ipset", "add", "ports", "7202-7203"}},
	{argv: []string{"ipset", "add", "ports", "7201"}},
	{argv: []string{"ipset", "add", "ports", "7201", "-exist"}},
	{argv: []string{"ipset", "add", "ports", "7400"}},
	{argv: []string{"ipset", "del", "ports", "7203"}},
	{argv: []string{"ipset", "del", "ports", "7203"}},
	{argv: []string{"ipset", "test", "ports", "7202"}},
	{argv: []string{"ipset", "test", "ports", "7204"}},
	{argv: []string{"ipset", "-exist", "create", "f2b-sshd", "hash:ip", "timeout", "600"}},
	{argv: []string{"ipset", "add", "f2b-sshd", "192.0.2.1", "timeout", "600", "-exist"}},
	{argv: []string{"ipset", "add", "f2b-sshd", "localhost", "timeout", "600", "-exist"}},
	{argv: []string{"ipset", "test", "f2b-sshd", "127.0.0.1"}},
	{argv: []string{"ipset", "del", "f2b-sshd", "192.0.2.1", "-exist"}},
	{argv: []string{"ipset", "test", "f2b-sshd", "192.0.2.1"}},
	{argv: []string{"ipset", "create", "svc", "hash:ip,port"}},
	{argv: []string{"ipset", "add", "svc", "192.0.2.1,tcp:ssh"}},
	{argv: []string{"ipset", "add", "svc", "192.0.2.1,udp:domain"}},
	{argv: []string{"ipset", "add", "svc", "192.0.2.2,sctp:80"}},
	{argv: []string{"ipset", "add", "svc", "192.0.2.2,tcp:nosuchservice"}},
	{argv: []string{"ipset", "list", "svc"}},
	{argv: []string{"ipset", "save", "svc"}},
	{argv: []string{"ipset", "list", "-n"}},
	{argv: []string{"ipset", "restore"}, stdin: "create nets hash:net\nadd nets 10.0.0.0/8\nadd nets 10.1.0.0/16\n"},
	{argv: []string{"ipset", "restore"}, stdin: "add nets 10.2.0.0/16\nadd nets nonsense\n"},
	{argv: []string{"ipset", "list", "nets"}},
	{argv: []string{"ipset", "add", "nosuchset", "192.0.2.9"}},
	{argv: []string{"ipset", "bogus"}},
	{argv: []string{"ipset", "destroy", "ports"}},
	{argv: []string{"ipset", "flush", "svc"}},
	{argv: []string{"ipset", "destroy", "svc"}},
	{argv: []string{"ipset", "list", "-t", "ports"}},
	{argv: []string{"ipset", "save", "ports"}},
	{argv: []string{"ipset", "version"}},
	{argv: []string{"iptables-save"}},
}

// initval is a hash set's random seed, which differs between two creations.
var initval = regexp.MustCompile(`initval 0x[0-9a-f]+`)

// ipsetStep is runStep with the sets' seeds left out.
func ipsetStep(t *testing.T, ns, bin, mode string, s cmdStep) string {
	t.Helper()
	return initval.ReplaceAllString(runStep(t, ns, bin, mode, s), "initval (random)")
}

// TestCmdServerIpsetSameAsInProcess runs ipsetCmdSequence in a namespace
// without an agent and in two whose agent serves the commands (asked by
// xfw and by the C client, XFW_CMDSERVER=only: a command it does not
// serve fails) and requires the same output and statuses, then the same
// fate for datagrams to the set's ports.
func TestCmdServerIpsetSameAsInProcess(t *testing.T) {
	compareServedSteps(t, ipsetCmdSequence, ipsetStep, 7200, 7204)
}

// TestCmdServerIpsetCallerFiles: the agent serves no ipset command whose
// caller may see other files than it does: a caller whose /etc/hosts is
// another (a mount namespace of its own) runs the command itself, with
// its own hosts file; one naming a file (-file) too. With
// XFW_CMDSERVER=only both fail, naming the reason.
func TestCmdServerIpsetCallerFiles(t *testing.T) {
	requireTools(t, "unshare")
	bin, tp, _, _ := servedTopology(t)
	client := cmdClientPath(t, bin)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("192.0.2.77 xfwtesthost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := execAny(t, tp.FwNS, client, "ipset", "create", "ban", "hash:ip"); res.ExitCode != 0 {
		t.Fatalf("ipset create: exit %d: %s", res.ExitCode, res.Stderr)
	}
	// own runs argv in a mount namespace of its own whose /etc/hosts is
	// hosts.
	own := func(mode string, argv ...string) *nettest.Result {
		script := `mount --bind "$1" /etc/hosts && shift && exec env "$@"`
		return execAny(t, tp.FwNS, append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", hosts,
			"XFW_CMDSERVER=" + mode}, argv...)...)
	}
	only := own("only", client, "ipset", "add", "ban", "xfwtesthost")
	if only.ExitCode != 1 || !strings.Contains(only.Stderr, "declined: the caller may see another /etc/hosts than the agent") {
		t.Errorf("a caller with another /etc/hosts, agent only: exit %d, stderr %q", only.ExitCode, only.Stderr)
	}
	for _, asker := range []string{client, bin} {
		if res := own("", asker, "ipset", "add", "ban", "xfwtesthost", "-exist"); res.ExitCode != 0 {
			t.Errorf("%s: a caller with another /etc/hosts: exit %d: %s", asker, res.ExitCode, res.Stderr)
		}
	}
	if res := execAny(t, tp.FwNS, client, "ipset", "test", "ban", "192.0.2.77"); res.ExitCode != 0 {
		t.Errorf("the member the caller's /etc/hosts names: exit %d: %s", res.ExitCode, res.Stderr)
	}
	// A file named: declined, run by the caller (in its directory).
	dir := t.TempDir()
	only = execAny(t, tp.FwNS, "env", "XFW_CMDSERVER=only", client, "ipset", "save", "ban", "-file", filepath.Join(dir, "x"))
	if only.ExitCode != 1 || !strings.Contains(only.Stderr, "declined: ipset is not served") {
		t.Errorf("ipset -file, agent only: exit %d, stderr %q", only.ExitCode, only.Stderr)
	}
	saved := filepath.Join(dir, "saved")
	if res := execAny(t, tp.FwNS, client, "ipset", "save", "ban", "-file", saved); res.ExitCode != 0 {
		t.Fatalf("ipset save -file: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if data, err := os.ReadFile(saved); err != nil || !strings.Contains(string(data), "add ban 192.0.2.77") {
		t.Errorf("ipset save -file wrote %q (%v)", data, err)
	}
}
