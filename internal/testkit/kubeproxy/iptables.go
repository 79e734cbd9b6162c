package kubeproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Kube-proxy's fixed chains, in the order it declares them.
var (
	filterChains = []string{"KUBE-NODEPORTS", "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL",
		"KUBE-FORWARD", "KUBE-PROXY-FIREWALL"}
	natChains = []string{"KUBE-NODEPORTS", "KUBE-SERVICES", "KUBE-MARK-MASQ", "KUBE-POSTROUTING"}
)

// bootstrapFilter and bootstrapNat are the jumps from the built-in chains
// that kube-proxy (and the kubelet, for KUBE-FIREWALL) install with
// `iptables -I` at start-up (iptablesJumpChains), written here as rules of
// the restore so that a generated ruleset is complete on its own.
var (
	bootstrapFilter = []string{
		`-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`,
		`-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
		`-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
		`-A INPUT -j KUBE-FIREWALL`,
		`-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
		`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
		`-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
		`-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
		`-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A OUTPUT -j KUBE-FIREWALL`,
	}
	bootstrapNat = []string{
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
	}
)

// IPTablesOptions select variants of the iptables-mode output.
type IPTablesOptions struct {
	// Bootstrap adds the built-in chains and kube-proxy's jumps from them
	// (see bootstrapFilter), for loading into an empty namespace.
	Bootstrap bool
	// NATAsAccept writes ACCEPT in place of DNAT and MASQUERADE, for
	// firewalls that cannot translate addresses: the walk (chains,
	// statistic, marks) stays kube-proxy's.
	NATAsAccept bool
}

// chainSet collects the rules of chains in declaration order.
type chainSet struct {
	order []string
	rules map[string][]string
}

func newChainSet(fixed []string) *chainSet {
	c := &chainSet{rules: map[string][]string{}}
	for _, name := range fixed {
		c.declare(name)
	}
	return c
}

// declare adds chain name (once).
func (c *chainSet) declare(name string) {
	if _, ok := c.rules[name]; !ok {
		c.order = append(c.order, name)
		c.rules[name] = nil
	}
}

// add appends the rule "-A chain args".
func (c *chainSet) add(chain string, args ...string) {
	c.declare(chain)
	c.rules[chain] = append(c.rules[chain], "-A "+chain+" "+strings.Join(args, " "))
}

// write renders the table: the fixed chains first, then the others sorted
// by name (as kube-proxy's tests list them), the rules chain by chain.
func (c *chainSet) write(b *strings.Builder, table string, fixed int, builtin []string, extra []string, deleted []string) {
	fmt.Fprintf(b, "*%s\n", table)
	for _, name := range builtin {
		fmt.Fprintf(b, ":%s ACCEPT [0:0]\n", name)
	}
	names := append([]string(nil), c.order[:fixed]...)
	rest := append([]string(nil), c.order[fixed:]...)
	sort.Strings(rest)
	names = append(names, rest...)
	for _, name := range append(names, deleted...) {
		fmt.Fprintf(b, ":%s - [0:0]\n", name)
	}
	for _, r := range extra {
		b.WriteString(r + "\n")
	}
	for _, name := range names {
		for _, r := range c.rules[name] {
			b.WriteString(r + "\n")
		}
	}
	for _, name := range deleted {
		fmt.Fprintf(b, "-X %s\n", name)
	}
	b.WriteString("COMMIT\n")
}

// quote is kube-proxy's comment quoting: quoted only with spaces.
func quote(s string) string {
	if strings.ContainsAny(s, " \t") {
		return `"` + s + `"`
	}
	return s
}

