package clients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

const (
	// f2bJail is the jail's name; its chain is f2b-JAIL, its set f2b-JAIL.
	f2bJail = "t"
	// f2bMaxRetry failed logins ban an address.
	f2bMaxRetry = 3
	// f2bTimeout bounds fail2ban's start and each ban or unban.
	f2bTimeout = 20 * time.Second
)

// prepareFail2ban writes a fail2ban configuration into dir: Debian's, with
// its default sshd jail removed and one jail watching dir/auth.log with
// the sshd filter and the given ban action, files in dir only.
func prepareFail2ban(banaction string) func(t testing.TB, kind, dir string) []bind {
	return func(t testing.TB, kind, dir string) []bind {
		t.Helper()
		conf := filepath.Join(dir, "fail2ban")
		if out, err := exec.Command("cp", "-a", "/etc/fail2ban", conf).CombinedOutput(); err != nil {
			t.Fatalf("copy /etc/fail2ban: %v %s", err, out)
		}
		_ = os.Remove(filepath.Join(conf, "jail.d", "defaults-debian.conf"))
		files := map[string]string{
			"fail2ban.local": fmt.Sprintf("[Definition]\nlogtarget = %s\nsocket = %s\npidfile = %s\ndbfile = :memory:\n",
				filepath.Join(dir, "fail2ban.log"), filepath.Join(dir, "fail2ban.sock"), filepath.Join(dir, "fail2ban.pid")),
			"jail.local": fmt.Sprintf("[DEFAULT]\nbackend = polling\nmaxretry = %d\n[%s]\nenabled = true\nfilter = sshd\n"+
				"logpath = %s\nport = %d,%d\nbanaction = %s\n",
				f2bMaxRetry, f2bJail, filepath.Join(dir, "auth.log"), portSSH, portOther, banaction),
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(conf, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "auth.log"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return nil
	}
}

// startFail2ban starts fail2ban-server in the foreground and waits until
// its jail runs.
func startFail2ban(t testing.TB, s *stack) error {
	conf := filepath.Join(s.confDir, "fail2ban")
	s.startDaemon(t, nil, filepath.Join(s.confDir, "fail2ban-server.out"), "fail2ban-server", "-c", conf,
		"-s", filepath.Join(s.confDir, "fail2ban.sock"), "-p", filepath.Join(s.confDir, "fail2ban.pid"), "-x", "-f")
	return waitFor(f2bTimeout, func() (bool, string) {
		out, err := fail2banClient(s, "status", f2bJail)
		return err == nil, out
	})
}

// fail2banClient runs fail2ban-client against the stack's server.
func fail2banClient(s *stack, args ...string) (string, error) {
	argv := append([]string{"fail2ban-client", "-c", filepath.Join(s.confDir, "fail2ban"),
		"-s", filepath.Join(s.confDir, "fail2ban.sock")}, args...)
	return s.run(argv...)
}

var f2bBanned = regexp.MustCompile(`Currently banned:\s+(\d+)`)

// waitBanned waits until the jail reports n (0 or 1) banned addresses and
// the client's address is in the firewall (a rule or a set member) or not:
// the jail counts a ban before its action has run.
func waitBanned(s *stack, n int) error {
	addr := s.topo.Gen.IPv4.String()
	return waitFor(f2bTimeout, func() (bool, string) {
		out, err := fail2banClient(s, "status", f2bJail)
		m := f2bBanned.FindStringSubmatch(out)
		if err != nil || m == nil || m[1] != fmt.Sprint(n) {
			return false, out
		}
		rules, err1 := s.run("iptables-save", "-t", "filter")
		sets, err2 := s.run("ipset", "save")
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		inFirewall := strings.Contains(rules, "-s "+addr+"/32") || strings.Contains(sets, " "+addr)
		return inFirewall == (n > 0), rules + sets
	})
}

// failLogins appends failed sshd logins of the client's address to the log
// the jail watches, and waits for the ban.
func failLogins(s *stack) error {
	f, err := os.OpenFile(filepath.Join(s.confDir, "auth.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for i := 0; i < f2bMaxRetry; i++ {
		fmt.Fprintf(f, "%s fw sshd[4242]: Failed password for root from %s port %d ssh2\n",
			time.Now().Format(time.Stamp), s.topo.Gen.IPv4, 50000+i)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := waitBanned(s, 1); err != nil {
		return fmt.Errorf("fail2ban (%s) did not ban %s: %w\n%s", s.kind, s.topo.Gen.IPv4, err, fail2banLog(s))
	}
	return nil
}

// unban lifts the ban of the client's address.
func unban(s *stack) error {
	if _, err := fail2banClient(s, "set", f2bJail, "unbanip", s.topo.Gen.IPv4.String()); err != nil {
		return err
	}
	if err := waitBanned(s, 0); err != nil {
		return fmt.Errorf("fail2ban (%s) did not unban: %w\n%s", s.kind, err, fail2banLog(s))
	}
	return nil
}

// fail2banLog returns the warnings and errors in fail2ban's log.
func fail2banLog(s *stack) string {
	data, _ := os.ReadFile(filepath.Join(s.confDir, "fail2ban.log"))
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "WARNING") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond until it holds or timeout passes; the error carries
// cond's last words.
func waitFor(timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %v: %s", timeout, strings.TrimSpace(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fail2banScenario is a jail with the ban action: a ban after failed
// logins, then an unban; the sets are compared too.
func fail2banScenario(name, banaction string) scenario {
	return scenario{
		name:    name,
		prepare: prepareFail2ban(banaction),
		start:   startFail2ban,
		fams:    []int{4},
		sets:    true,
		ports:   []uint16{portSSH, portOther},
		steps: []step{
			{"before", nil, []probe{{fromClient, 4, portSSH, nettest.OK}}},
			{"ban", failLogins, []probe{
				{fromClient, 4, portSSH, nettest.Refused},
				{fromClient, 4, portOther, nettest.Refused},
				{fromOther, 4, portSSH, nettest.OK},
			}},
			{"unban", unban, []probe{
				{fromClient, 4, portSSH, nettest.OK},
				{fromClient, 4, portOther, nettest.OK},
			}},
		},
	}
}

// TestFail2banMultiportAgainstKernel: the iptables-multiport action bans
// the address after failed logins in the watched log, and unbans it.
func TestFail2banMultiportAgainstKernel(t *testing.T) {
	runScenario(t, fail2banScenario("fail2ban iptables-multiport", "iptables-multiport"))
}

// TestFail2banIpsetAgainstKernel: the same with the iptables-ipset-proto6
// action (a set of banned addresses, the ports by -m multiport; `ipset` is xfw's ipset on the xfw stack, the kernel's on the other).
func TestFail2banIpsetAgainstKernel(t *testing.T) {
	runScenario(t, fail2banScenario("fail2ban iptables-ipset-proto6", "iptables-ipset-proto6"))
}

// TestFail2banMultiportWithAgentAgainstKernel: the same with xfw's agent
// running on the xfw stack, as the xfw-agent unit runs it: fail2ban's
// iptables commands go through the alternatives to the C client xfw-cmd,
// and the agent serves them.
func TestFail2banMultiportWithAgentAgainstKernel(t *testing.T) {
	runScenario(t, withAgent(fail2banScenario("fail2ban iptables-multiport, agent serving", "iptables-multiport")))
}

// TestFail2banIpsetWithAgentAgainstKernel: the iptables-ipset-proto6
// action with xfw's agent serving fail2ban's iptables and ipset commands
// (both through the C client).
func TestFail2banIpsetWithAgentAgainstKernel(t *testing.T) {
	sc := withAgent(fail2banScenario("fail2ban iptables-ipset-proto6, agent serving", "iptables-ipset-proto6"))
	start := sc.start
	sc.start = func(t testing.TB, s *stack) error {
		if err := start(t, s); err != nil || s.kind != kindXFW {
			return err
		}
		// The ipset fail2ban runs is the client, and the agent serves it.
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err = s.runEnv([]string{"XFW_CMDSERVER=only"}, "ipset", "list", "-n"); err == nil {
				return nil
			}
		}
		return fmt.Errorf("ipset not served by the agent: %w", err)
	}
	runScenario(t, sc)
}

// withAgent returns sc with xfw's agent serving the xfw stack's commands
// from before fail2ban starts.
func withAgent(sc scenario) scenario {
	sc.start = func(t testing.TB, s *stack) error {
		if s.kind == kindXFW {
			s.serveByAgent(t)
		}
		return startFail2ban(t, s)
	}
	return sc
}
