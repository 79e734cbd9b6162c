package compiler_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// TestKubeProxyLaterPacketWalk walks a later packet of a pod's connection
// to a ClusterIP (DNATed to an endpoint, forwarded) through the FORWARD
// walk of kube-proxy's 1K- and 10K-service rulesets: accepted, counted to filter
// FORWARD's four jumps (NEW) or to KUBE-FORWARD's jump and its
// ESTABLISHED rule, and meeting at most the entries it met when the
// later packet's cost was last cut (xfwbench kubeproxy's "later packet"
// column): the nat gates, no reroute probe, no CALL of an empty chain;
// and every entry it meets in one chunk, the walk's (filterRegionsFirst).
func TestKubeProxyLaterPacketWalk(t *testing.T) {
	for _, n := range []int{1000, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if n > 1000 && testing.Short() {
				t.Skip("-short: the 10K ruleset takes seconds")
			}
			kubeProxyLaterWalk(t, n)
		})
	}
}

// kubeProxyLaterWalk checks the later packet's walk of n services (see
// TestKubeProxyLaterPacketWalk).
func kubeProxyLaterWalk(t *testing.T, n int) {
	o := kubeproxy.DefaultOptions(n, 10)
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	text := kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true})
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Chains = iptables.OrderedChains(rs)
	g, err := compiler.Compile(rs, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v4 := compiler.AddrU128
	pod, svc := netip.MustParseAddr("10.100.0.1"), &svcs[0]
	ep := svc.Endpoints[0]
	for _, tc := range []struct {
		name    string
		ct      uint32
		rules   []int // filter FORWARD's rules counted, in order
		maxPath int
	}{
		{"NEW, confirmed", compiler.CtValue(compiler.CtsNew, false, uint8(ir.CtStatusConfirmed), 6), []int{0, 1, 2, 3}, 8},
		{"ESTABLISHED", compiler.CtValue(compiler.CtsEstablished, false,
			uint8(ir.CtStatusConfirmed|ir.CtStatusSeenReply), 6), []int{1}, 5},
	} {
		p := &compiler.Packet{Src: v4(pod), Dst: v4(ep.Addr()), Proto: 6, Sport: 1024, Dport: uint32(ep.Port()),
			TCPFlags: 0x10, Len: 60, TTL: 63, IIF: 2, OIF: 3, Ct: tc.ct,
			CtOrigSrc: v4(pod), CtOrigDst: v4(svc.ClusterIP), CtOrigSport: 1024, CtOrigDport: uint32(svc.Port),
			CtReplSport: uint32(ep.Port()), CtReplDport: 1024}
		res := g.Classify(p, compiler.ChainForward)
		if res.Hotdrop || res.Entry < 0 || g.Entries[res.Entry].Action != compiler.ActAccept {
			t.Fatalf("%s: result %+v, want the walk's ACCEPT", tc.name, res)
		}
		var got []int
		for _, e := range res.Path {
			id := g.Entries[e].Rule
			if id == compiler.NoRule || id < compiler.NumChains {
				continue // gates, probes, policies
			}
			ref := g.Rules[id-compiler.NumChains]
			if ref.Table == "" && ref.Chain == "FORWARD" {
				got = append(got, ref.Index)
			}
		}
		if !slices.Equal(got, tc.rules) {
			t.Errorf("%s: filter FORWARD's rules counted %v, want %v", tc.name, got, tc.rules)
		}
		for _, e := range append(res.Path, res.Entry) {
			if e/compiler.ChunkBits != res.Entry/compiler.ChunkBits {
				t.Errorf("%s: entry %d in chunk %d, the walk's end in %d (path %v)", tc.name, e,
					e/compiler.ChunkBits, res.Entry/compiler.ChunkBits, res.Path)
			}
		}
		if len(res.Path) > tc.maxPath {
			t.Errorf("%s: %d entries met on the way (%v), at most %d before", tc.name, len(res.Path), res.Path, tc.maxPath)
		}
	}
}
