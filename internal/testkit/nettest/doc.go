// Package nettest builds real network topologies in network namespaces for Go
// tests and sends real packets through them.
//
// A Topology is three namespaces, gen, fw and sink, joined by veth pairs
// gen<->fw and fw<->sink, with IPv4 and IPv6 addresses and routes so that gen
// reaches sink through fw, which forwards. Tests attach the firewall to fw and
// observe what crosses it:
//
//   - Exec and Run run commands inside a namespace (ip netns exec);
//   - InNamespace runs Go code inside a namespace on a dedicated OS thread;
//   - Inject sends hand-made Ethernet frames out of an interface (AF_PACKET),
//     built with Ethernet, IPv4, IPv6, TCP, UDP, ICMPv4, ICMPv6 and the
//     fragment helpers, so tests can craft fragments, options, extension
//     headers, VLAN tags, odd TCP flags and truncated packets;
//   - StartCapture records the frames seen on an interface, parsed by Parse;
//   - StartUDPServer, StartTCPServer, TCPConnect, UDPSend and Ping exercise
//     the kernel's sockets from inside a namespace and report outcomes such as
//     refused, not permitted (an OUTPUT drop) and timed out.
//
// Safety: nothing here touches the namespace the test process runs in. Every
// namespace is created by New with a name of the form
// "<base>-<pid>-<random>-<role>", deleted by t.Cleanup (which also runs when a
// test panics), and namespaces left behind by processes that died are removed
// by CleanupStale, which New calls once per base and process. All waits are bounded.
//
// The tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2's ip, and a
// kernel with network namespaces, veth and AF_PACKET; RequireRoot fails the
// test with a clear message when any is missing.
//
// Imports point outward only: nettest uses the standard library,
// golang.org/x/sys/unix and vishvananda/netns, none of xfw's packages; the
// harness (difftest), the benchmarks and the tests import it, and nothing
// in bin/xfw does.
package nettest
