package clients

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// serveByAgent makes an xfw stack's iptables commands go to xfw's agent,
// as an installed xfw with the xfw-agent unit running has them: the
// alternatives and `ipset` link to the C client xfw-cmd (built beside
// xfw), and the agent runs in the fw namespace, logging to
// confDir/agent.log. The test's end fails unless the agent served some
// command.
func (s *stack) serveByAgent(t testing.TB) {
	t.Helper()
	client := filepath.Join(filepath.Dir(s.xfw), "xfw-cmd")
	if _, err := os.Stat(client); err != nil {
		t.Fatalf("the command client: %v (make build builds it)", err)
	}
	alt := filepath.Join(s.dir, "alternatives")
	for _, name := range iptablesNames {
		link := filepath.Join(alt, name)
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(client, link); err != nil {
			t.Fatal(err)
		}
	}
	if s.kind == kindXFW {
		// ipset too: a link to the client in a directory bound over
		// /usr/local/sbin, which PATH has before /usr/sbin, the client
		// as installed (a link: the client runs the xfw beside the file
		// it was started from when the agent does not take a command).
		local := filepath.Join(s.dir, "local-sbin")
		if err := os.Mkdir(local, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(client, filepath.Join(local, "ipset")); err != nil {
			t.Fatal(err)
		}
		if out, err := s.run("mount", "--bind", local, "/usr/local/sbin"); err != nil {
			t.Fatalf("bind %s: %v %s", local, err, out)
		}
	}
	agentLog := filepath.Join(s.confDir, "agent.log")
	t.Cleanup(func() { // after the agent's end (cleanups run last first)
		data, _ := os.ReadFile(agentLog)
		if !regexp.MustCompile(`commands: served [1-9]`).Match(data) {
			t.Errorf("the agent served none of the client's commands:\n%s", data)
		}
	})
	s.startDaemon(t, nil, agentLog, s.xfw, "agent", "--no-log")
}
