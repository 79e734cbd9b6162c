package cli

import (
	"fmt"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

func BenchmarkTmpEncode(b *testing.B) {
	rs := &ir.Ruleset{Family: ir.IPv4}
	c := &ir.Chain{Name: "FORWARD", Policy: ir.VerdictAccept}
	rs.Chains = []*ir.Chain{{Name: "INPUT", Policy: ir.VerdictAccept}, c, {Name: "OUTPUT", Policy: ir.VerdictAccept}}
	for i := 0; i < 10000; i++ {
		r, err := iptables.ParseRule(ir.IPv4, "FORWARD", []string{"-s", fmt.Sprintf("10.1.%d.%d/32", i/250, i%250+1), "-d", "10.2.0.1/32", "-p", "udp", "-m", "udp", "--sport", fmt.Sprint(1024 + i), "--dport", "53", "-j", "ACCEPT"})
		if err != nil {
			b.Fatal(err)
		}
		c.Rules = append(c.Rules, r...)
	}
	_, enc, err := rs.MarshalBinaryIndexed(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			_, _, err := rs.MarshalBinaryIndexed(enc)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
