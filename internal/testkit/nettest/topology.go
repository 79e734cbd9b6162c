package nettest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// defaultBase starts every namespace name this package creates.
	defaultBase = "xt"
	// netnsDir is where ip(8) keeps named network namespaces.
	netnsDir = "/run/netns"
	// randomHexBytes is how many random bytes (two hex digits each) make a
	// prefix unique within one process.
	randomHexBytes = 3
	// linkUpTimeout bounds the wait for the veth links to come up.
	linkUpTimeout = 5 * time.Second
	// pollInterval is how often bounded waits re-check their condition.
	pollInterval = 10 * time.Millisecond
	// maxSubnetTries bounds the search for a subnet index unused in this
	// process.
	maxSubnetTries = 1000
)

// Names of the interfaces inside the namespaces. They live in different
// namespaces, so they are the same in every topology.
const (
	// GenIfname is gen's interface, facing fw.
	GenIfname = "eth0"
	// FwInIfname is fw's interface facing gen (traffic from gen comes in here).
	FwInIfname = "in0"
	// FwOutIfname is fw's interface facing sink (traffic to sink goes out here).
	FwOutIfname = "out0"
	// SinkIfname is sink's interface, facing fw.
	SinkIfname = "eth0"
)

// Interface indexes, distinct across the topology: when a veth's index equals
// its peer's (both would be 2 in fresh namespaces), the kernel defers its
// carrier change by up to a second (linkwatch), and the link stays unusable
// until then.
const (
	genIfindex   = 10
	fwInIfindex  = 11
	fwOutIfindex = 12
	sinkIfindex  = 13
)

// baseRe is what a namespace name base (WithBase) may look like.
var baseRe = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// Endpoint is one interface of a topology and the namespace it lives in.
type Endpoint struct {
	// NS is the network namespace's name (for Exec, InNamespace, ip -n).
	NS string
	// Ifname is the interface name inside NS.
	Ifname string
	// Ifindex is the interface index inside NS.
	Ifindex int
	// MAC is the interface's hardware address.
	MAC net.HardwareAddr
	// IPv4 is the interface's IPv4 address (prefix length 24).
	IPv4 netip.Addr
	// IPv6 is the interface's global IPv6 address (prefix length 64).
	IPv6 netip.Addr
	// LinkLocal is the interface's IPv6 link-local address.
	LinkLocal netip.Addr
}

// Topology is three network namespaces, gen -> fw -> sink:
//
//	gen [eth0 10.X.1.2 fd00:X:1::2] <-veth-> [in0 10.X.1.1 fd00:X:1::1] fw
//	fw [out0 10.X.2.1 fd00:X:2::1] <-veth-> [eth0 10.X.2.2 fd00:X:2::2] sink
//
// gen and sink route each other's subnet through fw; fw forwards IPv4 and
// IPv6 (gen and sink do not). IPv6 duplicate address detection is off, so
// addresses are usable at once; reverse-path filtering and ICMP rate limits
// (per destination and the global bucket) are off, so every REJECT reply
// and ICMP error is sent. There is no default route: nothing
// can leave the three namespaces. Addresses are 10.X.… and fd00:X:… with X
// the topology's Subnet.
type Topology struct {
	// Prefix is the unique start of the namespace names: "<base>-<pid>-<hex>".
	Prefix string
	// Subnet is X in the addresses, unique among this process's topologies.
	Subnet uint8
	// GenNS, FwNS and SinkNS are the namespaces' names.
	GenNS, FwNS, SinkNS string
	// Gen is gen's interface facing fw.
	Gen Endpoint
	// FwIn is fw's interface facing gen.
	FwIn Endpoint
	// FwOut is fw's interface facing sink.
	FwOut Endpoint
	// Sink is sink's interface facing fw.
	Sink Endpoint
	// GenNet4 and GenNet6 are the gen<->fw subnets.
	GenNet4, GenNet6 netip.Prefix
	// SinkNet4 and SinkNet6 are the fw<->sink subnets.
	SinkNet4, SinkNet6 netip.Prefix

	closeOnce sync.Once
	closeErr  error
}

