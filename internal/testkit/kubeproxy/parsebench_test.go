package kubeproxy

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkParseKubeProxy measures the front end alone: parsing
// kube-proxy's full sync of KP_SERVICES services (default 1,000) × 10
// endpoints, without compiling it.
func BenchmarkParseKubeProxy(b *testing.B) {
	for _, n := range kpSizes(b) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			svcs, err := Generate(DefaultOptions(n, 10))
			if err != nil {
				b.Fatal(err)
			}
			text := IPTables(svcs, DefaultOptions(n, 10).ClusterCIDR, IPTablesOptions{Bootstrap: true})
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i++ {
				if _, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// processCPU returns the CPU time (user and system) the process has used:
// on a machine shared with other work it varies far less than wall time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
