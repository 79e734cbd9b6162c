package cli

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ipset"
)

// Timeouts of the client's exchange with the agent.
const (
	// handshakeTimeout bounds the wait for the agent's answer to the
	// request: an agent that does not answer in time is left alone and
	// the command runs in the client.
	handshakeTimeout = 2 * time.Second
	// silenceTimeout bounds the wait between two messages of a command
	// under way (the agent sends one every heartbeatEvery): a hung agent
	// is reported, never taken for a success.
	silenceTimeout = 5 * time.Second
)

// tryServer runs the command name args in the agent of this network
// namespace, when one serves commands, and returns its exit status and
// true; it returns false when the command is to run in this process: no
// agent, another build's, a declined request, or one not answered before
// it started. Once the agent has started the command, its end (a status,
// or an error reported as one) is the command's.
func tryServer(name string, args []string, env Env) (int, bool) {
	mode := os.Getenv(serverEnv)
	if mode == "off" || !servable(name, args) {
		return 0, false
	}
	files, ok := stdFiles(env)
	if !ok {
		return 0, false
	}
	req := &cmdRequest{build: buildID(), args: append([]string{name}, args...), env: commandEnv(os.Environ())}
	code, served, err := askServer(req, files, env.Stderr)
	if served {
		return code, true
	}
	if mode == "only" {
		fmt.Fprintf(env.Stderr, "%s: not served by the xfw agent: %v\n", name, err)
		return exitOther, true
	}
	return 0, false
}

// servedCommands are the commands the agent serves: the iptables front
// ends and ipset.
var servedCommands = map[string]bool{
	"iptables": true, "ip6tables": true,
	"iptables-save": true, "ip6tables-save": true,
	"iptables-restore": true, "ip6tables-restore": true,
	"ipset": true,
}

// servable reports whether the agent may run the command: the iptables
// front ends, except a restore naming a file (the agent's mount namespace
// and working directory may differ from the caller's; "-" is stdin), and
// ipset, except an invocation naming a file (-file) or one whose sets are
// in a file named by a relative $XFW_IPSET_FILE (the agent's working
// directory). The agent also asks that the caller see the files the
// command may read as it does (sameFiles): /etc/hosts, /etc/services
// and /etc/protocols, for the names in members.
func servable(name string, args []string) bool {
	if !servedCommands[name] {
		return false
	}
	if name == "ipset" {
		f := os.Getenv(ipset.FileEnv)
		return !ipset.NamesFile(args) && (f == "" || filepath.IsAbs(f))
	}
	if !strings.HasSuffix(name, "-restore") {
		return true
	}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-w" || a == "--wait":
			if i+1 < len(args) && isNumber(args[i+1]) {
				i++
			}
		case a == "-W" || a == "--wait-interval" || a == "-T" || a == "--table":
			i++
		case a == "-" || strings.HasPrefix(a, "-"):
		default:
			return false // a file: run it here
		}
	}
	return true
}

// stdFiles returns the descriptors of env's streams when all three are
// files (a command run in-process by a test has buffers).
func stdFiles(env Env) ([3]int, bool) {
	var fds [3]int
	for i, s := range []any{env.Stdin, env.Stdout, env.Stderr} {
		f, ok := s.(*os.File)
		if !ok || f == nil {
			return fds, false
		}
		fds[i] = int(f.Fd())
	}
	return fds, true
}

// askServer sends req and waits for its end. served is false while the
// command has not been handed over (err says why); after the hand-over a
// lost agent is reported on the command's stderr by the caller's status.
func askServer(req *cmdRequest, files [3]int, stderr io.Writer) (code int, served bool, err error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + cmdSocketName}); err != nil {
		return 0, false, fmt.Errorf("connect: %w", err)
	}
	msg := req.encode()
	if len(msg) > maxRequest {
		return 0, false, errors.New("request too long")
	}
	if err := unix.Sendmsg(fd, msg, unix.UnixRights(files[:]...), nil, 0); err != nil {
		return 0, false, fmt.Errorf("send: %w", err)
	}
	reply, err := receive(fd, handshakeTimeout)
	if err != nil {
		return 0, false, err
	}
	switch reply[0] {
	case msgDecline:
		return 0, false, fmt.Errorf("declined: %s", reply[1:])
	case msgStart:
	default:
		return 0, false, fmt.Errorf("unexpected answer %q", reply[0])
	}
	if _, err := unix.Write(fd, []byte{msgGo}); err != nil {
		return 0, false, fmt.Errorf("send: %w", err)
	}
	for {
		reply, err := receive(fd, silenceTimeout)
		if err != nil {
			return lostServer(stderr, err), true, nil
		}
		switch {
		case reply[0] == msgHeartbeat:
		case reply[0] == msgExit && len(reply) == 5:
			return int(int32(binary.LittleEndian.Uint32(reply[1:]))), true, nil
		default:
			return lostServer(stderr, fmt.Errorf("unexpected answer %q", reply[0])), true, nil
		}
	}
}

// lostServer reports, on the caller's stderr, an agent lost after it
// started the command, and returns the status the command ends with.
func lostServer(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "xfw: the xfw agent serving this command %v; it may or may not have taken effect (a change is applied whole or not at all)\n", err)
	return exitOther
}

// errSilent is a wait for the agent's next message that timed out.
var errSilent = errors.New("stopped answering")

// receive reads one message from fd within timeout.
func receive(fd int, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 512)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errSilent
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		m, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECONNRESET) {
			// A Unix socket is reset when its peer closes with data
			// of ours unread: the agent ended.
			return nil, errors.New("ended before it finished")
		}
		if err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		if m == 0 {
			return nil, errors.New("ended before it finished")
		}
		return buf[:m], nil
	}
}
