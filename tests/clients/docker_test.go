package clients

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

const (
	// dockerTimeout bounds dockerd's start (about 2 s) and a docker command.
	dockerTimeout = 60 * time.Second
	// dockerPort is the published host port, containerPort the container's.
	dockerPort    = 8080
	containerPort = 80
	// dockerImage is the image imported from a busybox-static root.
	dockerImage = "xfwtest-busybox:1"
	// dockerContainer names the container.
	dockerContainer = "web"
	// outsidePort is the client's server the container connects to.
	outsidePort = 9090
	// dockerBin is Debian's docker client (docker.io).
	dockerBin = "/usr/bin/docker"
)

// dockerDaemonConfig turns Docker's userland proxy off: a connection to a
// published port must go through the nat rules (docker-proxy would answer
// it on the host port otherwise).
const dockerDaemonConfig = `{"userland-proxy": false}`

// dockerDirs are a stack's Docker directories: the daemon's state outside
// the mount namespace's private /run (short paths: containerd's sockets
// live under exec).
type dockerDirs struct {
	data, exec, etc, config, sock, cgroup string
}

// dockerDirsOf returns the stack's Docker directories (created by
// prepareDocker).
func dockerDirsOf(s *stack) dockerDirs {
	short := filepath.Join(s.confDir, "short")
	target, err := os.Readlink(short)
	if err != nil {
		target = short
	}
	return dockerDirs{
		data: filepath.Join(s.confDir, "data"), exec: filepath.Join(target, "x"),
		etc: filepath.Join(s.confDir, "etc-docker"), config: filepath.Join(s.confDir, "daemon.json"),
		sock: filepath.Join(target, "d.sock"), cgroup: "xfwtest-docker-" + filepath.Base(target),
	}
}

// prepareDocker makes the stack's Docker directories and returns the
// mounts dockerd needs: /etc/docker (its key.json) a copy, and the cgroup
// hierarchies `ip netns exec` hid with its /sys.
func prepareDocker(t testing.TB, kind, dir string) []bind {
	t.Helper()
	short, err := os.MkdirTemp("", "xd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	if err := os.Symlink(short, filepath.Join(dir, "short")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data", "etc-docker"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte(dockerDaemonConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]bind{{src: filepath.Join(dir, "etc-docker"), dst: "/etc/docker"}}, cgroupMounts(t)...)
}

// cgroupMounts returns the mounts that give the holder's /sys the host's
// cgroup hierarchies (the same hierarchies: mounting a cgroup v1
// controller or cgroup2 again shows the existing one).
func cgroupMounts(t testing.TB) []bind {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []bind
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[1], "/sys/fs/cgroup") {
			continue
		}
		switch fields[2] {
		case "tmpfs", "cgroup", "cgroup2":
			out = append(out, bind{src: fields[0], dst: fields[1], fstype: fields[2], opts: fields[3]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no cgroup hierarchy under /sys/fs/cgroup: dockerd needs one")
	}
	return out
}

// dockerEnv points the docker client at the stack's daemon.
func dockerEnv(s *stack) []string {
	d := dockerDirsOf(s)
	return []string{"DOCKER_HOST=unix://" + d.sock, "DOCKER_CONFIG=" + filepath.Join(s.confDir, "client")}
}

// docker runs a docker command against the stack's daemon.
func docker(s *stack, args ...string) (string, error) {
	return s.runEnv(dockerEnv(s), append([]string{dockerBin}, args...)...)
}

// startDocker starts dockerd in the stack (with xfw, the agent first),
// imports the image and runs the container publishing dockerPort. The
// cleanups remove the container, stop dockerd (and the containerd it
// started) and the agent, and remove the cgroups.
func startDocker(t testing.TB, s *stack) error {
	if err := startDockerd(t, s); err != nil {
		return err
	}
	_, err := docker(s, "run", "-d", "--name", dockerContainer, "-p", fmt.Sprintf("%d:%d", dockerPort, containerPort),
		dockerImage, "httpd", "-f", "-p", fmt.Sprint(containerPort), "-h", "/www")
	return err
}

// startDockerd is startDocker up to the container: the agent, the
// client namespace's server, dockerd and the image.
func startDockerd(t testing.TB, s *stack) error {
	d := dockerDirsOf(s)
	t.Cleanup(func() { removeCgroups(d.cgroup) })
	if s.kind == kindXFW {
		// As on a real host (the xfw-agent unit): containers' interfaces
		// appear between commands, under the guard.
		s.startDaemon(t, nil, filepath.Join(s.confDir, "agent.log"), s.xfw, "agent", "--no-log")
	}
	outsideServers.Store(s, nettest.StartTCPServer(t, s.topo.GenNS,
		netip.AddrPortFrom(clientAddr(s, fromClient, 4), outsidePort)))
	t.Cleanup(func() { outsideServers.Delete(s) })
	s.startDaemon(t, nil, filepath.Join(s.confDir, "dockerd.log"), "dockerd",
		"--data-root", d.data, "--exec-root", d.exec, "-H", "unix://"+d.sock,
		"--pidfile", filepath.Join(s.confDir, "dockerd.pid"), "--config-file", d.config,
		"--cgroup-parent", "/"+d.cgroup)
	t.Cleanup(func() { _, _ = docker(s, "rm", "-f", dockerContainer) })
	if err := waitFor(dockerTimeout, func() (bool, string) {
		out, err := docker(s, "version")
		return err == nil, out
	}); err != nil {
		return fmt.Errorf("dockerd did not start: %w\n%s", err, readLog(filepath.Join(s.confDir, "dockerd.log")))
	}
	rootfs, err := busyboxRootfs(s.confDir)
	if err != nil {
		return err
	}
	_, err = docker(s, "import", rootfs, dockerImage)
	return err
}

// readLog returns the end of a daemon's log for an error message.
func readLog(path string) string {
	b, _ := os.ReadFile(path)
	const tail = 4000
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return string(b)
}

// busyboxRootfs writes a root file system of busybox-static (sh, httpd, nc,
// ping and a page) as a tar file in dir and returns its path.
func busyboxRootfs(dir string) (string, error) {
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "www"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		return "", err
	}
	for _, applet := range []string{"sh", "httpd", "nc", "ping"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "www", "index.html"), []byte("hello\n"), 0o644); err != nil {
		return "", err
	}
	tar := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tar, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar: %w %s", err, out)
	}
	return tar, nil
}

