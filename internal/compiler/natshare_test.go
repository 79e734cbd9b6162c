package compiler

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// walkSummary is what a walk does, independent of entry positions: the
// counters of the entries it counted, in order, and its terminal entry's
// counter, action and operands (a DNAT's address and port).
type walkSummary struct {
	counted         []uint32
	rule            uint32
	action          Action
	next            uint32
	aux             uint16
	policy, hotdrop bool
}

// summarize classifies p (made fresh: MARK entries change it) in chain
// of g.
func summarize(g *Generation, p *Packet, chain int) walkSummary {
	res := g.Classify(p, chain)
	var w walkSummary
	for _, i := range res.Path {
		if e := &g.Entries[i]; e.Flags&EFCount != 0 && e.Rule != NoRule {
			w.counted = append(w.counted, e.Rule)
		}
	}
	w.hotdrop = res.Hotdrop
	if res.Entry < 0 {
		w.policy = true
		return w
	}
	e := &g.Entries[res.Entry]
	w.rule, w.action, w.aux = e.Rule, e.Action, e.Aux
	if e.Action == ActDNAT || e.Action == ActSNAT {
		w.next = e.Next
	}
	return w
}

// TestNatSharedRegionsWalkAsPerView compiles kube-proxy's ruleset (with
// DNAT and with ACCEPT in its place) with the nat chains' regions shared
// by the nat PREROUTING and OUTPUT views and with a region per view, and
// checks that random packets to its services (ClusterIPs, NodePorts,
// other ports; from endpoints, pods and outside; the statistic probes'
// answers drawn per packet) walk the same in INPUT, FORWARD and OUTPUT:
// the same rules counted in order, the same verdict.
func TestNatSharedRegionsWalkAsPerView(t *testing.T) {
	o := kubeproxy.DefaultOptions(40, 4)
	o.NodePortEvery = 3
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, accept := range []bool{false, true} {
		text := kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true, NATAsAccept: accept})
		rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs.Chains = iptables.OrderedChains(rs)
		shared, err := Compile(rs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		shareNatViews = false
		perView, err := Compile(rs, Options{})
		shareNatViews = true
		if err != nil {
			t.Fatal(err)
		}
		if len(shared.Entries) >= len(perView.Entries) {
			t.Fatalf("accept=%v: %d entries shared, %d per view: nothing shared", accept, len(shared.Entries), len(perView.Entries))
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(text))))
		addr := func(a netip.Addr) U128 {
			b := a.As4()
			return U64(uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]))
		}
		dnats := [NumChains]int{}
		for i := 0; i < 4000; i++ {
			s := &svcs[rng.IntN(len(svcs))]
			dst, dport := addr(s.ClusterIP), uint32(s.Port)
			switch rng.IntN(4) {
			case 0:
				dport = uint32(rng.IntN(65536))
			case 1:
				if s.NodePort != 0 {
					dst, dport = U64(0xc0a80101), uint32(s.NodePort)
				}
			}
			src := U64(0xc0a80205) // outside the cluster
			switch rng.IntN(3) {
			case 0:
				src = addr(s.Endpoints[rng.IntN(len(s.Endpoints))].Addr())
			case 1:
				src = U64(10<<24 | 1<<16 | 2<<8 | 3) // a pod
			}
			draw, addrType := rng.Uint64(), rng.Uint32N(addrTypeDomain)
			for chain := 0; chain < NumChains; chain++ {
				mk := func() *Packet {
					p := &Packet{Proto: 6, Sport: 40000, Dport: dport, TCPFlags: 0x02, TTL: 64,
						Ct: CtValue(CtsNew, false, 0, 6), IIF: 2, OIF: 3, Src: src, Dst: dst, AddrType: addrType}
					if chain == ChainOutput {
						p.IIF = 0
					}
					p.Statistic = func(pr Probe) bool { return (draw^uint64(pr.Val)*0x9e3779b97f4a7c15)>>63 == 0 }
					return p
				}
				a, b := summarize(shared, mk(), chain), summarize(perView, mk(), chain)
				if !slices.Equal(a.counted, b.counted) || a.rule != b.rule || a.action != b.action ||
					a.next != b.next || a.aux != b.aux || a.policy != b.policy || a.hotdrop != b.hotdrop {
					t.Fatalf("accept=%v, packet %d, chain %d: shared %+v, per view %+v", accept, i, chain, a, b)
				}
				if a.action == ActDNAT {
					dnats[chain]++
				}
			}
		}
		if !accept && (dnats[ChainInput] == 0 || dnats[ChainForward] == 0 || dnats[ChainOutput] == 0) {
			t.Errorf("DNAT verdicts per walk %v: a walk never reached an endpoint", dnats)
		}
		t.Logf("accept=%v: %d entries shared, %d per view; DNAT verdicts per walk %v", accept, len(shared.Entries), len(perView.Entries), dnats)
	}
}
