package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/xfw-dev/xfw/internal/statefile"
)

func init() { commands["boot-restore"] = runBootRestore }

// Where boot-restore looks by default: the netfilter-persistent
// convention's file names in xfw's own directory, and the last good copies.
const (
	defaultBootDir  = "/etc/xfw"
	defaultStateDir = "/var/lib/xfw"
	// lastGoodDir is the directory, below the state directory, holding a
	// copy of each file the last time it loaded.
	lastGoodDir = "last-good"
)

// bootFile is one file boot-restore loads, with the command that loads it.
type bootFile struct {
	name    string // file name in the boot directory
	command string // the multi-call command that reads it on stdin
	what    string // what it holds, for messages
}

// bootFiles are loaded in this order: the sets first, since rules name them.
var bootFiles = []bootFile{
	{name: "ipsets", command: "ipset", what: "ipsets"},
	{name: "rules.v4", command: "iptables-restore", what: "IPv4 ruleset"},
	{name: "rules.v6", command: "ip6tables-restore", what: "IPv6 ruleset"},
}

const bootUsage = `usage: xfw boot-restore [--dir DIR] [--state-dir DIR]

Loads DIR/ipsets (ipset save format), DIR/rules.v4 and DIR/rules.v6
(iptables-save format) into the current network namespace, in that order;
a missing file is skipped. Each file that loads is copied to
STATE-DIR/last-good/; a file that does not load (damaged, refused) is
reported and its last good copy is loaded instead. Exits 0 when every
present file loaded as written, 1 otherwise (a last good copy loaded, or
nothing could be). DIR defaults to /etc/xfw, STATE-DIR to /var/lib/xfw.
`

// runBootRestore is `xfw boot-restore`, the boot unit's command.
func runBootRestore(name string, args []string, env Env) int {
	fs := flag.NewFlagSet("xfw boot-restore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", defaultBootDir, "")
	stateDir := fs.String("state-dir", defaultStateDir, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprint(env.Stderr, bootUsage)
		return exitParameter
	}
	exit := exitOK
	for _, f := range bootFiles {
		if err := bootLoad(f, *dir, *stateDir, env); err != nil {
			fmt.Fprintf(env.Stderr, "xfw boot-restore: %v\n", err)
			exit = exitOther
		}
	}
	return exit
}

// bootLoad loads one file, or its last good copy when it does not load. It
// returns an error whenever the file itself did not load, saying what runs
// instead.
func bootLoad(f bootFile, dir, stateDir string, env Env) error {
	path := filepath.Join(dir, f.name)
	good := filepath.Join(stateDir, lastGoodDir, f.name)
	data, err := statefile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(env.Stdout, "xfw boot-restore: no %s, %s not loaded\n", path, f.what)
		return nil
	}
	if err == nil {
		msg, lerr := bootRun(f, data)
		if lerr == nil {
			fmt.Fprintf(env.Stdout, "xfw boot-restore: %s loaded from %s\n", f.what, path)
			if err := statefile.WriteAtomic(good, data); err != nil {
				return fmt.Errorf("%s loaded, but its last good copy was not saved: %w", path, err)
			}
			return nil
		}
		err = fmt.Errorf("%s (exit %d)", msg, lerr.(bootExit))
	}
	cause := fmt.Errorf("%s not loaded: %w", path, err)
	old, gerr := statefile.ReadFile(good)
	if gerr != nil {
		return fmt.Errorf("%w; no last good copy (%v): %s left as it was", cause, gerr, f.what)
	}
	if msg, lerr := bootRun(f, old); lerr != nil {
		return fmt.Errorf("%w; the last good copy %s did not load either: %s", cause, good, msg)
	}
	return fmt.Errorf("%w; loaded the last good copy %s instead", cause, good)
}

// bootExit is a failed command's exit status.
type bootExit int

func (e bootExit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// bootRun runs the file's command in-process with data on stdin and
// returns its messages (standard error, trimmed) and, when it fails, its
// exit status.
func bootRun(f bootFile, data []byte) (string, error) {
	args := []string{f.command}
	if f.command == "ipset" {
		// -exist: a set the file creates may already be there (a second
		// run of the unit); restore then replaces nothing silently, it
		// adds the members the file lists.
		args = append(args, "-exist", "restore")
	} else {
		// --wait: at boot another service (Docker, ufw, fail2ban) may
		// hold the xtables lock for a moment; failing then would leave
		// the host without its rules (found when tests ran beside other
		// iptables users).
		args = append(args, "--wait")
	}
	var out, errOut bytes.Buffer
	env := Env{Stdin: bytes.NewReader(data), Stdout: &out, Stderr: &errOut}
	if code := Main(args, env); code != exitOK {
		return strings.TrimSpace(errOut.String()), bootExit(code)
	}
	return strings.TrimSpace(errOut.String()), nil
}