// config holds New's options.
type config struct {
	base            string
	subnet          uint8
	staticNeighbors bool
}

// Option configures New.
type Option func(*config)

// WithBase sets the start of the namespace names (default "xt"): a lower-case
// letter then up to 7 lower-case letters or digits.
func WithBase(base string) Option { return func(c *config) { c.base = base } }

// WithSubnet fixes X in the addresses (1-254) instead of picking an unused one.
func WithSubnet(x uint8) Option { return func(c *config) { c.subnet = x } }

// WithStaticNeighbors adds permanent ARP and NDP entries for every neighbour,
// so no address resolution traffic crosses the links.
func WithStaticNeighbors() Option { return func(c *config) { c.staticNeighbors = true } }

// registry tracks this process's live topologies, so that CleanupStale never
// deletes them and parallel tests get different subnets.
var registry = struct {
	sync.Mutex
	prefixes map[string]bool
	subnets  map[uint8]bool
}{prefixes: map[string]bool{}, subnets: map[uint8]bool{}}

// staleCleaned records the bases whose leftovers New already cleaned in this
// process: it does so once per base.
var staleCleaned = struct {
	sync.Mutex
	bases map[string]bool
}{bases: map[string]bool{}}

// cleanStaleOnce runs CleanupStale(base) the first time it is called for base.
func cleanStaleOnce(t testing.TB, base string) {
	t.Helper()
	staleCleaned.Lock()
	defer staleCleaned.Unlock()
	if staleCleaned.bases[base] {
		return
	}
	staleCleaned.bases[base] = true
	removed, err := CleanupStale(base)
	if len(removed) > 0 {
		t.Logf("nettest: removed stale namespaces of dead processes: %v", removed)
	}
	if err != nil {
		t.Logf("nettest: cleaning stale namespaces: %v", err)
	}
}

// New builds a fresh topology for the test and registers its removal with
// t.Cleanup (which also runs if the test panics). It fails the test with
// t.Fatal if the machine cannot build one (see RequireRoot) or if any step
// fails, after removing whatever it had created.
func New(t testing.TB, opts ...Option) *Topology {
	t.Helper()
	RequireRoot(t)
	cfg := config{base: defaultBase}
	for _, o := range opts {
		o(&cfg)
	}
	if !baseRe.MatchString(cfg.base) {
		t.Fatalf("nettest: invalid namespace base %q (want %s)", cfg.base, baseRe)
	}
	cleanStaleOnce(t, cfg.base)
	topo, err := build(cfg)
	if err != nil {
		t.Fatalf("nettest: building topology: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("nettest: removing topology %s: %v", topo.Prefix, err)
		}
	})
	t.Logf("nettest: topology %s (subnet %d): %s %s %s", topo.Prefix, topo.Subnet, topo.GenNS, topo.FwNS, topo.SinkNS)
	return topo
}

// newPrefix returns "<base>-<pid>-<random hex>".
func newPrefix(base string) string {
	b := make([]byte, randomHexBytes)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on Linux; fall back to the clock anyway.
		return fmt.Sprintf("%s-%d-%06x", base, os.Getpid(), time.Now().UnixNano()&0xffffff)
	}
	return fmt.Sprintf("%s-%d-%s", base, os.Getpid(), hex.EncodeToString(b))
}

// pickSubnet reserves X: want if non-zero, else a random unused one.
func pickSubnet(want uint8) (uint8, error) {
	registry.Lock()
	defer registry.Unlock()
	if want != 0 {
		if want == 255 {
			return 0, fmt.Errorf("subnet %d out of range 1-254", want)
		}
		registry.subnets[want] = true
		return want, nil
	}
	b := make([]byte, 1)
	for i := 0; i < maxSubnetTries; i++ {
		if _, err := rand.Read(b); err != nil {
			return 0, fmt.Errorf("random subnet: %w", err)
		}
		x := b[0]
		if x == 0 || x == 255 || registry.subnets[x] {
			continue
		}
		registry.subnets[x] = true
		return x, nil
	}
	return 0, errors.New("no free subnet index: too many live topologies in this process")
}

