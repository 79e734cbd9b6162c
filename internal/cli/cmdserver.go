package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
)

// heartbeatEvery is how often the server tells a waiting client that its
// command still runs (well under the client's silenceTimeout).
const heartbeatEvery = 500 * time.Millisecond

// requestTimeout bounds the server's wait for a client's request and for
// its go-ahead.
const requestTimeout = 2 * time.Second

// cmdServer serves the iptables front ends to clients in the agent's
// network namespace (cmdproto.go), in-process, with the opened running
// state kept from one command to the next (dataplane.KeepSessionState).
// Each command runs in a goroutine of its own and takes xfw's lock as it
// would in a process of its own: the lock serialises them, with -w's
// semantics (a command without -w fails at once while another, served or
// not, holds the lock, instead of queueing behind it in the agent).
type cmdServer struct {
	ln    *net.UnixListener
	build string
	env   []string // the agent's own XFW_* environment, sorted
	logf  func(format string, args ...any)
	// served counts the commands run, for the log.
	served atomic.Int64
	// stopping is closed when the agent ends: commands still waiting for
	// the lock give up (those that hold it finish first).
	stopping <-chan struct{}
}

// listenCommands binds the namespace's command socket. A second agent in
// the namespace finds it taken and serves nothing (nil, nil after a log
// line).
func listenCommands(logf func(string, ...any)) (*cmdServer, error) {
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: "@" + cmdSocketName, Net: "unixpacket"})
	if errors.Is(err, unix.EADDRINUSE) {
		logf("commands: another process serves this namespace's commands; not serving them")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen for commands: %w", err)
	}
	dataplane.KeepSessionState()
	enableCmdCache()
	// Commands take the links, addresses and routes from the watch
	// while nothing changed (dataplane.WatchNetwork); without it they
	// dump them, as in a process of their own.
	if _, err := dataplane.WatchNetwork(); err != nil {
		logf("commands: %v; every command lists the interfaces and addresses", err)
	}
	// Likewise the fast path's decision, while none of the facts it
	// rests on changed (dataplane.WatchFastPathFacts; the agent's
	// periodic check forgets it when a fact nothing notifies changed).
	var groups []dataplane.FastPathGroup
	for _, w := range fpWatches() {
		groups = append(groups, dataplane.FastPathGroup{Name: w.name, Proto: w.proto, Group: w.group})
	}
	if _, err := dataplane.WatchFastPathFacts(groups); err != nil {
		logf("commands: %v; every command decides the fast path afresh", err)
	}
	agentPace()
	return &cmdServer{ln: ln, build: buildID(), env: commandEnv(os.Environ()), logf: logf}, nil
}

// serve accepts clients until ctx ends.
func (s *cmdServer) serve(ctx context.Context) {
	s.stopping = ctx.Done()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		s.logf("commands: served %d", s.served.Load())
	}()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil {
				s.logf("commands: accept: %v", err)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			s.handle(c)
		}()
	}
}

// handle serves one connection.
func (s *cmdServer) handle(c *net.UnixConn) {
	t := time.Now()
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	files, err := receivedFiles(oob[:oobn])
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		send(c, msgDecline, err.Error())
		return
	}
	req, err := decodeRequest(buf[:n])
	if err == nil {
		err = s.admit(c, req)
	}
	if err != nil {
		send(c, msgDecline, err.Error())
		return
	}
	t = dataplane.TraceSince("handle: request read, admitted", t)
	if send(c, msgStart, "") != nil {
		return
	}
	var g [1]byte
	if n, err := c.Read(g[:]); err != nil || n != 1 || g[0] != msgGo {
		return // the client gave up: it runs the command itself
	}
	t = dataplane.TraceSince("handle: go-ahead read", t)
	c.SetReadDeadline(time.Time{})
	agentPace()
	code, finish := s.runWithHeartbeat(c, req.args, Env{Stdin: files[0], Stdout: files[1], Stderr: files[2]})
	defer finish()
	t = dataplane.TraceSince("handle: run with heartbeat", t)
	// The caller's streams are let go before the status is sent: a caller
	// of the client that reads its output to the end (a shell's $(…))
	// would otherwise wait for the agent's copies of the write ends too.
	for _, f := range files {
		f.Close()
	}
	files = nil
	var status [4]byte
	binary.LittleEndian.PutUint32(status[:], uint32(int32(code)))
	send(c, msgExit, string(status[:]))
	dataplane.TraceSince("handle: exit sent", t)
	collectAfterReply()
}

// receivedFiles returns the three streams passed with a request.
func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		rights, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, rights...)
		}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		unix.CloseOnExec(fd)
		files[i] = os.NewFile(uintptr(fd), "stream "+strconv.Itoa(i))
	}
	if len(files) != 3 {
		return files, errors.New("a request carries stdin, stdout and stderr")
	}
	return files, nil
}

