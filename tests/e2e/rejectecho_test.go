package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT in OUTPUT of an echo reply: the kernel's stack sends its echo
// replies from its per-CPU ICMP socket holding that socket's lock
// (icmp_reply, icmpv6_echo_reply), so the ICMP error REJECT asks for
// (icmp_send, icmp6_send: icmp_xmit_lock finds the lock taken) is never
// sent; an echo reply a process writes on a raw ICMP socket is answered
// (to fw itself, through lo), and so is an IPv6 neighbour advertisement
// (sent by the stack's neighbour discovery socket, not its ICMPv6 one).
// gen pings fw, fw's raw socket sends gen an echo reply, gen solicits
// fw's address; the counters of the REJECT rule and of the errors
// arriving on lo are compared between the twins.

// rejectEchoRules rejects echo replies (and IPv6 neighbour advertisements)
// in OUTPUT and counts the errors that arrive through lo.
func rejectEchoRules(fam int) string {
	if fam == 4 {
		return "*filter\n-A INPUT -i lo -p icmp -m icmp --icmp-type 3\n" +
			"-A OUTPUT -p icmp -m icmp --icmp-type 0 -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n"
	}
	return "*filter\n-A INPUT -i lo -p ipv6-icmp -m icmp6 --icmpv6-type 1\n" +
		"-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 129 -j REJECT --reject-with icmp6-port-unreachable\n" +
		"-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 136 -j REJECT --reject-with icmp6-port-unreachable\nCOMMIT\n"
}

// rejectEchoNS is gen's neighbour solicitation for fw's in0 address,
// sent to that address, which fw answers with an advertisement.
func rejectEchoNS(tp *nettest.Topology) []byte {
	target := tp.FwIn.IPv6.As16()
	payload := append(target[:], 1, 1) // source link-layer address option
	payload = append(payload, tp.Gen.MAC...)
	return nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.FwIn.IPv6, HopLimit: 255}.
		Packet(nettest.ICMPv6{Type: 135, Payload: payload})
}

// rejectEchoRaw sends gen one echo reply from a raw ICMP socket of fw's.
func rejectEchoRaw(tp *nettest.Topology, fam int) error {
	return nettest.InNamespace(tp.FwNS, func() error {
		network, dst, typ := "ip4:icmp", tp.Gen.IPv4, byte(0)
		if fam == 6 {
			network, dst, typ = "ip6:ipv6-icmp", tp.Gen.IPv6, 129
		}
		conn, err := net.ListenPacket(network, "")
		if err != nil {
			return err
		}
		defer conn.Close()
		msg := []byte{typ, 0, 0, 0, 0x42, 0x42, 0, 1, 'x', 'f', 'w'}
		if fam == 4 { // the kernel fills in only ICMPv6's checksum
			c := nettest.Checksum(msg)
			msg[2], msg[3] = byte(c>>8), byte(c)
		}
		_, err = conn.WriteTo(msg, &net.IPAddr{IP: dst.AsSlice()})
		// The kernel's OUTPUT drop fails the send (EPERM), xfw's does
		// not (docs/differences.md): the error is sent all the same.
		if err != nil && !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("echo reply to %s: %w", dst, err)
		}
		return nil
	})
}

// TestRejectOutputStackEchoAgainstKernel rejects in OUTPUT the echo
// replies fw's stack sends to gen's pings, and one a raw socket of fw's
// sends, under xfw and the kernel's iptables, and compares the counters:
// no ICMP error about the stack's, one about the raw socket's.
func TestRejectOutputStackEchoAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	twinsPerFamily(t, rejectEchoAgainstKernel)
}

func rejectEchoAgainstKernel(t *testing.T, tw *twins, fam int) {
	const pings = 2
	errKey := map[int]string{4: "INPUT -i lo -p icmp -m icmp --icmp-type 3",
		6: "INPUT -i lo -p ipv6-icmp -m icmp6 --icmpv6-type 1"}[fam]
	rounds := []string{"stack", "raw socket"}
	if fam == 6 {
		rounds = append(rounds, "neighbour advertisement")
	}
	for _, round := range rounds {
		got := map[string]map[string]counter{}
		var mu sync.Mutex
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, fam, rejectEchoRules(fam))
			if round == "neighbour advertisement" {
				// The stack's neighbour discovery socket (not its
				// ICMPv6 one, whose lock it does not hold) answers:
				// its advertisement is rejected and answered.
				if err := tp.InjectFromGen(tp.GenToFw().Frame(rejectEchoNS(tp))); err != nil {
					t.Errorf("%s: inject: %v", kind, err)
				}
			} else if round == "stack" {
				dst := map[int]netip.Addr{4: tp.FwIn.IPv4, 6: tp.FwIn.IPv6}[fam]
				for i := 0; i < pings; i++ {
					if a := nettest.Ping(tp.GenNS, dst, nettest.WithTimeout(time.Second)); a.Outcome != nettest.TimedOut {
						t.Errorf("%s: gen's ping %d of %s: %v, want no answer", kind, i, dst, a.Outcome)
					}
				}
			} else if err := rejectEchoRaw(tp, fam); err != nil {
				t.Errorf("%s: %v", kind, err)
			}
			time.Sleep(typeSettle)
			res, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-c")...)
			if err != nil || res.ExitCode != 0 {
				t.Errorf("%s save failed (%v): %v", kind, err, res)
				return
			}
			c := ruleCountersOf(t, res.Stdout)
			mu.Lock()
			got[kind] = c
			mu.Unlock()
		})
		if t.Failed() {
			return
		}
		compareTypeCounters(t, got["kernel"], got["xfw"])
		// The rounds are what they claim: the kernel answered the raw
		// socket's echo reply, not its stack's.
		want := map[string]uint64{"stack": 0, "raw socket": 1, "neighbour advertisement": 1}[round]
		if n := got["kernel"][errKey].packets; n != want {
			t.Errorf("%s: the kernel's errors through lo: %d, want %d (fix the test)", round, n, want)
		}
	}
}
