package difftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Config configures a Session.
type Config struct {
	// Family is the address family compared (one per session: xfw loads one
	// family's ruleset per namespace here, the kernel's iptables or
	// ip6tables the other).
	Family ir.Family
	// XFW is the xfw binary run inside the xfw topology's fw namespace.
	XFW string
	// XDPMode is passed to xfw as --xdp-mode when not empty.
	XDPMode string
	// Subnet is X of the addresses (0: DefaultSubnet).
	Subnet uint8
	// Logf receives progress messages (nil: none).
	Logf func(format string, args ...any)
	// Debug, when set, receives every observation of every run.
	Debug func(format string, args ...any)
	// AppendTail, when positive, makes xfw load up to that many of each
	// base chain's first rules with `iptables -I` (last first) and up to
	// that many of its last rules with `iptables -A` (each appended twice,
	// the first copies then deleted with -D) after restoring the rest, so
	// that its in-place paths (compiler.InsertRule, AppendRule, DeleteRule)
	// are what the kernel is compared with. The kernel restores the whole
	// ruleset.
	AppendTail int
	// Conntrack makes the session stateful: both sides' connection
	// tables (the kernel's nf_conntrack, xfw's) are flushed after each
	// ruleset is loaded, so that every run starts from none.
	Conntrack bool
}

// namespaceBase starts the names of the session's namespaces.
const namespaceBase = "xdt"

// toolTimeout bounds one iptables-legacy or xfw command.
const toolTimeout = 90 * time.Second

// lockWait is the restore commands' wait for their lock (seconds, within
// toolTimeout).
const lockWait = "--wait=60"

// Session is a pair of identical topologies, one filtered by the kernel's
// iptables-legacy and one by xfw, with their observers. Run compares one
// ruleset and corpus; Close removes everything. A Session is not safe for
// concurrent use.
type Session struct {
	cfg   Config
	plan  Plan
	sides [2]*side
	kmsg  *kmsgReader
	undo  []func() error
	// next is the next probe marker.
	next uint32
	// appended and inPlace count the -A and -D commands of
	// Config.AppendTail and those done in place.
	appended, inPlace int
	// nat is set while the loaded ruleset has a nat table (HasNATTable).
	nat bool
	// randomPorts are the ports its nat table picks at random (nil:
	// none), compared by range (maskRandomPorts).
	randomPorts *randomPorts
}

// sideKernel and sideXFW index Session.sides.
const (
	sideKernel = 0
	sideXFW    = 1
)

// sideNames name the sides in reports.
var sideNames = [2]string{"kernel", "xfw"}

