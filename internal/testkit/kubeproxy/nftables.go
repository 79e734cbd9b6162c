package kubeproxy

import (
	"fmt"
	"net/netip"
	"strings"
)

// nftBase is kube-proxy's nftables-mode skeleton (pkg/proxy/nftables:
// the table, its sets and verdict maps, the base chains and their rules),
// %[1]s the service CIDR, %[2]s the masquerade mark.
const nftBase = `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
add chain ip kube-proxy cluster-ips-check
add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
add chain ip kube-proxy firewall-check
add chain ip kube-proxy mark-for-masquerade
add chain ip kube-proxy masquerading
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nodeport-endpoints-check
add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
add chain ip kube-proxy services
add chain ip kube-proxy service-endpoints-check
add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ip kube-proxy cluster-ips-check ip daddr { %[1]s } drop comment "Drop traffic to unallocated ClusterIPs"
add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip kube-proxy mark-for-masquerade mark set mark or %[2]s
add rule ip kube-proxy masquerading mark and %[2]s == 0 return
add rule ip kube-proxy masquerading mark set mark xor %[2]s
add rule ip kube-proxy masquerading masquerade fully-random
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy reject-chain reject
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
`

// nftName is the tail of kube-proxy's nftables chain names: "ns/name/proto/port".
func (s *Service) nftName() string {
	return s.Namespace + "/" + s.Name + "/" + s.Proto + "/" + s.PortName
}

// NFTServiceChain is kube-proxy's nftables service chain name.
func (s *Service) NFTServiceChain() string {
	return "service-" + hash32(s.nftName())[:8] + "-" + s.nftName()
}

// NFTExternalChain is kube-proxy's nftables external-traffic chain name.
func (s *Service) NFTExternalChain() string {
	return "external-" + hash32(s.nftName())[:8] + "-" + s.nftName()
}

// NFTEndpointChain is kube-proxy's nftables endpoint chain name.
func (s *Service) NFTEndpointChain(ep netip.AddrPort) string {
	tail := s.nftName() + "__" + ep.Addr().String() + "/" + fmt.Sprint(ep.Port())
	return "endpoint-" + hash32(tail)[:8] + "-" + tail
}

// NFTables returns kube-proxy's nftables-mode ruleset for svcs (nft -f
// input of a full sync into a namespace without the table).
func NFTables(svcs []Service, serviceCIDR, clusterCIDR netip.Prefix, nodeIP netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, nftBase, serviceCIDR, MasqueradeMark)
	fmt.Fprintf(&b, "add element ip kube-proxy nodeport-ips { %s }\n", nodeIP)
	for i := range svcs {
		nftService(&b, &svcs[i], clusterCIDR)
		nftElements(&b, &svcs[i])
	}
	return b.String()
}

// nftService writes service s's chains and their rules.
func nftService(b *strings.Builder, s *Service, clusterCIDR netip.Prefix) {
	const t = "ip kube-proxy"
	svc := s.NFTServiceChain()
	fmt.Fprintf(b, "add chain %s %s\n", t, svc)
	// The vmap names the endpoint chains: they must exist first (kube-proxy
	// creates every chain of a transaction before its rules).
	for _, ep := range s.Endpoints {
		fmt.Fprintf(b, "add chain %s %s\n", t, s.NFTEndpointChain(ep))
	}
	fmt.Fprintf(b, "add rule %s %s ip daddr %s ip saddr != %s jump mark-for-masquerade\n", t, svc, s.ClusterIP, clusterCIDR)
	var arms []string
	for i, ep := range s.Endpoints {
		arms = append(arms, fmt.Sprintf("%d : goto %s", i, s.NFTEndpointChain(ep)))
	}
	if len(arms) > 0 {
		fmt.Fprintf(b, "add rule %s %s numgen random mod %d vmap { %s }\n", t, svc, len(arms), strings.Join(arms, " , "))
	}
	if s.NodePort != 0 {
		ext := s.NFTExternalChain()
		fmt.Fprintf(b, "add chain %s %s\n", t, ext)
		fmt.Fprintf(b, "add rule %s %s jump mark-for-masquerade\n", t, ext)
		fmt.Fprintf(b, "add rule %s %s goto %s\n", t, ext, svc)
	}
	for _, ep := range s.Endpoints {
		nftEndpoint(b, s, ep)
	}
}

// nftEndpoint writes the rules of the chain of endpoint ep of s.
func nftEndpoint(b *strings.Builder, s *Service, ep netip.AddrPort) {
	const t = "ip kube-proxy"
	name := s.NFTEndpointChain(ep)
	fmt.Fprintf(b, "add rule %s %s ip saddr %s jump mark-for-masquerade\n", t, name, ep.Addr())
	fmt.Fprintf(b, "add rule %s %s meta l4proto %s dnat to %s\n", t, name, s.Proto, ep)
}

// nftElements writes s's elements of the cluster-ips set and the maps.
func nftElements(b *strings.Builder, s *Service) {
	const t = "ip kube-proxy"
	fmt.Fprintf(b, "add element %s cluster-ips { %s }\n", t, s.ClusterIP)
	fmt.Fprintf(b, "add element %s service-ips { %s . %s . %d : goto %s }\n", t, s.ClusterIP, s.Proto, s.Port, s.NFTServiceChain())
	if s.NodePort != 0 {
		fmt.Fprintf(b, "add element %s service-nodeports { %s . %d : goto %s }\n", t, s.Proto, s.NodePort, s.NFTExternalChain())
	}
}

// NFTablesUpdate returns kube-proxy's nftables partial sync after the
// endpoints of s changed from those of old: the service chain flushed and
// rewritten, the new endpoint chains added, the old ones deleted (the maps
// do not change).
func NFTablesUpdate(s, old *Service, clusterCIDR netip.Prefix) string {
	const t = "ip kube-proxy"
	var b strings.Builder
	svc := s.NFTServiceChain()
	fmt.Fprintf(&b, "flush chain %s %s\n", t, svc)
	// nftService re-adds the service chain (a no-op: it exists) and
	// writes the endpoint chains; existing ones are flushed first.
	have := map[netip.AddrPort]bool{}
	for _, ep := range old.Endpoints {
		have[ep] = true
	}
	for _, ep := range s.Endpoints {
		if have[ep] {
			fmt.Fprintf(&b, "flush chain %s %s\n", t, s.NFTEndpointChain(ep))
		}
	}
	if s.NodePort != 0 {
		fmt.Fprintf(&b, "flush chain %s %s\n", t, s.NFTExternalChain())
	}
	nftService(&b, s, clusterCIDR)
	now := map[netip.AddrPort]bool{}
	for _, ep := range s.Endpoints {
		now[ep] = true
	}
	for _, ep := range old.Endpoints {
		if !now[ep] {
			fmt.Fprintf(&b, "delete chain %s %s\n", t, old.NFTEndpointChain(ep))
		}
	}
	return b.String()
}
