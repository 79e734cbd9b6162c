// Package kubeproxy writes the rulesets kube-proxy writes: its iptables
// mode (iptables-restore input of pkg/proxy/iptables, the format of the
// expected outputs in kubernetes' own proxier tests) and its nftables mode
// (nft -f input of pkg/proxy/nftables), for N services × M endpoints, and
// the partial updates kube-proxy applies when one service's endpoints
// change. The chain names are kube-proxy's own hashes, so a generated
// ruleset reads like one taken from a real node.
//
// The generated services are ClusterIP services, every NodePortEvery-th one
// also a NodePort service, all TCP port 80, with the cluster traffic
// policy, no session affinity and no load balancer.
package kubeproxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
)

// Kube-proxy's constants (pkg/proxy/iptables/proxier.go).
const (
	// MasqueradeMark is kube-proxy's default masquerade bit (--iptables-masquerade-bit 14).
	MasqueradeMark = "0x4000"
	// ServicePort is the port of every generated service.
	ServicePort = 80
	// TargetPort is the port of every generated endpoint.
	TargetPort = 8080
	// firstNodePort and lastNodePort bound kubernetes' default NodePort range.
	firstNodePort = 30000
	lastNodePort  = 32767
)

// Options shape the generated services.
type Options struct {
	// Services and Endpoints: N services, M endpoints each.
	Services, Endpoints int
	// NodePortEvery makes every NodePortEvery-th service (0, k, 2k, …) a
	// NodePort service too; 0: none.
	NodePortEvery int
	// SCTPEvery makes every SCTPEvery-th service (the last of each group
	// of SCTPEvery) an SCTP service; 0: none, every service TCP.
	SCTPEvery int
	// ServiceCIDR holds the ClusterIPs (the first service takes the
	// prefix's address + 1); EndpointCIDR holds the endpoints' addresses
	// (likewise, consecutively); ClusterCIDR is the pod network kube-proxy
	// masquerades traffic from outside of (--cluster-cidr).
	ServiceCIDR, EndpointCIDR, ClusterCIDR netip.Prefix
}

// DefaultOptions returns n services × m endpoints in the address plan of
// kube-proxy's tests (ClusterIPs in 172.30.0.0/16, pods in 10.0.0.0/8),
// every fourth service a NodePort service.
func DefaultOptions(n, m int) Options {
	return Options{
		Services: n, Endpoints: m, NodePortEvery: 4,
		ServiceCIDR:  netip.MustParsePrefix("172.30.0.0/16"),
		EndpointCIDR: netip.MustParsePrefix("10.180.0.0/14"),
		ClusterCIDR:  netip.MustParsePrefix("10.0.0.0/8"),
	}
}

// Service is one service port and its endpoints.
type Service struct {
	Namespace, Name, PortName string
	// Proto is "tcp" or "sctp" (Options.SCTPEvery).
	Proto     string
	ClusterIP netip.Addr
	Port      uint16
	// NodePort is 0 for a ClusterIP-only service.
	NodePort  uint16
	Endpoints []netip.AddrPort
}

// String is kube-proxy's ServicePortName.String(): "ns/name:port".
func (s *Service) String() string { return s.Namespace + "/" + s.Name + ":" + s.PortName }

// Generate returns the services of o, or an error if they do not fit its
// address ranges or the NodePort range.
func Generate(o Options) ([]Service, error) {
	if o.Services < 0 || o.Endpoints < 0 {
		return nil, fmt.Errorf("kubeproxy: negative size %d × %d", o.Services, o.Endpoints)
	}
	svcs := make([]Service, o.Services)
	for i := range svcs {
		cip, err := nthAddr(o.ServiceCIDR, i+1)
		if err != nil {
			return nil, fmt.Errorf("kubeproxy: service %d: %w", i, err)
		}
		s := Service{Namespace: fmt.Sprintf("ns%d", i), Name: fmt.Sprintf("svc%d", i), PortName: "p80",
			Proto: "tcp", ClusterIP: cip, Port: ServicePort}
		if o.SCTPEvery > 0 && i%o.SCTPEvery == o.SCTPEvery-1 {
			s.Proto = "sctp"
		}
		if o.NodePortEvery > 0 && i%o.NodePortEvery == 0 {
			np := firstNodePort + i/o.NodePortEvery
			if np > lastNodePort {
				return nil, fmt.Errorf("kubeproxy: service %d: NodePort %d beyond the range %d-%d (raise NodePortEvery)",
					i, np, firstNodePort, lastNodePort)
			}
			s.NodePort = uint16(np)
		}
		for j := 0; j < o.Endpoints; j++ {
			ep, err := nthAddr(o.EndpointCIDR, i*o.Endpoints+j+1)
			if err != nil {
				return nil, fmt.Errorf("kubeproxy: service %d endpoint %d: %w", i, j, err)
			}
			s.Endpoints = append(s.Endpoints, netip.AddrPortFrom(ep, TargetPort))
		}
		svcs[i] = s
	}
	return svcs, nil
}

// nthAddr returns the n-th address of IPv4 prefix p.
func nthAddr(p netip.Prefix, n int) (netip.Addr, error) {
	if !p.Addr().Is4() {
		return netip.Addr{}, fmt.Errorf("prefix %s is not IPv4", p)
	}
	if n >= 1<<(32-p.Bits()) {
		return netip.Addr{}, fmt.Errorf("address %d beyond %s", n, p)
	}
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// hash32 is base32(sha256(s)), the root of kube-proxy's chain names.
func hash32(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])
}

// SVCChain is kube-proxy's servicePortChainName: KUBE-SVC-<16 chars>.
func (s *Service) SVCChain() string { return "KUBE-SVC-" + hash32(s.String() + s.Proto)[:16] }

// EXTChain is kube-proxy's serviceExternalChainName: KUBE-EXT-<16 chars>.
func (s *Service) EXTChain() string { return "KUBE-EXT-" + hash32(s.String() + s.Proto)[:16] }

// SEPChain is kube-proxy's servicePortEndpointChainName for endpoint ep.
func (s *Service) SEPChain(ep netip.AddrPort) string {
	return "KUBE-SEP-" + hash32(s.String() + s.Proto + ep.String())[:16]
}