// filterTable is kube-proxy's filter table: fixed, as every generated
// service has endpoints and none is a load balancer.
func filterTable() *chainSet {
	c := newChainSet(filterChains)
	c.add("KUBE-FIREWALL", "-m comment --comment", quote("block incoming localnet connections"),
		"-d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP")
	c.add("KUBE-FORWARD", "-m conntrack --ctstate INVALID -j DROP")
	c.add("KUBE-FORWARD", "-m comment --comment", quote("kubernetes forwarding rules"),
		"-m mark --mark "+MasqueradeMark+"/"+MasqueradeMark+" -j ACCEPT")
	c.add("KUBE-FORWARD", "-m comment --comment", quote("kubernetes forwarding conntrack rule"),
		"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	return c
}

// natFixed writes the nat table's fixed chains' rules but the services'.
func natFixed(c *chainSet, o IPTablesOptions) {
	c.add("KUBE-MARK-MASQ", "-j MARK --or-mark "+MasqueradeMark)
	c.add("KUBE-POSTROUTING", "-m mark ! --mark "+MasqueradeMark+"/"+MasqueradeMark+" -j RETURN")
	c.add("KUBE-POSTROUTING", "-j MARK --xor-mark "+MasqueradeMark)
	masq := "-j MASQUERADE --random-fully"
	if o.NATAsAccept {
		masq = "-j ACCEPT"
	}
	c.add("KUBE-POSTROUTING", "-m comment --comment", quote("kubernetes service traffic requiring SNAT"), masq)
}

// serviceJumps writes service s's rules in KUBE-SERVICES and KUBE-NODEPORTS.
func serviceJumps(c *chainSet, s *Service) {
	c.add("KUBE-SERVICES", "-m comment --comment", quote(s.String()+" cluster IP"),
		"-m", s.Proto, "-p", s.Proto, "-d", s.ClusterIP.String(), "--dport", fmt.Sprint(s.Port), "-j", s.SVCChain())
	if s.NodePort != 0 {
		np := fmt.Sprint(s.NodePort)
		c.add("KUBE-NODEPORTS", "-m comment --comment", quote(s.String()), "-m", s.Proto, "-p", s.Proto,
			"-d 127.0.0.0/8 --dport", np, "-j", s.EXTChain())
		c.add("KUBE-NODEPORTS", "-m comment --comment", quote(s.String()), "-m", s.Proto, "-p", s.Proto,
			"--dport", np, "-j", s.EXTChain())
	}
}

// serviceChains writes service s's own chains: KUBE-SVC, KUBE-EXT (NodePort)
// and one KUBE-SEP per endpoint.
func serviceChains(c *chainSet, s *Service, clusterCIDR netip.Prefix, o IPTablesOptions) {
	svc := s.SVCChain()
	c.declare(svc)
	if s.NodePort != 0 {
		ext := s.EXTChain()
		c.add(ext, "-m comment --comment", quote("masquerade traffic for "+s.String()+" external destinations"),
			"-j KUBE-MARK-MASQ")
		c.add(ext, "-j", svc)
	}
	c.add(svc, "-m comment --comment", quote(s.String()+" cluster IP"), "-m", s.Proto, "-p", s.Proto,
		"-d", s.ClusterIP.String(), "--dport", fmt.Sprint(s.Port), "!", "-s", clusterCIDR.String(), "-j KUBE-MARK-MASQ")
	n := len(s.Endpoints)
	for i, ep := range s.Endpoints {
		sep := s.SEPChain(ep)
		args := []string{"-m comment --comment", quote(s.String() + " -> " + ep.String())}
		if i < n-1 {
			// kube-proxy: 1/(n-i), so that each endpoint is equally likely.
			args = append(args, fmt.Sprintf("-m statistic --mode random --probability %0.10f", 1.0/float64(n-i)))
		}
		c.add(svc, append(args, "-j", sep)...)
		c.add(sep, "-m comment --comment", quote(s.String()), "-s", ep.Addr().String(), "-j KUBE-MARK-MASQ")
		dnat := "-j DNAT --to-destination " + ep.String()
		if o.NATAsAccept {
			dnat = "-j ACCEPT"
		}
		c.add(sep, "-m comment --comment", quote(s.String()), "-m", s.Proto, "-p", s.Proto, dnat)
	}
}

// nodePortsLast is KUBE-SERVICES' last rule.
func nodePortsLast(c *chainSet) {
	c.add("KUBE-SERVICES", "-m comment --comment",
		quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
		"-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")
}

// IPTables returns kube-proxy's full iptables-restore input (a full sync)
// for svcs: the filter and nat tables.
func IPTables(svcs []Service, clusterCIDR netip.Prefix, o IPTablesOptions) string {
	var b strings.Builder
	writeFilter(&b, o)
	nat := natTable(svcs, func(int) bool { return true }, clusterCIDR, o)
	var builtin, extra []string
	if o.Bootstrap {
		builtin, extra = []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}, bootstrapNat
	}
	nat.write(&b, "nat", len(natChains), builtin, extra, nil)
	return b.String()
}

// natTable is the nat table with every service's jumps and the chains of
// the services withChains selects.
func natTable(svcs []Service, withChains func(int) bool, clusterCIDR netip.Prefix, o IPTablesOptions) *chainSet {
	nat := newChainSet(natChains)
	natFixed(nat, o)
	for i := range svcs {
		serviceJumps(nat, &svcs[i])
		if withChains(i) {
			serviceChains(nat, &svcs[i], clusterCIDR, o)
		}
	}
	nodePortsLast(nat)
	return nat
}

// writeFilter writes the filter table (rewritten whole in every sync).
func writeFilter(b *strings.Builder, o IPTablesOptions) {
	var builtin, extra []string
	if o.Bootstrap {
		builtin, extra = []string{"INPUT", "FORWARD", "OUTPUT"}, bootstrapFilter
	}
	filterTable().write(b, "filter", len(filterChains), builtin, extra, nil)
}

// IPTablesUpdate returns the input of kube-proxy's partial sync
// (MinimizeIPTablesRestore, loaded with iptables-restore --noflush) after
// the endpoints of service svcs[changed] changed from those of old: the
// filter table whole, in nat the fixed chains (KUBE-SERVICES with every
// service's jump), the changed service's chains, and the flush and -X of
// the endpoint chains that went away.
func IPTablesUpdate(svcs []Service, changed int, old *Service, clusterCIDR netip.Prefix, o IPTablesOptions) string {
	var b strings.Builder
	o.Bootstrap = false // a partial sync never touches the built-in chains
	writeFilter(&b, o)
	nat := natTable(svcs, func(i int) bool { return i == changed }, clusterCIDR, o)
	still := map[string]bool{}
	for _, ep := range svcs[changed].Endpoints {
		still[svcs[changed].SEPChain(ep)] = true
	}
	var gone []string
	for _, ep := range old.Endpoints {
		if name := old.SEPChain(ep); !still[name] {
			gone = append(gone, name)
		}
	}
	nat.write(&b, "nat", len(natChains), nil, nil, gone)
	return b.String()
}

// MoveEndpoint returns a copy of s whose first endpoint moved to addr (the
// change IPTablesUpdate and NFTablesUpdate write).
func MoveEndpoint(s *Service, addr netip.Addr) Service {
	c := *s
	c.Endpoints = append([]netip.AddrPort(nil), s.Endpoints...)
	if len(c.Endpoints) > 0 {
		c.Endpoints[0] = netip.AddrPortFrom(addr, c.Endpoints[0].Port())
	}
	return c
}
