// Command xfw is an iptables-compatible packet filter enforced with eBPF
// (XDP ingress, TCX egress). See README.md and docs/.
//
// It owns only the process: the garbage collector's tuning and the exit
// status; every command is internal/cli's, which it imports and nothing
// imports it. No test harness is linked in (internal/testkit is not among
// its dependencies): `xfw difftest` execs the separate xfw-difftest
// program.
package main

import (
	"os"
	"runtime/debug"

	"github.com/xfw-dev/xfw/internal/cli"
)

// gcPercent and memoryLimit tune the garbage collector for short commands
// that allocate most of what they use at once (a decoded ruleset, the
// compiler's interval sets): at 10,000 rules Go's default (100) spends
// about a third of the compile time collecting. The limit bounds the heap
// of large rulesets. GOGC and GOMEMLIMIT in the environment win.
const (
	gcPercent   = 400
	memoryLimit = 1 << 30
)

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	os.Exit(cli.Main(os.Args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
