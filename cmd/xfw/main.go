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

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/cli"
)

// gcPercent and the memory limit tune the garbage collector for short
// commands that allocate most of what they use at once (a decoded ruleset,
// the compiler's interval sets): at 10,000 rules Go's default (100) spends
// about a third of the compile time collecting. The limit bounds the heap
// of large rulesets: an eighth of the machine's memory, from 1 GiB to
// 4 GiB. A fixed 1 GiB was less than kube-proxy's 10,000 services × 10
// endpoints hold live while compiling (about 1 GiB), so the collector ran
// without pause: 11 of a 17 s restore replacing that ruleset, 3 s with
// 2 GiB. GOGC and GOMEMLIMIT in the environment win.
const (
	gcPercent      = 400
	minMemoryLimit = 1 << 30
	maxMemoryLimit = 4 << 30
	// memoryShare is the machine's memory divided by the limit.
	memoryShare = 8
)

// memoryLimit returns the heap limit for this machine (see above).
func memoryLimit() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return minMemoryLimit
	}
	total := uint64(si.Totalram) * uint64(si.Unit)
	return int64(min(max(total/memoryShare, minMemoryLimit), maxMemoryLimit))
}

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit())
	}
	os.Exit(cli.Main(os.Args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