// admit checks that the server may run req for the peer of c: root with
// the capabilities xfw needs (as the command would check itself), the same
// build, the same XFW_* environment, a command the server runs.
func (s *cmdServer) admit(c *net.UnixConn, req *cmdRequest) error {
	cred, err := peerCred(c)
	if err != nil {
		return err
	}
	if cred.Uid != 0 {
		return errors.New("the caller is not root")
	}
	if !peerPrivileged(cred.Pid) {
		return errors.New("the caller lacks CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN)")
	}
	if s.build == "" || req.build != s.build {
		return errors.New("the caller is another build of xfw")
	}
	if !slices.Equal(req.env, s.env) {
		return errors.New("the caller's XFW_* environment differs from the agent's")
	}
	if !servable(req.args[0], req.args[1:]) {
		return fmt.Errorf("%s is not served", req.args[0])
	}
	if req.args[0] == "ipset" {
		return sameFiles(cred.Pid, ipsetFiles())
	}
	return nil
}

// ipsetFiles are the files an ipset command the agent serves may read
// (servable refused those naming a file): where names in members are
// looked up, and, when $XFW_IPSET_FILE names the sets' file, its
// directory (the file is replaced by rename) and that of xfw's lock, which
// such commands take (the file may be other namespaces' too).
func ipsetFiles() []string {
	files := ipset.NetdbFiles
	if f := os.Getenv(ipset.FileEnv); f != "" {
		files = append(slices.Clip(files), filepath.Dir(f), filepath.Dir(lockPath))
	}
	return files
}

// sameFiles fails unless process pid sees each of paths (absolute) as
// the agent does: the same file (device and inode), or none for both. A
// caller in another mount namespace or under another root (a container,
// `ip netns exec` binding /etc/netns/NAME/hosts over /etc/hosts) may see
// other files there; its command then runs in its own process, which reads
// its own.
func sameFiles(pid int32, paths []string) error {
	root := "/proc/" + strconv.Itoa(int(pid)) + "/root"
	for _, p := range paths {
		var a, b unix.Stat_t
		errA, errB := unix.Stat(p, &a), unix.Stat(root+p, &b)
		switch {
		case errors.Is(errA, unix.ENOENT) && errors.Is(errB, unix.ENOENT):
		case errA != nil || errB != nil || a.Dev != b.Dev || a.Ino != b.Ino:
			return fmt.Errorf("the caller may see another %s than the agent", p)
		}
	}
	return nil
}

// peerCred returns the credentials of c's peer (SO_PEERCRED).
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}

// peerPrivileged reports whether process pid holds the capabilities
// privileged() asks of a command (read from /proc; the process waits for
// the answer, so its pid is not reused meanwhile).
func peerPrivileged(pid int32) bool {
	if pid <= 0 {
		return false
	}
	status, err := readProcStatus(pid)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return false
		}
		has := func(c uint) bool { return eff&(1<<c) != 0 }
		return has(capNetAdmin) && (has(capBPF) || has(capSysAdmin))
	}
	return false
}

// procStatusMax bounds /proc/PID/status (about 1.5 KB).
const procStatusMax = 8 << 10

// readProcStatus returns /proc/PID/status, read by open, one read and
// close: os.ReadFile's poller registration, stat and growing reads are
// several system calls more in every served command.
func readProcStatus(pid int32) ([]byte, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(int(pid))+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, procStatusMax)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	if n == len(buf) {
		return nil, fmt.Errorf("/proc/%d/status: longer than %d bytes", pid, procStatusMax)
	}
	return buf[:n], nil
}

// send writes one message.
func send(c *net.UnixConn, tag byte, payload string) error {
	_, err := c.Write(append([]byte{tag}, payload...))
	return err
}

// runWithHeartbeat runs the command while telling the client it still
// runs, and calls the command off (Env.Gone) when the client is gone (the
// connection ended, as when the client is killed) or the agent ends. It
// returns the command's status and finish, which ends the goroutines that
// watched it: called after the status is sent, so that the reply does not
// wait for them (the watch of the connection ends at a read deadline, a
// wake-up of its own).
func (s *cmdServer) runWithHeartbeat(c *net.UnixConn, args []string, env Env) (code int, finish func()) {
	done := make(chan struct{})
	gone := make(chan struct{})
	callOff := sync.OnceFunc(func() { close(gone) })
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				send(c, msgHeartbeat, "")
			}
		}
	}()
	go func() {
		defer wg.Done()
		var b [1]byte
		// The client sends nothing more: a read ends at its end, or at
		// the deadline set below once the command is done.
		if _, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			callOff()
		}
	}()
	go func() {
		defer wg.Done()
		select {
		case <-s.stopping:
			callOff()
		case <-done:
		}
	}()
	env.Gone = gone
	code = s.runServed(args, env)
	close(done)
	return code, func() {
		c.SetReadDeadline(time.Now())
		wg.Wait()
	}
}

// runServed runs one command as Main would in a process of its own. A
// panic is reported on the command's stderr, with Go's exit status for
// it, and costs the kept state, not the agent.
func (s *cmdServer) runServed(args []string, env Env) (code int) {
	s.served.Add(1)
	defer dataplane.TraceSince("served: "+args[0], time.Now())
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(env.Stderr, "panic: %v\n\n%s", p, debug.Stack())
			dataplane.DropKeptState()
			code = exitPanic
		}
	}()
	code = runGuarded(frontEnds[args[0]], args[0], args[1:], env)
	if code != exitOK && code != exitParameter && !readOnlyCommand(args[0], args[1:]) {
		// A command that failed past its parsing may have failed half-way
		// through a change: the next one opens the state again, as a
		// process of its own would.
		dataplane.DropKeptState()
	}
	return code
}

// exitPanic is the status of a Go program that panics.
const exitPanic = 2
