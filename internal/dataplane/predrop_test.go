package dataplane

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestPreDropCfgRoundTrip checks that the leading address drops a slot's
// configuration carries (familyCfg: bpf/predrop.h reads them) read back
// (preDropsOfCfg, as RunningGeneration does) as the compiler decided them.
func TestPreDropCfgRoundTrip(t *testing.T) {
	tests := []struct {
		name, rules string
		n           int
	}{
		{"none", "*filter\n-A FORWARD -s 10.100.0.0/16 -j DROP\nCOMMIT\n", 0},
		{"source and destination", "*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -s 10.100.0.0/16 -j DROP\n" +
			"-A PREROUTING -d 192.0.2.0/24 -j DROP\n-A PREROUTING -p udp -j DROP\nCOMMIT\n", 2},
	}
	for _, tc := range tests {
		rs, err := iptables.Restore(ir.IPv4, strings.NewReader(tc.rules), nil, iptables.RestoreOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rs.Chains = iptables.OrderedChains(rs)
		g, err := compiler.Compile(rs, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(g.PreDrops()) != tc.n {
			t.Fatalf("%s: compiled %d leading drops, want %d", tc.name, len(g.PreDrops()), tc.n)
		}
		c := familyCfg(g, nil)
		if int(c.PreDropN) != tc.n {
			t.Errorf("%s: cfg predrop_n %d, want %d", tc.name, c.PreDropN, tc.n)
		}
		back := preDropsOfCfg(&c)
		if !reflect.DeepEqual(back, g.PreDrops()) {
			t.Errorf("%s: read back %+v, compiled %+v", tc.name, back, g.PreDrops())
		}
	}
}
