package clients

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// dockerDaemonConfig6 is dockerDaemonConfig with IPv6 on: the default
// bridge gets dockerSubnet6 and Docker writes its ip6tables rules
// (Docker 20.10: "ip6tables" is experimental), MASQUERADE of the subnet
// among them.
const dockerDaemonConfig6 = `{"userland-proxy": false, "ipv6": true, "fixed-cidr-v6": "` + dockerSubnet6 +
	`", "experimental": true, "ip6tables": true}`

// dockerSubnet6 is the containers' IPv6 prefix.
const dockerSubnet6 = "fd00:dead:beef::/64"

// prepareDocker6 is prepareDocker with dockerDaemonConfig6.
func prepareDocker6(t testing.TB, kind, dir string) []bind {
	t.Helper()
	binds := prepareDocker(t, kind, dir)
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte(dockerDaemonConfig6), 0o644); err != nil {
		t.Fatal(err)
	}
	return binds
}

// startDocker6 starts dockerd with IPv6 (startDockerd), a server on the
// client namespace's IPv6 address, and the container publishing
// dockerPort (Docker's DNAT to the container's addresses in both
// families).
func startDocker6(t testing.TB, s *stack) error {
	if err := startDockerd(t, s); err != nil {
		return err
	}
	srv := nettest.StartTCPServer(t, s.topo.GenNS, netip.AddrPortFrom(clientAddr(s, fromClient, 6), outsidePort))
	outsideServers6.Store(s, srv)
	t.Cleanup(func() { outsideServers6.Delete(s) })
	_, err := docker(s, "run", "-d", "--name", dockerContainer, "-p", fmt.Sprintf("%d:%d", dockerPort, containerPort),
		dockerImage, "httpd", "-f", "-p", fmt.Sprint(containerPort), "-h", "/www")
	return err
}

// checkMasquerade6 is checkMasquerade over IPv6: Docker's
// `-s PREFIX ! -o docker0 -j MASQUERADE` gives the container's TCP
// connection and ping fw's address; and Docker's IPv6 nat table is the
// same under xfw as under the kernel's ip6tables.
func checkMasquerade6(s *stack) error {
	v, ok := outsideServers6.Load(s)
	if !ok {
		return fmt.Errorf("no IPv6 server in the client namespace")
	}
	if err := checkMasqueradeFam(s, 6, v.(*nettest.TCPServer)); err != nil {
		return err
	}
	nat, err := s.savedTable(6, "nat")
	if err != nil {
		return err
	}
	dockerNat6.Store(s.kind, nat)
	return nil
}

// outsideServers6 are the client namespaces' IPv6 servers, by stack.
var outsideServers6 sync.Map

// dockerNat6 holds each stack's IPv6 nat table after the masquerade step.
var dockerNat6 sync.Map

// checkFromHost6 is checkFromHost over IPv6: the host's connection to the
// published port on its own IPv6 address, taken to the container by
// Docker's DNAT in DOCKER, reached from nat OUTPUT.
func checkFromHost6(s *stack) error { return checkFromHostFam(s, 6) }

// checkHairpin6 is checkHairpin over IPv6: the container reaches its own
// published port on fw's IPv6 address (DNAT back to itself, Docker's
// hairpin MASQUERADE).
func checkHairpin6(s *stack) error { return checkHairpinFam(s, 6) }

// TestDockerIPv6AgainstKernel runs Docker with IPv6 on under the kernel's
// iptables and under xfw: the rulesets of both families and the IPv4 nat
// table compared after each step; the published port reached over IPv6
// from the client and from another address, by the host itself on its
// own IPv6 address (nat OUTPUT's DNAT) and by the container itself
// (hairpin); the container's IPv6
// connection and ping masqueraded to fw's address, the IPv6 nat tables
// compared; nothing left of the port once the container is removed.
func TestDockerIPv6AgainstKernel(t *testing.T) {
	runScenario(t, scenario{
		name:    "docker-ipv6",
		prepare: prepareDocker6,
		start:   startDocker6,
		fams:    []int{4, 6},
		nat:     true,
		steps: []step{
			{"run -p 8080:80", nil, []probe{
				{fromClient, 4, dockerPort, nettest.OK},
				{fromClient, 6, dockerPort, nettest.OK},
				{fromOther, 6, dockerPort, nettest.OK},
			}},
			{"from the host itself over IPv6", checkFromHost6, nil},
			{"hairpin over IPv6", checkHairpin6, nil},
			{"masquerade over IPv4", checkMasquerade, nil},
			{"masquerade over IPv6", checkMasquerade6, nil},
			{"rm -f", dockerRemove, []probe{
				{fromClient, 6, dockerPort, nettest.Refused},
			}},
		},
	})
	k, _ := dockerNat6.Load(kindKernel)
	x, _ := dockerNat6.Load(kindXFW)
	if k == nil || k != x {
		t.Errorf("the IPv6 nat table differs from the kernel's:\nkernel:\n%v\nxfw:\n%v", k, x)
	}
	if ks, _ := k.(string); ks != "" {
		t.Logf("Docker's IPv6 nat table:\n%s", ks)
	}
}