// NewSession builds both topologies and starts the observers. It needs
// root, iproute2, ethtool and iptables-legacy (or ip6tables-legacy); on
// error everything it made is removed.
func NewSession(ctx context.Context, cfg Config) (_ *Session, err error) {
	if cfg.Subnet == 0 {
		cfg.Subnet = DefaultSubnet
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Family != ir.IPv4 && cfg.Family != ir.IPv6 {
		return nil, fmt.Errorf("difftest: family must be 4 or 6, not %d", cfg.Family)
	}
	if err := CheckTools(cfg); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, plan: NewPlan(cfg.Family, cfg.Subnet), next: 1}
	defer func() {
		if err != nil {
			if cerr := s.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	unlock, err := lockHost(ctx, cfg.Subnet)
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, unlock)
	restore, err := nettest.EnableNetnsLogging()
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, restore)
	if s.kmsg, err = openKmsg(); err != nil {
		return nil, err
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range s.sides {
		s.sides[i] = &side{name: sideNames[i], kernel: i == sideKernel, genFD: -1, sinkFD: -1}
		wg.Add(1)
		go func(sd *side) {
			defer wg.Done()
			errs[i] = s.setup(sd)
		}(s.sides[i])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.kmsg.start(&s.sides[sideKernel].log)
	if err := s.waitSetupQuiet(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Plan returns the session's addressing.
func (s *Session) Plan() Plan { return s.plan }

// CheckTools reports the first missing tool of a session, as an error that
// says how to install it.
func CheckTools(cfg Config) error {
	if err := nettest.CheckRoot(); err != nil {
		return fmt.Errorf("difftest: %w", err)
	}
	tools := []string{"ethtool", "iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save"}
	if cfg.Family == ir.IPv6 {
		tools = append(tools, "ip6tables-legacy", "ip6tables-legacy-restore", "ip6tables-legacy-save")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("difftest: %s is required (scripts/deps.sh installs it): %w", t, err)
		}
	}
	if cfg.Conntrack {
		if _, err := exec.LookPath("conntrack"); err != nil {
			return fmt.Errorf("difftest: conntrack (conntrack-tools) is required for stateful runs: %w", err)
		}
	}
	if cfg.XFW == "" {
		return errors.New("difftest: no xfw binary given")
	}
	if _, err := os.Stat(cfg.XFW); err != nil {
		return fmt.Errorf("difftest: xfw binary: %w (run make build)", err)
	}
	return nil
}

// logStopWait bounds how long `xfw log` may take to write what is left in
// the ring and exit.
const logStopWait = 5 * time.Second

// Close stops the observers, removes both topologies and restores what the
// session changed on the host. It may be called more than once.
func (s *Session) Close() error {
	var errs []error
	for _, sd := range s.sides {
		if sd == nil {
			continue
		}
		if sd.logCmd != nil && sd.logCmd.Process != nil {
			_ = sd.logCmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-sd.logDone:
			case <-time.After(logStopWait):
				_ = sd.logCmd.Process.Kill()
				<-sd.logDone
			}
			sd.logCmd = nil
		}
		for _, c := range sd.caps {
			c.Stop()
		}
		sd.caps = nil
		for _, r := range sd.raws {
			r.f.Close()
		}
		sd.raws, sd.out = nil, nil
		for _, fd := range []*int{&sd.genFD, &sd.sinkFD} {
			if *fd >= 0 {
				unix.Close(*fd)
				*fd = -1
			}
		}
		if sd.topo != nil && !sd.kernel {
			s.logFastPath(sd)
		}
		if sd.topo != nil {
			if err := sd.topo.Close(); err != nil {
				errs = append(errs, err)
			}
			sd.topo = nil
		}
	}
	if s.kmsg != nil {
		s.kmsg.close()
		s.kmsg = nil
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		if err := s.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.undo = nil
	return errors.Join(errs...)
}

// logFastPath logs how many packets xfw's side forwarded through the XDP
// fast path (`xfw fastpath`), and what went to the stack.
func (s *Session) logFastPath(sd *side) {
	res, err := nettest.Exec(sd.topo.FwNS, s.cfg.XFW, "fastpath")
	if err != nil || res.ExitCode != 0 {
		s.cfg.Logf("%s: xfw fastpath: %v", sd.name, err)
		return
	}
	var parts []string
	for _, line := range strings.Split(res.Stdout, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] != "0" {
			parts = append(parts, f[0]+" "+f[1])
		}
	}
	s.cfg.Logf("%s: XDP fast path: %s", sd.name, strings.Join(parts, ", "))
}

// lockDir holds the session locks.
const lockDir = "/run"

// lockPoll is how often a waiting session retries a lock.
const lockPoll = 100 * time.Millisecond

// lockHost takes the lock of subnet x, waiting while ctx allows, and
// returns its release. Sessions with the same subnet would see each other's
// kernel LOG lines (the same addresses in every namespace): they take
// turns. Sessions of different subnets run side by side.
func lockHost(ctx context.Context, x uint8) (func() error, error) {
	path := fmt.Sprintf("%s/xfw-difftest-%d.lock", lockDir, x)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("difftest lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f.Close, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("difftest lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another difftest session (%s): %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
