package kubeproxy

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkCompileKubeProxy times the front end and the compiler on
// kube-proxy's ruleset (NAT written as ACCEPT) of 1,000 services × 10
// endpoints (KP_SERVICES: other numbers, comma-separated):
// `go test -run X -bench CompileKubeProxy -cpuprofile …`.
func BenchmarkCompileKubeProxy(b *testing.B) {
	sizes := []int{1000}
	if env := os.Getenv("KP_SERVICES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("KP_SERVICES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
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
				b.Logf("parse %v compile %v entries %d chunks %d classes %d iters %d", t1.Sub(t0), t2.Sub(t1), len(g.Entries), g.NumChunks, len(g.ClassChunks)/int(g.NumChunks), g.MaxIters)
			}
		})
	}
}
