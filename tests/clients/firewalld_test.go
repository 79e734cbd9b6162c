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
	// firewalldTimeout bounds firewalld's start (about 2 s).
	firewalldTimeout = 60 * time.Second
	// portRich is the port of the rich rule with a limit.
	portRich = 2222
	// richLimitBurst is how many new connections `limit value=3/m` lets
	// through at once (-m limit's default burst).
	richLimitBurst = 5
)

// dbusConfig is a private system bus that lets everybody do everything
// (firewalld talks to firewall-cmd through it; no polkit).
const dbusConfig = `<busconfig><type>system</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy></busconfig>
`

// prepareFirewalld copies /etc/firewalld with FirewallBackend=iptables.
// IPv6_rpfilter is off: it needs -m rpfilter in the raw table, which xfw
// does not have.
func prepareFirewalld(t testing.TB, kind, dir string) []bind {
	t.Helper()
	etc := filepath.Join(dir, "firewalld")
	if out, err := exec.Command("cp", "-a", "/etc/firewalld", etc).CombinedOutput(); err != nil {
		t.Fatalf("copy /etc/firewalld: %v %s", err, out)
	}
	confPath := filepath.Join(etc, "firewalld.conf")
	conf, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	conf = regexp.MustCompile(`(?m)^FirewallBackend=.*$`).ReplaceAll(conf, []byte("FirewallBackend=iptables"))
	conf = regexp.MustCompile(`(?m)^IPv6_rpfilter=.*$`).ReplaceAll(conf, []byte("IPv6_rpfilter=no"))
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dbus.conf"), []byte(fmt.Sprintf(dbusConfig, filepath.Join(dir, "dbus"))), 0o644); err != nil {
		t.Fatal(err)
	}
	return []bind{{src: etc, dst: "/etc/firewalld"}}
}

// busEnv points firewalld and firewall-cmd at the stack's bus.
func busEnv(s *stack) []string {
	return []string{"DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(s.confDir, "dbus")}
}

// startFirewalld starts the bus and firewalld and waits until firewalld
// runs (or says it failed).
func startFirewalld(t testing.TB, s *stack) error {
	s.startDaemon(t, nil, filepath.Join(s.confDir, "dbus.out"), "dbus-daemon", "--nofork", "--nopidfile",
		"--config-file="+filepath.Join(s.confDir, "dbus.conf"))
	if err := waitFor(firewalldTimeout, func() (bool, string) {
		_, err := os.Stat(filepath.Join(s.confDir, "dbus"))
		return err == nil, "no bus socket"
	}); err != nil {
		return err
	}
	logPath := filepath.Join(s.confDir, "firewalld.log")
	s.startDaemon(t, busEnv(s), filepath.Join(s.confDir, "firewalld.out"), "firewalld", "--nofork", "--nopid",
		"--log-file", logPath)
	var state string
	err := waitFor(firewalldTimeout, func() (bool, string) {
		state, _ = s.runEnv(busEnv(s), "firewall-cmd", "--state")
		state = strings.TrimSpace(state)
		return state == "running" || state == "failed", state
	})
	if err == nil && state != "running" {
		err = fmt.Errorf("firewalld's state is %q", state)
	}
	if err != nil {
		return fmt.Errorf("%w; firewalld's errors:\n%s", err, firewalldErrors(logPath))
	}
	return nil
}

// firewalldErrors returns the ERROR lines of firewalld's log.
func firewalldErrors(logPath string) string {
	data, _ := os.ReadFile(logPath)
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "ERROR") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// firewallCmd runs firewall-cmd with the arguments (OTHER, CLIENT: the
// client's addresses).
func firewallCmd(args ...string) func(s *stack) error {
	return func(s *stack) error {
		full := []string{"firewall-cmd"}
		for _, a := range args {
			a = strings.ReplaceAll(a, "CLIENT", s.topo.Gen.IPv4.String())
			full = append(full, strings.ReplaceAll(a, "OTHER", otherAddr(s, 4).String()))
		}
		_, err := s.runEnv(busEnv(s), full...)
		if err != nil {
			return fmt.Errorf("%w\nfirewalld's errors:\n%s", err, firewalldErrors(filepath.Join(s.confDir, "firewalld.log")))
		}
		return nil
	}
}

// TestFirewalldAgainstKernel runs firewalld with its iptables back end
// (public zone: ssh allowed, everything else rejected) and adds a service,
// a port and a rich rule with a limit.
func TestFirewalldAgainstKernel(t *testing.T) {
	var limited []probe
	for i := 0; i < richLimitBurst; i++ {
		limited = append(limited, probe{fromClient, 4, portRich, nettest.OK})
	}
	limited = append(limited, probe{fromClient, 4, portRich, nettest.Refused}, probe{fromOther, 4, portRich, nettest.Refused})
	runScenario(t, scenario{
		name:    "firewalld",
		prepare: prepareFirewalld,
		start:   startFirewalld,
		fams:    []int{4, 6},
		ports:   []uint16{portSSH, portHTTP, portOther, portRich},
		steps: []step{
			{"started", nil, []probe{
				{fromClient, 4, portSSH, nettest.OK},
				{fromClient, 4, portHTTP, nettest.Refused},
				{fromClient, 6, portSSH, nettest.OK},
			}},
			{"--add-service=http", firewallCmd("--add-service=http"), []probe{
				{fromClient, 4, portHTTP, nettest.OK},
				{fromClient, 6, portHTTP, nettest.OK},
			}},
			{"--add-port=8080/tcp", firewallCmd("--add-port=8080/tcp"), []probe{
				{fromClient, 4, portOther, nettest.OK},
			}},
			{"--add-rich-rule limit", firewallCmd("--add-rich-rule=rule family=ipv4 source address=CLIENT " +
				"port port=2222 protocol=tcp limit value=3/m accept"), limited},
		},
	})
}