// removeCgroups removes the cgroups dockerd made under the parent name in
// every hierarchy (deepest first; a cgroup directory goes with rmdir).
func removeCgroups(name string) {
	tops, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	if top := filepath.Join("/sys/fs/cgroup", name); dirExists(top) {
		tops = append(tops, top)
	}
	for _, top := range tops {
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

// dirExists reports whether path is a directory.
func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// checkMasquerade connects from the container to a server in the client
// namespace and pings the client, and requires that the client saw both
// come from fw's address (MASQUERADE) and that the ping was answered.
func checkMasquerade(s *stack) error {
	v, ok := outsideServers.Load(s)
	if !ok {
		return errors.New("no server in the client namespace")
	}
	return checkMasqueradeFam(s, 4, v.(*nettest.TCPServer))
}

// checkMasqueradeFam is checkMasquerade in family fam, srv the client
// namespace's server on its address of that family.
func checkMasqueradeFam(s *stack, fam int, srv *nettest.TCPServer) error {
	client := clientAddr(s, fromClient, fam)
	fw := fwAddr(s, fam)
	cmd := fmt.Sprintf("echo hi | nc -w 2 %s %d", client, outsidePort)
	if _, err := docker(s, "exec", dockerContainer, "sh", "-c", cmd); err != nil {
		return err
	}
	conns := srv.Wait(1, probeTimeout)
	if len(conns) != 1 || conns[0].From.Addr() != fw {
		return fmt.Errorf("the container's connection reached the client as %v, want from %s", conns, fw)
	}
	isEcho := func(c nettest.Captured) bool {
		if fam == 6 {
			return !c.Outgoing && c.IPVersion == 6 && c.Protocol == nettest.ProtoICMPv6 &&
				c.ICMPType == nettest.ICMPv6EchoRequest
		}
		return !c.Outgoing && c.IPVersion == 4 && c.Protocol == nettest.ProtoICMP
	}
	capture, err := nettest.StartCaptureFor(s.topo.GenNS, s.topo.Gen.Ifname, dockerTimeout, isEcho)
	if err != nil {
		return err
	}
	defer capture.Stop()
	if _, err := docker(s, "exec", dockerContainer, "ping", "-c", "1", "-W", "2", client.String()); err != nil {
		return fmt.Errorf("ping from the container: %w", err)
	}
	got, ok := capture.WaitFor(func(c nettest.Captured) bool { return true }, probeTimeout)
	if !ok || got.Src != fw {
		return fmt.Errorf("the container's ping reached the client from %v (seen: %v), want %s", got.Src, ok, fw)
	}
	return nil
}

// outsideServers are the client namespaces' servers the containers
// connect to, by stack (the stacks start at once).
var outsideServers sync.Map

// dockerUser inserts a DOCKER-USER rule dropping the client's other
// address, as Docker's documentation tells users to restrict a published
// port.
func dockerUser(s *stack) error {
	// -w: under xfw the agent holds the xtables lock while it follows the
	// interfaces the previous step's containers removed (docs/usage.md).
	_, err := s.run("iptables", "-w", "10", "-I", "DOCKER-USER", "-s", otherAddr(s, 4).String(), "-j", "DROP")
	return err
}

// dockerRemove removes the container (its DNAT and filter rules go).
func dockerRemove(s *stack) error {
	_, err := docker(s, "rm", "-f", dockerContainer)
	return err
}

// checkHairpin connects from the container to its own published port on
// fw's address: DNAT back to itself, and Docker's hairpin MASQUERADE
// (`-s C -d C -p tcp --dport 80`) so that its reply finds the way.
func checkHairpin(s *stack) error { return checkHairpinFam(s, 4) }

// checkHairpinFam is checkHairpin to fw's address of family fam.
func checkHairpinFam(s *stack, fam int) error {
	cmd := fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 %s %d`, fwAddr(s, fam), dockerPort)
	out, err := docker(s, "exec", dockerContainer, "sh", "-c", cmd)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(out, "hello\n") {
		return fmt.Errorf("the container's connection to its own published port got %q, want the page", out)
	}
	return nil
}

// checkFromHost connects from the host itself (fw's namespace) to the
// published port on its own address: nat OUTPUT's DNAT takes the
// connection to the container (no userland proxy listens on the port).
func checkFromHost(s *stack) error { return checkFromHostFam(s, 4) }

// checkFromHostFam is checkFromHost to fw's address of family fam.
func checkFromHostFam(s *stack, fam int) error {
	req := []byte("GET / HTTP/1.0\r\n\r\n")
	a := nettest.TCPConnect(s.topo.FwNS, netip.AddrPortFrom(fwAddr(s, fam), dockerPort),
		nettest.WithPayload(req), nettest.WithTimeout(probeTimeout))
	if a.Outcome != nettest.OK || !strings.HasPrefix(string(a.Reply), "HTTP/1.") ||
		!strings.Contains(string(a.Reply), " 200 ") {
		return fmt.Errorf("the host's connection to its published port: %s %q, want the page's status line", a.Outcome, a.Reply)
	}
	return nil
}

// peerContainer names the second container of checkInterContainer.
const peerContainer = "peer"

// fetchFrom asks container from for the page of web on its address in
// the bridge's network, and reports whether it came.
func fetchFrom(s *stack, from, addr string) bool {
	cmd := fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 %s %d`, addr, containerPort)
	out, _ := docker(s, "exec", from, "sh", "-c", cmd)
	return strings.HasSuffix(out, "hello\n")
}

// checkInterContainer runs a second container on docker0 and fetches the
// first one's page from it, bridged from port to port: reached; then
// with a DOCKER-USER rule dropping traffic between docker0's ports (what
// --icc=false does in FORWARD, br_netfilter's view of bridged frames),
// not reached; then the rule and the container go.
func checkInterContainer(s *stack) error {
	addr, err := docker(s, "inspect", "-f", "{{.NetworkSettings.IPAddress}}", dockerContainer)
	if err != nil {
		return err
	}
	addr = strings.TrimSpace(addr)
	if _, err := docker(s, "run", "-d", "--name", peerContainer, dockerImage, "httpd", "-f", "-p",
		fmt.Sprint(containerPort), "-h", "/www"); err != nil {
		return err
	}
	defer func() { _, _ = docker(s, "rm", "-f", peerContainer) }()
	if !fetchFrom(s, peerContainer, addr) {
		return fmt.Errorf("container %s did not reach %s at %s", peerContainer, dockerContainer, addr)
	}
	rule := []string{"DOCKER-USER", "-i", "docker0", "-o", "docker0", "-j", "DROP"}
	if _, err := s.run(append([]string{"iptables", "-w", "10", "-I"}, rule...)...); err != nil {
		return err
	}
	reached := fetchFrom(s, peerContainer, addr)
	if _, err := s.run(append([]string{"iptables", "-w", "10", "-D"}, rule...)...); err != nil {
		return err
	}
	if reached {
		return fmt.Errorf("container %s reached %s through -i docker0 -o docker0 -j DROP", peerContainer, dockerContainer)
	}
	return nil
}

// TestDockerAgainstKernel runs Debian's dockerd (userland proxy off) with a
// container publishing a port: reached from the client through the DNAT,
// masqueraded to the outside (TCP and ping), reached by itself through its
// published port (hairpin NAT), reached by the host itself through the
// port on its own address (nat OUTPUT's DNAT), reached by a second
// container through the bridge unless a DOCKER-USER rule drops traffic
// between docker0's ports, a DOCKER-USER rule enforced,
// nothing left of the port once the container is removed.
func TestDockerAgainstKernel(t *testing.T) {
	runScenario(t, scenario{
		name:    "docker",
		prepare: prepareDocker,
		start:   startDocker,
		fams:    []int{4},
		nat:     true,
		steps: []step{
			{"run -p 8080:80", nil, []probe{
				{fromClient, 4, dockerPort, nettest.OK},
				{fromOther, 4, dockerPort, nettest.OK},
			}},
			{"masquerade", checkMasquerade, nil},
			{"hairpin", checkHairpin, nil},
			{"from the host itself", checkFromHost, nil},
			{"inter-container", checkInterContainer, nil},
			{"DOCKER-USER", dockerUser, []probe{
				{fromClient, 4, dockerPort, nettest.OK},
				{fromOther, 4, dockerPort, nettest.TimedOut},
			}},
			{"rm -f", dockerRemove, []probe{
				{fromClient, 4, dockerPort, nettest.Refused},
			}},
		},
	})
}
