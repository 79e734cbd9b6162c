package clients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ufw ports: ssh (limited), http (allowed) and one more.
const (
	portSSH   = 22
	portHTTP  = 80
	portOther = 8080
)

// ufwLimitHits is how many new connections `ufw limit` lets through in 30 s
// (its rule: -m recent --update --seconds 30 --hitcount 6 refuses the 6th).
const ufwLimitHits = 5

// prepareUFW copies /etc/ufw and /etc/default/ufw (IPV6 set as asked) for
// the stack: ufw rewrites its rules files and ufw.conf.
func prepareUFW(ipv6 bool) func(t testing.TB, kind, dir string) []bind {
	return func(t testing.TB, kind, dir string) []bind {
		t.Helper()
		etc := filepath.Join(dir, "ufw")
		if out, err := exec.Command("cp", "-a", "/etc/ufw", etc).CombinedOutput(); err != nil {
			t.Fatalf("copy /etc/ufw: %v %s", err, out)
		}
		def, err := os.ReadFile("/etc/default/ufw")
		if err != nil {
			t.Fatal(err)
		}
		v6 := "IPV6=no"
		if ipv6 {
			v6 = "IPV6=yes"
		}
		def = regexp.MustCompile(`(?m)^IPV6=.*$`).ReplaceAll(def, []byte(v6))
		defPath := filepath.Join(dir, "default-ufw")
		if err := os.WriteFile(defPath, def, 0o644); err != nil {
			t.Fatal(err)
		}
		return []bind{{src: etc, dst: "/etc/ufw"}, {src: defPath, dst: "/etc/default/ufw"}}
	}
}

// ufw runs a ufw command; ufw's notice that it skipped a rule (it probes
// the extensions it needs, and leaves out rules iptables refuses) is an
// error.
func ufw(args ...string) func(s *stack) error {
	return func(s *stack) error {
		out, err := s.run(append([]string{"ufw"}, args...)...)
		if err != nil {
			return err
		}
		if strings.Contains(out, "Skipping") || strings.Contains(out, "ERROR") {
			return fmt.Errorf("ufw %s (%s): %s", strings.Join(args, " "), s.kind, strings.TrimSpace(out))
		}
		return nil
	}
}

// ufwOther runs a ufw command whose arguments name the client's second
// address (OTHER).
func ufwOther(args ...string) func(s *stack) error {
	return func(s *stack) error {
		full := make([]string, len(args))
		for i, a := range args {
			full[i] = strings.ReplaceAll(a, "OTHER", otherAddr(s, 4).String())
		}
		return ufw(full...)(s)
	}
}

// TestUFWAgainstKernel runs ufw's everyday commands with xfw and with the
// kernel's iptables (IPv4 only: /etc/default/ufw IPV6=no), the same
// connections from the client after each, the same rulesets.
func TestUFWAgainstKernel(t *testing.T) {
	runScenario(t, scenario{
		name:    "ufw",
		prepare: prepareUFW(false),
		fams:    []int{4},
		ports:   []uint16{portSSH, portHTTP, portOther},
		steps: []step{
			{"enable", ufw("--force", "enable"), []probe{
				{fromClient, 4, portHTTP, nettest.TimedOut},
				{fromClient, 4, portSSH, nettest.TimedOut},
			}},
			{"allow 80/tcp", ufw("allow", "80/tcp"), []probe{
				{fromClient, 4, portHTTP, nettest.OK},
				{fromOther, 4, portHTTP, nettest.OK},
			}},
			{"deny from OTHER", ufwOther("deny", "from", "OTHER"), []probe{
				// After the allow of port 80: ufw keeps the order given.
				{fromOther, 4, portHTTP, nettest.OK},
				{fromClient, 4, portOther, nettest.TimedOut},
			}},
			{"allow 8080/tcp", ufw("allow", "8080/tcp"), []probe{
				{fromClient, 4, portOther, nettest.OK},
				{fromOther, 4, portOther, nettest.TimedOut},
			}},
			{"delete deny from OTHER", ufwOther("delete", "deny", "from", "OTHER"), []probe{
				{fromOther, 4, portOther, nettest.OK},
			}},
			{"delete allow 80/tcp", ufw("delete", "allow", "80/tcp"), []probe{
				{fromClient, 4, portHTTP, nettest.TimedOut},
				{fromClient, 4, portOther, nettest.OK},
			}},
			{"disable", ufw("--force", "disable"), []probe{
				{fromClient, 4, portSSH, nettest.OK},
			}},
		},
	})
}

// TestUFWLimitAgainstKernel runs `ufw limit ssh`: five new connections in
// 30 s pass, the sixth is refused (-m recent), as with the kernel.
func TestUFWLimitAgainstKernel(t *testing.T) {
	var probes []probe
	for i := 0; i < ufwLimitHits; i++ {
		probes = append(probes, probe{fromClient, 4, portSSH, nettest.OK})
	}
	probes = append(probes, probe{fromClient, 4, portSSH, nettest.Refused})
	runScenario(t, scenario{
		name:    "ufw limit",
		prepare: prepareUFW(false),
		fams:    []int{4},
		ports:   []uint16{portSSH},
		steps: []step{
			{"enable", ufw("--force", "enable"), nil},
			{"limit ssh", ufw("limit", "ssh"), probes},
		},
	})
}

// TestUFWIPv6AgainstKernel runs ufw with IPv6 on (Debian's default): its
// ip6tables rules as well.
func TestUFWIPv6AgainstKernel(t *testing.T) {
	runScenario(t, scenario{
		name:    "ufw IPv6",
		prepare: prepareUFW(true),
		fams:    []int{4, 6},
		ports:   []uint16{portSSH, portHTTP},
		steps: []step{
			{"enable", ufw("--force", "enable"), []probe{
				{fromClient, 6, portHTTP, nettest.TimedOut},
			}},
			{"allow 80/tcp", ufw("allow", "80/tcp"), []probe{
				{fromClient, 6, portHTTP, nettest.OK},
				{fromClient, 4, portHTTP, nettest.OK},
				{fromClient, 6, portSSH, nettest.TimedOut},
			}},
		},
	})
}
