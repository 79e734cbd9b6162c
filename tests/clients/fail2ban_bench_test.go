package clients

import (
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

const (
	// f2bBenchRounds is the default number of bans per firewall and action
	// (XFW_F2B_ROUNDS overrides it).
	f2bBenchRounds = 5
	// f2bPollEvery is the pause between two connection attempts while a
	// ban is awaited; f2bPollTimeout bounds one attempt (a refused one
	// returns at once, an accepted one too).
	f2bPollEvery   = 20 * time.Millisecond
	f2bPollTimeout = 200 * time.Millisecond
)

// BenchmarkFail2banBan measures how soon a fail2ban ban takes effect: from
// the failed logins appended to the log the jail watches until the
// client's connection to the banned port is refused, with xfw and with the
// kernel's iptables-legacy as the system's iptables, and with xfw's agent
// serving the commands (through the C client xfw-cmd, as installed), for the
// iptables-multiport and iptables-ipset-proto6 actions. Each round bans
// and unbans on every stack in turn (stacks alternating, never at once);
// the first ban of a jail also runs the action's start (its chain or set
// and the jump). The time includes fail2ban's own log polling (backend
// polling: about a second), the same for both firewalls. It prints the
// median and min–max of the rounds (XFW_F2B_ROUNDS, default 5) per
// firewall and action. Run as root after `make build`:
//
//	go test -run X -bench Fail2banBan -benchtime 1x ./tests/clients/
func BenchmarkFail2banBan(b *testing.B) {
	rounds := f2bBenchRounds
	if v, err := strconv.Atoi(os.Getenv("XFW_F2B_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	requirePackages(b)
	xfw := xfwPath(b)
	for _, actionName := range []string{"iptables-multiport", "iptables-ipset-proto6"} {
		stacks := []*stack{}
		labels := map[*stack]string{}
		for _, label := range []string{kindKernel, kindXFW, f2bAgentLabel} {
			kind := label
			if label == f2bAgentLabel {
				kind = kindXFW
			}
			s := f2bBenchStack(b, kind, xfw, actionName, label == f2bAgentLabel)
			stacks = append(stacks, s)
			labels[s] = label
		}
		total := map[string][]time.Duration{}  // failed logins written → refused
		action := map[string][]time.Duration{} // fail2ban's "Ban" → refused
		for r := 0; r < rounds; r++ {
			for _, s := range stacks {
				// A random phase against fail2ban's one-second log polling,
				// so that neither firewall's rounds keep a lucky one.
				time.Sleep(time.Duration(rand.Int63n(int64(time.Second))))
				t, a, err := timeBan(s)
				if err != nil {
					b.Fatalf("%s, %s, round %d: %v", actionName, labels[s], r+1, err)
				}
				total[labels[s]] = append(total[labels[s]], t)
				action[labels[s]] = append(action[labels[s]], a)
				if err := unban(s); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, s := range stacks {
			t, a := total[labels[s]], action[labels[s]]
			b.Logf("%s, %s: first ban: logins→refused %v, Ban→refused %v; later %d: logins→refused %v (%v–%v), Ban→refused %v (%v–%v)",
				actionName, labels[s], t[0].Round(time.Millisecond), a[0].Round(time.Millisecond), len(t)-1,
				median(t[1:]), minDur(t[1:]), maxDur(t[1:]), median(a[1:]), minDur(a[1:]), maxDur(a[1:]))
		}
	}
}

// f2bAgentLabel names the xfw stack whose agent serves the commands.
const f2bAgentLabel = "xfw, agent serving"

// f2bBenchStack builds one firewall's stack with the jail running and the
// servers the probes connect to; with agent, xfw's agent serves its
// commands (serveByAgent).
func f2bBenchStack(b *testing.B, kind, xfw, action string, agent bool) *stack {
	dir := b.TempDir()
	binds := prepareFail2ban(action)(b, kind, dir)
	s := newStack(b, kind, xfw, binds)
	s.confDir = dir
	addOtherAddress(b, s)
	nettest.StartTCPServer(b, s.topo.FwNS, netip.AddrPortFrom(fwAddr(s, 4), portSSH))
	if agent {
		s.serveByAgent(b)
	}
	if err := startFail2ban(b, s); err != nil {
		b.Fatalf("fail2ban (%s) did not start: %v", kind, err)
	}
	return s
}

// timeBan appends the failed logins and returns how long until a
// connection from the client to the SSH port is refused, counted from the
// write and from the "Ban" line fail2ban logs before it runs the action
// (what the firewall's commands and their effect take).
func timeBan(s *stack) (total, action time.Duration, err error) {
	logPath := filepath.Join(s.confDir, "fail2ban.log")
	logged, err := os.ReadFile(logPath)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.OpenFile(filepath.Join(s.confDir, "auth.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for i := 0; i < f2bMaxRetry; i++ {
		fmt.Fprintf(f, "%s fw sshd[4242]: Failed password for root from %s port %d ssh2\n",
			start.Format(time.Stamp), s.topo.Gen.IPv4, 50000+i)
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	dst := netip.AddrPortFrom(fwAddr(s, 4), portSSH)
	src := netip.AddrPortFrom(clientAddr(s, fromClient, 4), 0)
	for time.Since(start) < f2bTimeout {
		a := nettest.TCPConnect(s.topo.GenNS, dst, nettest.WithSource(src), nettest.WithTimeout(f2bPollTimeout))
		if a.Outcome != nettest.Refused {
			time.Sleep(f2bPollEvery)
			continue
		}
		refused := time.Now()
		data, err := os.ReadFile(logPath)
		if err != nil {
			return 0, 0, err
		}
		banned, err := f2bBanTime(string(data[len(logged):]), s.topo.Gen.IPv4.String())
		if err != nil {
			return 0, 0, err
		}
		return refused.Sub(start), refused.Sub(banned), nil
	}
	return 0, 0, fmt.Errorf("not banned after %v\n%s", f2bTimeout, fail2banLog(s))
}

// f2bBanLine is fail2ban's log line of a ban: its time (local, ms) and
// the address.
var f2bBanLine = regexp.MustCompile(`(?m)^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*NOTICE\s+\[[^]]*\] Ban (\S+)$`)

// f2bBanTime returns the time of the first ban of addr in log.
func f2bBanTime(log, addr string) (time.Time, error) {
	for _, m := range f2bBanLine.FindAllStringSubmatch(log, -1) {
		if m[2] == addr {
			return time.ParseInLocation("2006-01-02 15:04:05,000", m[1], time.Local)
		}
	}
	return time.Time{}, fmt.Errorf("no ban of %s in fail2ban's log:\n%s", addr, log)
}

// median, minDur and maxDur summarise durations (rounded to ms).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func minDur(ds []time.Duration) time.Duration {
	m := time.Duration(0)
	for i, d := range ds {
		if i == 0 || d < m {
			m = d
		}
	}
	return m.Round(time.Millisecond)
}

func maxDur(ds []time.Duration) time.Duration {
	m := time.Duration(0)
	for _, d := range ds {
		if d > m {
			m = d
		}
	}
	return m.Round(time.Millisecond)
}
