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
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/cli"
)

// The memory limit tunes the garbage collector for short commands that
// allocate most of what they use at once (a decoded ruleset, the
// compiler's interval sets): it bounds the heap of large rulesets, an
// eighth of the machine's memory, from 1 GiB to 4 GiB, so that a ruleset
// whose live heap comes near 1 GiB does not make the collector run
// without pause (11 of a 17 s restore of kube-proxy's 10,000 services ×
// 10 endpoints once did). The collector's pace is Go's default (GOGC
// 100): since the compiler's entries hold sparse conditions (a few
// pointers each instead of one per field) that ruleset holds about 350 MB
// live after the compile instead of 630 MB, and the 400 this used to set
// saved about a second of CPU per restore of it for no wall time on two
// cores, while raising its peak RSS from 1.3 to 1.7 GB (2.2 GB replacing
// it; docs/benchmarks.md). GOGC and GOMEMLIMIT in the environment win.
const (
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
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit())
	}
	stop := startCPUProfile(os.Getenv("XFW_CPUPROFILE"))
	code := cli.Main(os.Args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	writeHeapProfile(os.Getenv("XFW_MEMPROFILE"))
	os.Exit(code)
}

// startCPUProfile writes a CPU profile of the command to path (the
// environment's XFW_CPUPROFILE; nothing when it is empty), for `go tool
// pprof`; the returned function ends it. A profile that cannot be written
// is reported on stderr and does not change the command's outcome.
func startCPUProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "xfw: XFW_CPUPROFILE: %v\n", err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeHeapProfile writes the heap profile of the command to path (the
// environment's XFW_MEMPROFILE; nothing when it is empty) when it ends:
// `go tool pprof -sample_index=alloc_space` shows where the command
// allocated. A profile that cannot be written is reported on stderr and
// does not change the command's outcome.
func writeHeapProfile(path string) {
	if path == "" {
		return
	}
	runtime.GC() // the profile holds the allocations up to the last collection
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "xfw: XFW_MEMPROFILE: %v\n", err)
	}
}
