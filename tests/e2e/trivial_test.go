package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// trivialPings is how many pings each trivial-walk case sends to fw and
// through it to sink.
const trivialPings = 7

// trivialCases are the rulesets of TestTrivialWalkCountsAgainstKernel:
// classified says whether the traffic (pings to fw and to sink, UDP to
// sink) meets a walk that is not trivial (the data plane classifies it).
var trivialCases = []struct {
	name       string
	rules      string
	tables     []string // tables whose counters are compared besides filter
	classified bool
}{
	{name: "no rule", rules: "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"},
	{name: "an INPUT rule only (FORWARD, OUTPUT trivial)", classified: true,
		rules: "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j ACCEPT\nCOMMIT\n"},
	{name: "unconditional counting rules",
		rules: "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT\n-A FORWARD\n-A FORWARD -j ACCEPT\n-A OUTPUT -j ACCEPT\nCOMMIT\n"},
	{name: "empty raw and mangle tables", tables: []string{"raw", "mangle"},
		rules: "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n" +
			"*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n" +
			"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"},
}

// TestTrivialWalkCountsAgainstKernel loads rulesets whose walks accept
// every packet without classification (the data plane's minimal path,
// bpf/trivial.h) in both twins, sends the same traffic through both and
// compares every counter of every table, packets and bytes, and the
// verbose listings, also after -Z of one chain and of all; with no rule the
// policies count exactly the packets sent. The classifier's scratch
// (its .l3len, written by every classification) shows whether xfw's XDP
// hook classified anything: never on the minimal path; a case with a rule
// the traffic meets is the control.
func TestTrivialWalkCountsAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	tw := newTwins(t, xfwPath(t))
	for _, tc := range trivialCases {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, 4, tc.rules)
		})
		xtp := tw.tps["xfw"]
		marker := newClassifyMarker(t, xtp)
		// The traffic, then again after zeroing one chain and all.
		for _, zero := range [][]string{nil, {"-Z", "FORWARD"}, {"-Z"}} {
			if zero != nil {
				tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
					if res, err := nettest.Exec(tp.FwNS, append(append(fw.cmd(4, ""), "-w", lockWait), zero...)...); err != nil || res.ExitCode != 0 {
						t.Errorf("%s: %s %v: %v %+v", tc.name, kind, zero, err, res)
					}
				})
			}
			marker.reset(t)
			trivialTraffic(t, tw)
			if got := marker.classified(t); got != tc.classified {
				t.Errorf("%s: xfw's XDP hook classified packets: %v, want %v", tc.name, got, tc.classified)
			}
			compareTrivialCounters(t, tw, fmt.Sprintf("%s, after %v", tc.name, zero), tc.tables)
		}
		if tc.name == "no rule" {
			// After "-Z": the last round alone. Pings to fw: INPUT,
			// replies OUTPUT; pings to sink both ways and one datagram
			// with its port-unreachable: FORWARD.
			k := counters(t, saveTable(t, tw.fws["kernel"], tw.tps["kernel"], "filter"))
			want := map[string]uint64{":INPUT": trivialPings, ":OUTPUT": trivialPings, ":FORWARD": 2*trivialPings + 2}
			for chain, n := range want {
				if k[chain].packets != n {
					t.Errorf("kernel's %s policy counted %d packets, the traffic was %d", chain, k[chain].packets, n)
				}
			}
		}
	}
}

// compareTrivialCounters compares the twins' counters of filter and the
// given tables (iptables-save -c: packets and bytes of every policy and
// rule) and their verbose listings of filter (-L -v -x -n).
func compareTrivialCounters(t *testing.T, tw *twins, what string, tables []string) {
	t.Helper()
	for _, table := range append([]string{"filter"}, tables...) {
		k := counters(t, saveTable(t, tw.fws["kernel"], tw.tps["kernel"], table))
		x := counters(t, saveTable(t, tw.fws["xfw"], tw.tps["xfw"], table))
		if len(k) == 0 {
			t.Fatalf("%s: the kernel's table %s has no counters", what, table)
		}
		for key, kc := range k {
			if xc, ok := x[key]; !ok || xc != kc {
				t.Errorf("%s: table %s %q: xfw %+v, kernel %+v", what, table, key, x[key], kc)
			}
		}
	}
	listings := map[string]string{}
	for kind, tp := range tw.tps {
		res, err := nettest.Exec(tp.FwNS, append(tw.fws[kind].cmd(4, ""), "-w", lockWait, "-L", "-v", "-x", "-n")...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %s -L -v: %v %+v", what, kind, err, res)
		}
		listings[kind] = res.Stdout
	}
	if listings["kernel"] != listings["xfw"] {
		t.Errorf("%s: -L -v -x -n differs:\nkernel:\n%s\nxfw:\n%s", what, listings["kernel"], listings["xfw"])
	}
}