// endpointAddrs fills the addresses of an endpoint on the given subnet (1 =
// gen side, 2 = sink side) and host (1 = fw, 2 = gen or sink).
func endpointAddrs(ns, ifname string, ifindex int, x, subnet, host uint8) Endpoint {
	return Endpoint{
		NS:      ns,
		Ifname:  ifname,
		Ifindex: ifindex,
		// Locally administered unicast: 02, then "xt", then X, subnet, host.
		MAC:  net.HardwareAddr{0x02, 'x', 't', x, subnet, host},
		IPv4: netip.AddrFrom4([4]byte{10, x, subnet, host}),
		IPv6: netip.MustParseAddr(fmt.Sprintf("fd00:%d:%d::%d", x, subnet, host)),
	}
}

// testHookAfterNamespaces, when set by a test, runs in build once the
// namespaces exist; an error makes build fail there (to test the rollback).
var testHookAfterNamespaces func(*Topology) error

// build creates the namespaces, links, addresses and routes. On error it
// removes everything it created.
func build(cfg config) (_ *Topology, err error) {
	x, err := pickSubnet(cfg.subnet)
	if err != nil {
		return nil, err
	}
	prefix := newPrefix(cfg.base)
	topo := &Topology{
		Prefix:   prefix,
		Subnet:   x,
		GenNS:    prefix + "-gen",
		FwNS:     prefix + "-fw",
		SinkNS:   prefix + "-sink",
		GenNet4:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, x, 1, 0}), 24),
		SinkNet4: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, x, 2, 0}), 24),
		GenNet6:  netip.MustParsePrefix(fmt.Sprintf("fd00:%d:1::/64", x)),
		SinkNet6: netip.MustParsePrefix(fmt.Sprintf("fd00:%d:2::/64", x)),
	}
	topo.Gen = endpointAddrs(topo.GenNS, GenIfname, genIfindex, x, 1, 2)
	topo.FwIn = endpointAddrs(topo.FwNS, FwInIfname, fwInIfindex, x, 1, 1)
	topo.FwOut = endpointAddrs(topo.FwNS, FwOutIfname, fwOutIfindex, x, 2, 1)
	topo.Sink = endpointAddrs(topo.SinkNS, SinkIfname, sinkIfindex, x, 2, 2)

	register(prefix)
	// Roll back on error and on panic alike.
	ok := false
	defer func() {
		if !ok {
			if cerr := topo.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", cerr))
			}
		}
	}()

	for _, ns := range topo.Namespaces() {
		if _, err := ipCmd("netns", "add", ns); err != nil {
			return nil, fmt.Errorf("create namespace: %w", err)
		}
	}
	if testHookAfterNamespaces != nil {
		if err := testHookAfterNamespaces(topo); err != nil {
			return nil, err
		}
	}
	if err := topo.setSysctls(); err != nil {
		return nil, err
	}
	// Create each veth pair inside the namespaces directly, never in ours.
	if err := addVeth(topo.Gen, topo.FwIn); err != nil {
		return nil, err
	}
	if err := addVeth(topo.Sink, topo.FwOut); err != nil {
		return nil, err
	}
	if err := topo.configure(cfg); err != nil {
		return nil, err
	}
	for _, ep := range []*Endpoint{&topo.Gen, &topo.FwIn, &topo.FwOut, &topo.Sink} {
		if err := waitLinkUp(ep); err != nil {
			return nil, err
		}
	}
	if err := waitAllListenerReports([]Endpoint{topo.Gen, topo.FwIn, topo.FwOut, topo.Sink}); err != nil {
		return nil, err
	}
	ok = true
	return topo, nil
}

