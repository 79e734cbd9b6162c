package kubeproxy

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkCompileKubeProxy times the front end and the compiler on
// kube-proxy's ruleset (NAT written as ACCEPT) of 1,000 services × 10
// endpoints (KP_SERVICES: other numbers, comma-separated):
// `go test -run X -bench CompileKubeProxy -cpuprofile …`; KP_HEAPPROFILE=FILE
// writes the live heap after the compile, KP_TRACE=1 logs the compile's
// stages.
func BenchmarkCompileKubeProxy(b *testing.B) {
	for _, n := range kpSizes(b) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			svcs, err := Generate(DefaultOptions(n, 10))
			if err != nil {
				b.Fatal(err)
			}
			text := IPTables(svcs, DefaultOptions(n, 10).ClusterCIDR, IPTablesOptions{Bootstrap: true, NATAsAccept: true})
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
				if err != nil {
					b.Fatal(err)
				}
				rs.Chains = iptables.OrderedChains(rs)
				t1, cpu1, alloc1 := time.Now(), cpuTime(), totalAlloc()
				g, err := compiler.Compile(rs, compiler.Options{Trace: kpTrace(b)})
				if err != nil {
					b.Fatal(err)
				}
				t2, cpu2, alloc2 := time.Now(), cpuTime(), totalAlloc()
				if path := os.Getenv("KP_HEAPPROFILE"); path != "" {
					writeHeapProfile(b, path, g)
				}
				b.Logf("compile CPU %v allocated %d MiB", cpu2-cpu1, (alloc2-alloc1)>>20)
				b.Logf("parse %v compile %v entries %d chunks %d classes %d iters %d", t1.Sub(t0), t2.Sub(t1), len(g.Entries), g.NumChunks, g.ClassChunks.Len(), g.MaxIters)
			}
		})
	}
}

// kpTrace returns, with KP_TRACE set, a compiler.Options.Trace that logs
// each stage of the compile and its wall time; nil without it.
func kpTrace(b *testing.B) func(string, time.Time) time.Time {
	if os.Getenv("KP_TRACE") == "" {
		return nil
	}
	return func(stage string, start time.Time) time.Time {
		now := time.Now()
		b.Logf("%-32s %8.2f ms", stage, float64(now.Sub(start).Microseconds())/1000)
		return now
	}
}

// cpuTime returns the process's CPU time so far (user and system, every
// thread): the compile's CPU, measured around it, is its own and the
// collector's, whatever else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// totalAlloc returns the bytes the heap has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// kpSizes returns the numbers of services KP_SERVICES names
// (comma-separated), 1,000 without it.
func kpSizes(b *testing.B) []int {
	env := os.Getenv("KP_SERVICES")
	if env == "" {
		return []int{1000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("KP_SERVICES: %v", err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// writeHeapProfile writes the heap's live objects to path while g (the
// compiled generation) is still in use: what a restore holds at its peak.
func writeHeapProfile(b *testing.B, path string, g *compiler.Generation) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
	runtime.KeepAlive(g)
}

// TestTenThousandServicesCompile compiles kube-proxy's ruleset (NAT
// written as ACCEPT) of 10,000 services × 10 endpoints: its nat chains
// one region for nat PREROUTING and nat OUTPUT (under 1.7 entries per
// rule: 532,967 for 330,027 rules, where a region per view made
// 1,065,466), within the data plane's bound, and 90,000 random-mode
// statistic matches that share one probe per probability (stateless, so
// sharing is exact), far below the 16-bit probe index.
func TestTenThousandServicesCompile(t *testing.T) {
	const services, endpoints = 10_000, 10
	o := DefaultOptions(services, endpoints)
	svcs, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	text := IPTables(svcs, o.ClusterCIDR, IPTablesOptions{Bootstrap: true, NATAsAccept: true})
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Chains = iptables.OrderedChains(rs)
	g, err := compiler.Compile(rs, compiler.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	rules := 0
	for _, tb := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		for _, c := range tb.Chains {
			rules += len(c.Rules)
		}
	}
	if len(g.Entries) < rules || len(g.Entries) > rules*17/10 || len(g.Entries) > compiler.MaxEntries {
		t.Errorf("%d entries for %d rules, want %d to %d (one region per nat chain for both nat views), within %d",
			len(g.Entries), rules, rules, rules*17/10, compiler.MaxEntries)
	}
	statistic := map[compiler.Probe]bool{}
	for _, pr := range g.Probes {
		if pr.Kind == compiler.ProbeStatistic {
			statistic[pr] = true
		}
	}
	// Probabilities 1/10, 1/9, …, 1/2: one probe each.
	if len(statistic) != endpoints-1 || len(g.Probes) >= compiler.MaxProbes {
		t.Errorf("%d statistic probes of %d, want %d", len(statistic), len(g.Probes), endpoints-1)
	}
}

// BenchmarkReloadFrontEnd times a reload's front end on kube-proxy's
// ruleset of 1,000 services × 10 endpoints (KP_SERVICES: other numbers):
// the restore of the full sync onto the running ruleset decoded from its
// saved form (ir.UnmarshalRulesetSkip, as dataplane.RunningRulesetSkip
// does: the tables the restore replaces
// without their rules) inside the restore's base function, beside the input's parse. It
// logs the wall and CPU time of each restore.
func BenchmarkReloadFrontEnd(b *testing.B) {
	for _, n := range kpSizes(b) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			svcs, err := Generate(DefaultOptions(n, 10))
			if err != nil {
				b.Fatal(err)
			}
			text := IPTables(svcs, DefaultOptions(n, 10).ClusterCIDR, IPTablesOptions{Bootstrap: true})
			running, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
			if err != nil {
				b.Fatal(err)
			}
			saved, err := running.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			running = nil
			base := func(replaced func(string) bool) (*ir.Ruleset, error) {
				rs, _, err := ir.UnmarshalRulesetSkip(saved, ir.Skip{Tables: replaced})
				return rs, err
			}
			for i := 0; i < b.N; i++ {
				runtime.GC()
				t0, cpu0 := time.Now(), cpuTime()
				if _, err := iptables.RestoreReplacing(ir.IPv4, strings.NewReader(text), base, iptables.RestoreOptions{}); err != nil {
					b.Fatal(err)
				}
				b.Logf("reload front end: wall %v CPU %v", time.Since(t0), cpuTime()-cpu0)
			}
		})
	}
}