// trivialTraffic sends the same packets through both twins: pings to fw
// and to sink, a UDP datagram to sink's closed port (answered).
func trivialTraffic(t *testing.T, tw *twins) {
	t.Helper()
	tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
		for i := 0; i < trivialPings; i++ {
			for _, dst := range []netip.Addr{tp.FwIn.IPv4, tp.Sink.IPv4} {
				if a := nettest.Ping(tp.GenNS, dst); a.Outcome != nettest.OK {
					t.Errorf("%s: ping %s: %v", kind, dst, a.Outcome)
				}
			}
		}
		dst := netip.AddrPortFrom(tp.Sink.IPv4, 9)
		if a := nettest.UDPSend(tp.GenNS, dst, bytes.Repeat([]byte("x"), 333), nettest.ExpectReply()); a.Outcome != nettest.Refused {
			t.Errorf("%s: UDP to %s: %v", kind, dst, a.Outcome)
		}
	})
	time.Sleep(ctSettle)
}

// saveTable returns iptables-save -c -t table of fw's namespace.
func saveTable(t *testing.T, fw firewall, tp *nettest.Topology, table string) string {
	t.Helper()
	argv := append(fw.cmd(4, "-save"), "-c", "-t", table)
	res, err := nettest.Exec(tp.FwNS, argv...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s save -t %s failed (%v): %s", fw.kind, table, err, res.Stderr)
	}
	return res.Stdout
}

// classifyMarker watches the XDP hook's classifier scratch (map
// xfw_xdp_scratch, entry XFW_SCRATCH_XDP, every CPU): xfw_classify stores
// the packet's length in its .cls.l3len, so a value no packet has, set
// before the traffic, survives it only when nothing was classified.
type classifyMarker struct {
	m   *ebpf.Map
	off int // offset of cls.l3len in struct xfw_xdp_scratch
	tp  *nettest.Topology
}

// classifyUntouched is the marker value: longer than any IP packet.
const classifyUntouched = 0xfffffff1

// newClassifyMarker finds the scratch of the XDP program attached to fw's
// interface facing gen, and the offset from the object's BTF.
func newClassifyMarker(t *testing.T, tp *nettest.Topology) *classifyMarker {
	t.Helper()
	off, err := scratchL3lenOffset()
	if err != nil {
		t.Fatal(err)
	}
	m, err := attachedScratch(tp)
	if err != nil {
		t.Fatalf("classifier scratch: %v", err)
	}
	cm := &classifyMarker{m: m, off: off, tp: tp}
	t.Cleanup(func() { cm.m.Close() })
	return cm
}

// attachedScratch opens map xfw_xdp_scratch of the XDP program attached
// to fw's interface facing gen.
func attachedScratch(tp *nettest.Topology) (*ebpf.Map, error) {
	var scratch *ebpf.Map
	err := nettest.InNamespace(tp.FwNS, func() error {
		l, err := netlink.LinkByName(nettest.FwInIfname)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x == nil || !x.Attached {
			return fmt.Errorf("no XDP program on %s", nettest.FwInIfname)
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(l.Attrs().Xdp.ProgId))
		if err != nil {
			return err
		}
		defer prog.Close()
		info, err := prog.Info()
		if err != nil {
			return err
		}
		ids, _ := info.MapIDs()
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				return err
			}
			if mi, err := m.Info(); err == nil && mi.Name == "xfw_xdp_scratch" {
				scratch = m
				return nil
			}
			m.Close()
		}
		return fmt.Errorf("the XDP program has no map xfw_xdp_scratch")
	})
	return scratch, err
}

// scratchL3lenOffset reads the offset of .cls.l3len in struct
// xfw_xdp_scratch from the BTF of the object the build embeds.
func scratchL3lenOffset() (int, error) {
	_, file, _, _ := runtime.Caller(0)
	spec, err := btf.LoadSpec(filepath.Join(filepath.Dir(file), "..", "..", "internal", "dataplane", "bpf", "xfw.o"))
	if err != nil {
		return 0, fmt.Errorf("BTF of xfw.o: %w", err)
	}
	var sc *btf.Struct
	if err := spec.TypeByName("xfw_xdp_scratch", &sc); err != nil {
		return 0, err
	}
	member := func(s *btf.Struct, name string) (btf.Member, error) {
		for _, m := range s.Members {
			if m.Name == name {
				return m, nil
			}
		}
		return btf.Member{}, fmt.Errorf("struct %s has no member %s", s.Name, name)
	}
	cls, err := member(sc, "cls")
	if err != nil {
		return 0, err
	}
	clsType, ok := btf.UnderlyingType(cls.Type).(*btf.Struct)
	if !ok {
		return 0, fmt.Errorf("member cls is not a struct")
	}
	l3len, err := member(clsType, "l3len")
	if err != nil {
		return 0, err
	}
	return int(cls.Offset.Bytes() + l3len.Offset.Bytes()), nil
}

// values reads the scratch of every CPU.
func (cm *classifyMarker) values(t *testing.T) [][]byte {
	t.Helper()
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = make([]byte, cm.m.ValueSize())
	}
	if err := cm.m.Lookup(uint32(0), vals); err != nil {
		t.Fatalf("read the classifier scratch: %v", err)
	}
	return vals
}