// setSysctls configures forwarding, DAD, rp_filter, ICMP rate limits and
// the repetition of multicast listener reports.
func (topo *Topology) setSysctls() error {
	common := [][2]string{
		// Addresses usable at once: no duplicate address detection.
		{"net/ipv6/conf/all/accept_dad", "0"},
		{"net/ipv6/conf/default/accept_dad", "0"},
		{"net/ipv6/conf/default/dad_transmits", "0"},
		// No router solicitations or advertisements: static routes only.
		{"net/ipv6/conf/default/router_solicitations", "0"},
		{"net/ipv6/conf/all/accept_ra", "0"},
		{"net/ipv6/conf/default/accept_ra", "0"},
		// Multicast listener reports repeated at once, not up to a
		// second later (mld.go); the interfaces created later take it.
		{"net/ipv6/conf/default/mldv2_unsolicited_report_interval", mldIntervalMS},
		// Crafted packets with foreign sources must not vanish in rp_filter.
		{"net/ipv4/conf/all/rp_filter", "0"},
		{"net/ipv4/conf/default/rp_filter", "0"},
		// Every REJECT or error must produce its ICMP message: no ICMP
		// type is rate limited. An empty ratemask exempts every type from
		// both limits, the per-destination one (ratelimit, also 0) and
		// the namespace's global bucket (icmp_msgs_per_sec 1000, burst
		// 50, 0 to 2 random credits a message, refilled at most every
		// 20 ms), which IPv6's errors share: 40 datagrams to a closed
		// port sent within 20 ms lost a port unreachable in about one
		// run of 100 (their random costs added up to the burst).
		{"net/ipv4/icmp_ratelimit", "0"},
		{"net/ipv6/icmp/ratelimit", "0"},
		{"net/ipv4/icmp_ratemask", "0"},
		{"net/ipv6/icmp/ratemask", "\n"}, // an empty list
	}
	for _, ns := range topo.Namespaces() {
		fwd := "0"
		if ns == topo.FwNS {
			fwd = "1"
		}
		settings := append(append([][2]string(nil), common...),
			[2]string{"net/ipv4/ip_forward", fwd},
			[2]string{"net/ipv6/conf/all/forwarding", fwd},
			[2]string{"net/ipv6/conf/default/forwarding", fwd},
		)
		err := InNamespace(ns, func() error {
			for _, s := range settings {
				if err := writeSysctl(s[0], s[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sysctls in %s: %w", ns, err)
		}
	}
	return nil
}

// writeSysctl writes value to /proc/sys/<key>; it must run in the target
// namespace (InNamespace), as /proc/sys/net follows the calling thread.
func writeSysctl(key, value string) error {
	path := filepath.Join("/proc/sys", key)
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// addVeth creates the veth pair a<->b with their names, indexes and MACs,
// a in a.NS and b in b.NS.
func addVeth(a, b Endpoint) error {
	if _, err := ipCmd("-n", a.NS, "link", "add",
		"name", a.Ifname, "index", strconv.Itoa(a.Ifindex), "address", a.MAC.String(), "type", "veth", "peer",
		"name", b.Ifname, "index", strconv.Itoa(b.Ifindex), "address", b.MAC.String(), "netns", b.NS); err != nil {
		return fmt.Errorf("create veth %s/%s <-> %s/%s: %w", a.NS, a.Ifname, b.NS, b.Ifname, err)
	}
	return nil
}

// configure gives each namespace its addresses, brings its interfaces up,
// adds its routes (gen and sink reach each other through fw) and, with
// static neighbours, its neighbour entries: one `ip -batch` per namespace,
// the namespaces at once (nothing in one depends on another's state).
func (topo *Topology) configure(cfg config) error {
	batches := map[string][]string{}
	add := func(ns string, args ...string) { batches[ns] = append(batches[ns], strings.Join(args, " ")) }
	for _, ep := range []Endpoint{topo.Gen, topo.FwIn, topo.FwOut, topo.Sink} {
		add(ep.NS, "addr", "add", ep.IPv4.String()+"/24", "dev", ep.Ifname)
		add(ep.NS, "addr", "add", ep.IPv6.String()+"/64", "dev", ep.Ifname, "nodad")
		add(ep.NS, "link", "set", "dev", ep.Ifname, "up")
	}
	for _, ns := range topo.Namespaces() {
		add(ns, "link", "set", "lo", "up")
	}
	for _, r := range [][3]string{
		{topo.GenNS, topo.SinkNet4.String(), topo.FwIn.IPv4.String()},
		{topo.GenNS, topo.SinkNet6.String(), topo.FwIn.IPv6.String()},
		{topo.SinkNS, topo.GenNet4.String(), topo.FwOut.IPv4.String()},
		{topo.SinkNS, topo.GenNet6.String(), topo.FwOut.IPv6.String()},
	} {
		add(r[0], "route", "add", r[1], "via", r[2])
	}
	if cfg.staticNeighbors {
		for _, p := range [][2]Endpoint{
			{topo.Gen, topo.FwIn}, {topo.FwIn, topo.Gen},
			{topo.FwOut, topo.Sink}, {topo.Sink, topo.FwOut},
		} {
			local, peer := p[0], p[1]
			for _, ip := range []netip.Addr{peer.IPv4, peer.IPv6} {
				add(local.NS, "neigh", "replace", ip.String(), "lladdr", peer.MAC.String(), "dev", local.Ifname, "nud", "permanent")
			}
		}
	}
	namespaces := topo.Namespaces()
	errs := make([]error, len(namespaces))
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// -batch stops at the first command that fails and names it.
			if _, err := runCommandStdin(ipTimeout, strings.Join(batches[ns], "\n")+"\n", "ip", "-n", ns, "-batch", "-"); err != nil {
				errs[i] = fmt.Errorf("configure %s: %w", ns, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitLinkUp waits until ep's interface is running and has its IPv6
// link-local address, checks its index and MAC, and fills LinkLocal.
func waitLinkUp(ep *Endpoint) error {
	return InNamespace(ep.NS, func() error {
		deadline := time.Now().Add(linkUpTimeout)
		for {
			ifi, err := net.InterfaceByName(ep.Ifname)
			if err != nil {
				return fmt.Errorf("interface %s in %s: %w", ep.Ifname, ep.NS, err)
			}
			ll, err := linkLocal(ifi)
			if err != nil {
				return err
			}
			if ifi.Flags&net.FlagRunning != 0 && ll.IsValid() {
				if ifi.Index != ep.Ifindex {
					return fmt.Errorf("interface %s in %s has index %d, want %d", ep.Ifname, ep.NS, ifi.Index, ep.Ifindex)
				}
				ep.LinkLocal = ll
				if ifi.HardwareAddr.String() != ep.MAC.String() {
					return fmt.Errorf("interface %s in %s has MAC %s, want %s", ep.Ifname, ep.NS, ifi.HardwareAddr, ep.MAC)
				}
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("interface %s in %s not up with a link-local address after %v (flags %v)",
					ep.Ifname, ep.NS, linkUpTimeout, ifi.Flags)
			}
			time.Sleep(pollInterval)
		}
	})
}

// linkLocal returns ifi's IPv6 link-local address, or the zero Addr.
func linkLocal(ifi *net.Interface) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Is6() && ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, nil
}

// Namespaces returns the names of gen, fw and sink.
func (topo *Topology) Namespaces() []string {
	return []string{topo.GenNS, topo.FwNS, topo.SinkNS}
}

// GenToFw returns the Ethernet header of a frame gen sends to fw
// (Src gen's MAC, Dst fw's in0 MAC); EtherType follows the payload.
func (topo *Topology) GenToFw() Ethernet {
	return Ethernet{Src: topo.Gen.MAC, Dst: topo.FwIn.MAC}
}

// SinkToFw returns the Ethernet header of a frame sink sends to fw
// (Src sink's MAC, Dst fw's out0 MAC).
func (topo *Topology) SinkToFw() Ethernet {
	return Ethernet{Src: topo.Sink.MAC, Dst: topo.FwOut.MAC}
}

// InjectFromGen sends raw frames out of gen's interface towards fw.
func (topo *Topology) InjectFromGen(frames ...[]byte) error {
	return Inject(topo.GenNS, topo.Gen.Ifname, frames...)
}

// InjectFromSink sends raw frames out of sink's interface towards fw.
func (topo *Topology) InjectFromSink(frames ...[]byte) error {
	return Inject(topo.SinkNS, topo.Sink.Ifname, frames...)
}

// Close deletes the topology's namespaces (and with them the veth pairs).
// It is idempotent and safe to call before the test's own cleanup.
func (topo *Topology) Close() error {
	topo.closeOnce.Do(func() {
		var errs []error
		for _, ns := range topo.Namespaces() {
			if err := deleteNamespace(ns); err != nil {
				errs = append(errs, err)
			}
		}
		unregister(topo.Prefix, topo.Subnet)
		topo.closeErr = errors.Join(errs...)
	})
	return topo.closeErr
}

// deleteNamespace deletes a named namespace; one that does not exist is fine.
func deleteNamespace(ns string) error {
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := ipCmd("netns", "delete", ns); err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}

// NamespaceExists reports whether a named network namespace exists.
func NamespaceExists(ns string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, ns))
	return err == nil
}

// SetNeighbor adds (or replaces) a permanent neighbour entry: in namespace ns,
// ip is reachable at mac on interface ifname.
func SetNeighbor(ns, ifname string, ip netip.Addr, mac net.HardwareAddr) error {
	if ns == "" {
		return errors.New("nettest: SetNeighbor needs a namespace name")
	}
	if _, err := ipCmd("-n", ns, "neigh", "replace", ip.String(), "lladdr", mac.String(),
		"dev", ifname, "nud", "permanent"); err != nil {
		return fmt.Errorf("set neighbour %s in %s: %w", ip, ns, err)
	}
	return nil
}

// staleRe matches the namespace names this package creates; the groups are
// the base, the creating process's pid and the prefix without the role.
var staleRe = regexp.MustCompile(`^(([a-z][a-z0-9]{0,7})-([0-9]+)-[0-9a-f]{6})-(gen|fw|sink|probe)$`)

// CleanupStale deletes namespaces left behind by earlier runs that crashed
// or were killed: only names made by this package with the given base
// ("<base>-<pid>-<6 hex>-<gen|fw|sink|probe>") whose creating process no longer
// exists. Namespaces of live processes, including this one, are kept, so
// parallel test binaries are safe. It returns the names it deleted.
func CleanupStale(base string) ([]string, error) {
	if !baseRe.MatchString(base) {
		return nil, fmt.Errorf("nettest: invalid namespace base %q (want %s)", base, baseRe)
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", netnsDir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		m := staleRe.FindStringSubmatch(e.Name())
		if m == nil || m[2] != base {
			continue
		}
		pid, err := strconv.Atoi(m[3])
		if err != nil || processAlive(pid) || isLive(m[1]) {
			continue
		}
		if err := deleteNamespace(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// isLive reports whether prefix belongs to a live topology of this process.
func isLive(prefix string) bool {
	registry.Lock()
	defer registry.Unlock()
	return registry.prefixes[prefix]
}

// register marks prefix as live in this process.
func register(prefix string) {
	registry.Lock()
	registry.prefixes[prefix] = true
	registry.Unlock()
}

// unregister forgets a prefix and releases its subnet index.
func unregister(prefix string, subnet uint8) {
	registry.Lock()
	delete(registry.prefixes, prefix)
	if subnet != 0 {
		delete(registry.subnets, subnet)
	}
	registry.Unlock()
}

// processAlive reports whether a process with this pid exists (or might:
// when in doubt, the namespace is kept).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	if pid == os.Getpid() {
		// Ours: stale unless registered as live (see isLive), e.g. a
		// leftover of a failed rollback.
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
