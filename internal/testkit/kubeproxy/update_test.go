package kubeproxy

import (
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkUpdateKubeProxy times kube-proxy's one-service partial sync
// (iptables-restore --noflush) onto the running ruleset of KP_FULL, the
// update read from KP_UPDATE (files of `xfwbench kubeproxy-gen`), and
// KP_CPUPROFILE profiles the update's compile.
func BenchmarkUpdateKubeProxy(b *testing.B) {
	full, update := os.Getenv("KP_FULL"), os.Getenv("KP_UPDATE")
	if full == "" || update == "" {
		b.Skip("KP_FULL and KP_UPDATE name the inputs")
	}
	read := func(p string) string {
		t, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return string(t)
	}
	base, err := iptables.Restore(ir.IPv4, strings.NewReader(read(full)), nil, iptables.RestoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	base.Chains = iptables.OrderedChains(base)
	text := read(update)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rs, err := iptables.RestoreOnto(ir.IPv4, strings.NewReader(text), func() (*ir.Ruleset, error) { return base, nil }, iptables.RestoreOptions{NoFlush: true})
		if err != nil {
			b.Fatal(err)
		}
		rs.Chains = iptables.OrderedChains(rs)
		t1 := time.Now()
		if p := os.Getenv("KP_CPUPROFILE"); p != "" {
			f, _ := os.Create(p)
			pprof.StartCPUProfile(f)
		}
		g, err := compiler.Compile(rs, compiler.Options{})
		pprof.StopCPUProfile()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("parse %v compile %v entries %d", t1.Sub(t0), time.Since(t1), len(g.Entries))
	}
}
