package kubeproxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkCompileKubeProxy times the front end and the compiler on
// kube-proxy's ruleset (NAT written as ACCEPT) of 1,000 services × 10
// endpoints: `go test -run X -bench CompileKubeProxy -cpuprofile …`.
func BenchmarkCompileKubeProxy(b *testing.B) {
	for _, n := range []int{1000} {
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
				t1 := time.Now()
				g, err := compiler.Compile(rs, compiler.Options{})
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				b.Logf("parse %v compile %v entries %d chunks %d iters %d", t1.Sub(t0), t2.Sub(t1), len(g.Entries), g.NumChunks, g.MaxIters)
			}
		})
	}
}