// BenchmarkRunningDecode times the decode of kube-proxy's running ruleset
// (KP_SERVICES services × 10 endpoints, 1,000 unless set) from its saved
// form: in full, and without the rules of filter and nat (a reload that
// replaces both, ir.UnmarshalRulesetSkip).
func BenchmarkRunningDecode(b *testing.B) {
	for _, n := range kpSizes(b) {
		svcs, err := Generate(DefaultOptions(n, 10))
		if err != nil {
			b.Fatal(err)
		}
		text := IPTables(svcs, DefaultOptions(n, 10).ClusterCIDR, IPTablesOptions{Bootstrap: true})
		running, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		saved, err := running.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			skip func(string) bool
		}{{"full", nil}, {"replaced", func(string) bool { return true }}} {
			b.Run(fmt.Sprint(n, "/", c.name), func(b *testing.B) {
				for b.Loop() {
					if _, _, err := ir.UnmarshalRulesetSkip(saved, ir.Skip{Tables: c.skip}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkNoflushReloadFrontEnd times the front end of kube-proxy's sync
// as it runs it, iptables-restore --noflush --counters of the full sync
// (without the built-in chains' jumps, one endpoint moved) onto the
// running ruleset of KP_SERVICES services × 10 endpoints (1,000 unless
// set), decoded from its saved form inside the restore's base function:
// sub-benchmark "skip" without the rules of the chains the input flushes
// first (iptables.RestoreSkipping, as the cli does), "full" with every
// rule. It logs the wall and CPU time of each restore.
func BenchmarkNoflushReloadFrontEnd(b *testing.B) {
	for _, n := range kpSizes(b) {
		o := DefaultOptions(n, 10)
		svcs, err := Generate(o)
		if err != nil {
			b.Fatal(err)
		}
		running, err := iptables.Restore(ir.IPv4, strings.NewReader(IPTables(svcs, o.ClusterCIDR, IPTablesOptions{Bootstrap: true})), nil, iptables.RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		saved, err := running.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		running = nil
		before := svcs[n/2]
		svcs[n/2] = MoveEndpoint(&before, netip.MustParseAddr("10.183.255.254"))
		text := IPTables(svcs, o.ClusterCIDR, IPTablesOptions{})
		for _, mode := range []string{"skip", "full"} {
			b.Run(fmt.Sprint(n, "/", mode), func(b *testing.B) {
				base := func(skip ir.Skip) (*ir.Ruleset, error) {
					if mode == "full" {
						skip = ir.Skip{}
					}
					rs, _, err := ir.UnmarshalRulesetSkip(saved, skip)
					return rs, err
				}
				for i := 0; i < b.N; i++ {
					runtime.GC()
					t0, cpu0 := time.Now(), cpuTime()
					if _, err := iptables.RestoreSkipping(ir.IPv4, strings.NewReader(text), base, iptables.RestoreOptions{NoFlush: true, Counters: true}); err != nil {
						b.Fatal(err)
					}
					b.Logf("noflush reload front end (%s): wall %v CPU %v", mode, time.Since(t0), cpuTime()-cpu0)
				}
			})
		}
	}
}
