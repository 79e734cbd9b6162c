package compiler

import (
	"fmt"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkAppendInPlace times AppendRule of BenchmarkCmdLatency's 5-tuple
// rule onto n such rules, alone or beside a Docker host's nat table.
func BenchmarkAppendInPlace(b *testing.B) {
	for _, nat := range []bool{false, true} {
		for _, n := range []int{1, 10000} {
			b.Run(fmt.Sprintf("rules=%d/nat=%v", n, nat), func(b *testing.B) {
				var lines []string
				if nat {
					lines = append(lines, "-t nat -N DOCKER",
						"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
						"-t nat -A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
						"-t nat -A POSTROUTING -s 172.17.0.0/16 ! -o eth0 -j MASQUERADE",
						"-t nat -A DOCKER -i eth1 -j RETURN",
						"-t nat -A DOCKER ! -i eth1 -p tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80")
				}
				for i := range n {
					lines = append(lines, fmt.Sprintf("-A FORWARD -s 10.1.%d.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT", i/250, i%250+1, 1024+i%60000))
				}
				rs := parseRuleset(b, ir.IPv4, lines...)
				g, err := Compile(rs, Options{Interfaces: testIfaces})
				if err != nil {
					b.Fatal(err)
				}
				chain := rs.Chain("FORWARD")
				b.ResetTimer()
				for i := range b.N {
					if i%AppendSlack == AppendSlack-1 {
						b.StopTimer()
						if g, err = Compile(rs, Options{Interfaces: testIfaces}); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					line := fmt.Sprintf("-A FORWARD -s 10.99.%d.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT", i/250%250, i%250+1, 1000+i%60000)
					b.StopTimer()
					r := parseRuleset(b, ir.IPv4, line).Chain("FORWARD").Rules[0]
					chain.Rules = append(chain.Rules, r)
					k := len(chain.Rules) - 1
					b.StartTimer()
					g, err = AppendRule(g, r, ChainForward, counterIn(rs, chain, k), RuleRef{Chain: "FORWARD", Index: k}, testIfaces)
					if err != nil {
						b.Fatalf("append %d: %v", i, err)
					}
				}
			})
		}
	}
}
