package kubeproxy

import (
	"net/netip"
	"testing"
)

// TestChainNames checks the chain names against kube-proxy's own tests
// (TestOverallIPTablesRules and TestOverallNFTablesRules: service
// ns1/svc1:p80, TCP, endpoint 10.180.0.1:80).
func TestChainNames(t *testing.T) {
	s := Service{Namespace: "ns1", Name: "svc1", PortName: "p80", Proto: "tcp"}
	ep := netip.MustParseAddrPort("10.180.0.1:80")
	for _, tc := range []struct{ got, want string }{
		{s.SVCChain(), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{s.SEPChain(ep), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{(&Service{Namespace: "ns3", Name: "svc3", PortName: "p80", Proto: "tcp"}).EXTChain(), "KUBE-EXT-X27LE4BHSL4DOUIK"},
		{s.NFTServiceChain(), "service-ULMVA6XW-ns1/svc1/tcp/p80"},
		{s.NFTEndpointChain(ep), "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}
