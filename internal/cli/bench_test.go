package cli

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkUpdatePhases10K measures the pure phases of one rule update on
// a ruleset of 10,000 5-tuple rules (the benchmark suite's update section):
// decoding the running ruleset, compiling it, encoding it and matching
// counters. `XFW_TRACE=1 xfw iptables …` shows the same phases in a real
// command, with the kernel's part.
func BenchmarkUpdatePhases10K(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "-A FORWARD -s 10.%d.%d.%d/32 -d 10.200.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT\n", i>>16&255, i>>8&255, i&255, 1000+i)
	}
	sb.WriteString("COMMIT\n")
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(sb.String()), nil, iptables.RestoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	saved, err := rs.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := ir.UnmarshalRuleset(saved); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := compiler.Compile(rs, compiler.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := rs.MarshalBinary(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("counters", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = counterSources(rs, rs, true, nil)
		}
	})
}

// BenchmarkCompile100K compiles 100,000 random 5-tuple FORWARD rules (the
// benchmark suite's scaling ruleset: one source, destination and pair of
// ports each) from their parsed form, the restore's compile without the
// kernel. -benchmem and -memprofile show where the compile allocates.
func BenchmarkCompile100K(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&sb, "-A FORWARD -s 10.100.%d.%d/32 -d 10.200.%d.%d/32 -p udp -m udp --sport %d --dport %d -j ACCEPT\n",
			rng.Intn(256), 1+rng.Intn(254), rng.Intn(256), 1+rng.Intn(254), 1024+rng.Intn(64512), 1+rng.Intn(65535))
	}
	sb.WriteString("COMMIT\n")
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(sb.String()), nil, iptables.RestoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := compiler.Compile(rs, compiler.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