// reset sets the marker on every CPU.
func (cm *classifyMarker) reset(t *testing.T) {
	t.Helper()
	vals := cm.values(t)
	for _, v := range vals {
		binary.NativeEndian.PutUint32(v[cm.off:], classifyUntouched)
	}
	if err := cm.m.Put(uint32(0), vals); err != nil {
		t.Fatalf("write the classifier scratch: %v", err)
	}
}

// classified reports whether some CPU's marker was overwritten; the XDP
// program must still be the one whose scratch was marked.
func (cm *classifyMarker) classified(t *testing.T) bool {
	t.Helper()
	now, err := attachedScratch(cm.tp)
	if err != nil {
		t.Fatalf("classifier scratch: %v", err)
	}
	defer now.Close()
	a, errA := cm.m.Info()
	b, errB := now.Info()
	if errA != nil || errB != nil {
		t.Fatalf("classifier scratch: %v %v", errA, errB)
	}
	if ida, _ := a.ID(); ida != func() ebpf.MapID { id, _ := b.ID(); return id }() {
		t.Fatal("the XDP program's scratch changed during the traffic: the marker says nothing")
	}
	for _, v := range cm.values(t) {
		if binary.NativeEndian.Uint32(v[cm.off:]) != classifyUntouched {
			return true
		}
	}
	return false
}

// TestTrivialWalkThenConntrack switches both twins from a ruleset without
// rules (xfw's minimal path: no connection tracked) to one whose INPUT
// rules test the connection state while a TCP connection to fw is open:
// the kernel picks the connection up in the middle (nf_conntrack_tcp_loose)
// and so must xfw; then back to no rule and a new connection, and to the
// state rules again. Outcomes and the rules' counters must agree.
func TestTrivialWalkThenConntrack(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	const empty = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	const stateful = "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\n" +
		"-A INPUT -m conntrack --ctstate NEW -j ACCEPT\n" +
		"-A INPUT -m conntrack --ctstate INVALID\n" +
		"-A INPUT -m conntrack --ctstate RELATED -j ACCEPT\nCOMMIT\n"
	twins := newCtTwins(t, 4, empty, ctOptions{})
	outcome := make([][]string, len(twins))
	for i, tw := range twins {
		c, got := echoConnection(t, tw, 7000, "hello")
		outcome[i] = append(outcome[i], got)
		tw.fw.restore(t, tw.tp, 4, stateful)
		// Each read with a deadline of its own: the connection's,
		// 20 s after it opened, would have to outlast four restores
		// of the xfw twin's, `xfw` commands taking up to 5 s each
		// when the machine was busiest here.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("after"))
		outcome[i] = append(outcome[i], readN(c, 5))
		time.Sleep(ctSettle)
		outcome[i] = append(outcome[i], "stateful: "+ruleCounts(t, tw))
		// Back to no rule (untracked again), a new connection, then the
		// state rules again: the new connection is picked up too.
		tw.fw.restore(t, tw.tp, 4, empty)
		c2, got := echoConnection(t, tw, 7001, "third")
		outcome[i] = append(outcome[i], got)
		tw.fw.restore(t, tw.tp, 4, stateful)
		for _, conn := range []*net.TCPConn{c, c2} {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = conn.Write([]byte("again"))
		}
		outcome[i] = append(outcome[i], readN(c, 5), readN(c2, 5))
		time.Sleep(ctSettle)
		outcome[i] = append(outcome[i], "stateful again: "+ruleCounts(t, tw))
	}
	for k := range outcome[0] {
		if outcome[0][k] != outcome[1][k] {
			t.Errorf("step %d: kernel %q, xfw %q", k, outcome[0][k], outcome[1][k])
		} else {
			t.Logf("step %d: %s", k, outcome[0][k])
		}
	}
}

// echoConnection opens a TCP connection from gen to an echo server on
// fw's port, sends payload and returns the connection and what came back,
// once the last ACKs have settled.
func echoConnection(t *testing.T, tw *ctTwin, port uint16, payload string) (*net.TCPConn, string) {
	t.Helper()
	ln := listenTCP(t, tw.tp.FwNS, netip.AddrPortFrom(tw.fwAddr(), port))
	acceptOne(ln, echoOnce)
	c, err := dialTCP(tw.tp.GenNS, netip.AddrPortFrom(tw.fwAddr(), port), 2*time.Second)
	if err != nil {
		t.Fatalf("%s: dial port %d: %v", tw.fw.kind, port, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = c.Write([]byte(payload))
	got := readN(c, len(payload))
	time.Sleep(ctSettle)
	return c, got
}

// ruleCounts renders the INPUT rules' packet counters of tw's firewall.
func ruleCounts(t *testing.T, tw *ctTwin) string {
	t.Helper()
	var parts []string
	for key, c := range counters(t, tw.fw.save(t, tw.tp, 4)) {
		if strings.HasPrefix(key, "INPUT ") {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(key, "INPUT -m conntrack --ctstate "), c.packets))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
