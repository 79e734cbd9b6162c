package dataplane

import "testing"

// TestClassifyNFT: which nftables base chains turn the fast path off in
// the whole namespace, keep it from a device's packets or from sending to
// a device, and which do not matter.
func TestClassifyNFT(t *testing.T) {
	for _, c := range []struct {
		name       string
		chains     []nftChain
		flowtables []string
		all        string
		noRX       map[string]string
		noTX       map[string]string
	}{
		{name: "none"},
		{name: "input and output only", chains: []nftChain{
			{family: nfprotoInet, table: "t", name: "in", hook: nfInetLocalIn},
			{family: nfprotoIPv4, table: "t", name: "out", hook: nfInetLocalOut},
			{family: 3, table: "a", name: "arpin", hook: 0},
		}},
		{name: "forward", chains: []nftChain{{family: nfprotoInet, table: "t", name: "f", hook: 2}},
			all: "nftables chain inet t f (forward hook)"},
		{name: "ip6 postrouting", chains: []nftChain{{family: nfprotoIPv6, table: "nat", name: "post", hook: 4}},
			all: "nftables chain ip6 nat post (postrouting hook)"},
		{name: "ip prerouting", chains: []nftChain{{family: nfprotoIPv4, table: "raw", name: "pre", hook: 0}},
			all: "nftables chain ip raw pre (prerouting hook)"},
		{name: "bridge", chains: []nftChain{{family: nfprotoBridge, table: "b", name: "in", hook: 1}},
			all: "nftables chain bridge b in (input hook)"},
		{name: "flowtable", flowtables: []string{"nftables flowtable inet t ft"}, all: "nftables flowtable inet t ft"},
		{name: "netdev ingress and egress", chains: []nftChain{
			{family: nfprotoNetdev, table: "n", name: "i", hook: nfNetdevIngress, devices: []string{"eth0", "veth*"}},
			{family: nfprotoNetdev, table: "n", name: "e", hook: nfNetdevEgress, devices: []string{"eth1"}},
		}, noRX: map[string]string{"eth0": "nftables chain netdev n i (ingress hook)", "veth*": "nftables chain netdev n i (ingress hook)"},
			noTX: map[string]string{"eth1": "nftables chain netdev n e (egress hook)"}},
		{name: "inet ingress", chains: []nftChain{{family: nfprotoInet, table: "t", name: "i", hook: nfInetIngress, devices: []string{"eth2"}}},
			noRX: map[string]string{"eth2": "nftables chain inet t i (ingress hook)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := classifyNFT(c.chains, c.flowtables)
			if l.all != c.all {
				t.Errorf("off %q, want %q", l.all, c.all)
			}
			for _, m := range []struct {
				what      string
				got, want map[string]string
			}{{"no source", l.noRX, c.noRX}, {"no target", l.noTX, c.noTX}} {
				if len(m.got) != len(m.want) {
					t.Errorf("%s: %v, want %v", m.what, m.got, m.want)
				}
				for k, v := range m.want {
					if m.got[k] != v {
						t.Errorf("%s %s: %q, want %q", m.what, k, m.got[k], v)
					}
				}
			}
		})
	}
}

// TestDeviceLimit: a device's limit by its name or a wildcard's prefix.
func TestDeviceLimit(t *testing.T) {
	m := map[string]string{"eth0": "a", "veth*": "b"}
	for name, want := range map[string]string{"eth0": "a", "eth01": "", "veth7": "b", "veth": "b", "lo": ""} {
		if got := deviceLimit(m, name); got != want {
			t.Errorf("deviceLimit(%q) = %q, want %q", name, got, want)
		}
	}
}
