package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// bridgeCheckRules counts bridged UDP in PREROUTING and FORWARD.
const bridgeCheckRules = `*mangle
-A PREROUTING -p udp
COMMIT
*filter
-A FORWARD -p udp
COMMIT
`

// bridgeCheckProbe is a frame bridged from gen to sink: fix changes the
// IPv4 header of a valid datagram (frame: its Ethernet frame).
type bridgeCheckProbe struct {
	name string
	fix  func(frame []byte) []byte
}

// ipv4Fixed returns frame with its IPv4 header (after 14 bytes of
// Ethernet) changed by change, its header checksum then made right.
func ipv4Fixed(change func(ip []byte)) func(frame []byte) []byte {
	return func(frame []byte) []byte {
		ip := frame[14:]
		change(ip)
		binary.BigEndian.PutUint16(ip[10:], 0)
		hlen := int(ip[0]&0x0f) * 4
		binary.BigEndian.PutUint16(ip[10:], nettest.Checksum(ip[:min(hlen, len(ip))]))
		return frame
	}
}

// bridgeCheckProbes are the IPv4 headers br_validate_ipv4 refuses (the
// kernel drops them before iptables), and two it takes.
var bridgeCheckProbes = []bridgeCheckProbe{
	{name: "valid", fix: func(f []byte) []byte { return f }},
	{name: "bad header checksum", fix: func(f []byte) []byte { f[14+11] ^= 0x5a; return f }},
	{name: "total length beyond the frame", fix: ipv4Fixed(func(ip []byte) {
		binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+8)
	})},
	{name: "total length below the header", fix: ipv4Fixed(func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], 16) })},
	{name: "ihl 4", fix: ipv4Fixed(func(ip []byte) { ip[0] = 0x44 })},
	{name: "version 5", fix: ipv4Fixed(func(ip []byte) { ip[0] = 0x55 })},
	{name: "options, valid", fix: func(f []byte) []byte {
		// Four no-operation options: ihl 6.
		ip := append([]byte(nil), f[14:]...)
		hdr := append(append([]byte(nil), ip[:20]...), 1, 1, 1, 1)
		out := append(append(append([]byte(nil), f[:14]...), hdr...), ip[20:]...)
		return ipv4Fixed(func(ip []byte) {
			ip[0] = 0x46
			binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+4)
		})(out)
	}},
}

// TestBridgedIPv4CheckAgainstKernel injects bridged IPv4 frames whose
// header br_netfilter's br_validate_ipv4 refuses (and valid ones) through
// xfw and iptables-legacy: the kernel drops the refused ones before
// PREROUTING, in xfw's namespace too (its br_netfilter runs there whenever
// xfw judges bridged frames: bridge-nf-call-iptables is br_netfilter's), so
// they never reach the output port's hook; every counter and what reaches
// sink are compared.
func TestBridgedIPv4CheckAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		fw.restore(t, tp, 4, bridgeCheckRules)
		fw.restore(t, tp, 6, bridgeCheckRules)
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for i, pr := range bridgeCheckProbes {
		port := uint16(9830 + i)
		res := map[string]string{}
		var mu sync.Mutex
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			r := bridgeCheckRound(t, tp, fw, pr.name, 4, pr.fix(bridgedUDP(4, port, false, false)(tp)))
			mu.Lock()
			res[kind] = r
			mu.Unlock()
		})
		if res["kernel"] != res["xfw"] {
			t.Errorf("%s:\nkernel: %s\nxfw:    %s", pr.name, res["kernel"], res["xfw"])
		} else {
			t.Logf("%s: %s", pr.name, res["kernel"])
		}
	}
}

// bridgeCheckRound injects frame (a probe of family fam that bridgedUDP
// built) at gen and returns what sink received (frame lengths and VLAN
// tags) and fw's non-zero counters of family fam, then zeroes them.
func bridgeCheckRound(t *testing.T, tp *nettest.Topology, fw firewall, name string, fam int, frame []byte) string {
	t.Helper()
	mark := []byte("xfw-bridge-probe")
	c := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(c nettest.Captured) bool {
		return !c.Outgoing && bytes.Contains(c.Raw, mark)
	})
	if err := tp.InjectFromGen(frame); err != nil {
		t.Errorf("%s: inject: %v", name, err)
	}
	drainFw(t, tp)
	c.Wait(1, 500*time.Millisecond)
	var got []string
	for _, f := range c.StopQueued() {
		got = append(got, fmt.Sprintf("%d bytes, tags %v", len(f.Raw), f.VLANs))
	}
	return fmt.Sprintf("sink received %v; counted %v", got, takeBridgeCounters(t, tp, fw, name, fam))
}

// takeBridgeCounters returns fw's non-zero filter and mangle counters of
// family fam (sorted "rule=packets") and zeroes them.
func takeBridgeCounters(t *testing.T, tp *nettest.Topology, fw firewall, name string, fam int) []string {
	t.Helper()
	out, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-c")...)
	if err != nil || out.ExitCode != 0 {
		t.Errorf("%s: save: %v", name, err)
	}
	var ctrs []string
	for k, v := range tableCounters(out.Stdout) {
		if v > 0 && !strings.Contains(k, " :") {
			ctrs = append(ctrs, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(ctrs)
	for _, table := range []string{"filter", "mangle"} {
		nettest.MustExec(t, tp.FwNS, append(fw.cmd(fam, ""), "-w", lockWait, "-t", table, "-Z")...)
	}
	return ctrs
}
