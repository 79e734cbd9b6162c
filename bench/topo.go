package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// nsBase starts the name of every namespace the bench creates. Names have
// nettest's form "<base>-<pid>-<6 hex>-<role>", so nettest.CleanupStale
// removes what a killed run left behind, and never a live run's.
const nsBase = "xbench"

// CPU roles on the 2-core machine: the traffic generator (and the clients)
// run on genCPU, the firewall namespace's packet processing (the receive
// NAPI thread of its ingress interface, its local servers) on fwCPU.
const (
	genCPU = 0
	fwCPU  = 1
)

// Interface indexes inside the namespaces, distinct across a veth pair (a
// pair with equal indexes gets its carrier up to a second late).
const (
	genIfindex   = 10
	fwInIfindex  = 11
	fwOutIfindex = 12
	sinkIfindex  = 13
)

// Addresses of every topology (the namespaces are isolated from each other
// and from the host, so each topology uses the same plan).
var (
	genAddr   = netip.MustParseAddr("10.1.1.2")
	fwInAddr  = netip.MustParseAddr("10.1.1.1")
	fwOutAddr = netip.MustParseAddr("10.1.2.1")
	sinkAddr  = netip.MustParseAddr("10.1.2.2")
	// srcNet holds the generated traffic's source addresses (routed back
	// to gen in fw, so reverse-path checks would pass).
	srcNet = netip.MustParsePrefix("10.100.0.0/16")
	// fwdNet holds FORWARD destinations, routed by fw to sink.
	fwdNet = netip.MustParsePrefix("10.200.0.0/16")
	// localNet holds INPUT destinations: a local route in fw.
	localNet = netip.MustParsePrefix("10.201.0.0/16")
)

// linkUpTimeout bounds the wait for the veth links to come up.
const linkUpTimeout = 10 * time.Second

// topology is gen —veth— fw —veth— sink in three fresh namespaces. gen's
// frames arrive on fw's in interface; fw forwards to sink, whose XDP
// program counts and drops everything.
type topology struct {
	Label       string // what it serves ("xfw", "iptables-nft", …)
	Prefix      string
	GenNS, FwNS string
	SinkNS      string
	// Interface names, unique per topology since they name the NAPI
	// threads: gen's, fw's ingress and egress, sink's.
	GenIf, FwIn, FwOut, SinkIf string
	GenMAC, FwInMAC            net.HardwareAddr
	FwOutMAC, SinkMAC          net.HardwareAddr
	sinkLink                   link.Link
	sinkProg                   *ebpf.Program
	sinkCount                  *ebpf.Map
	closeOnce                  sync.Once
}

// live lists the topologies to remove on exit or signal.
var live = struct {
	sync.Mutex
	t map[*topology]bool
}{t: map[*topology]bool{}}

// closeAllTopologies removes every live topology (signal handler, exit).
func closeAllTopologies() {
	live.Lock()
	ts := make([]*topology, 0, len(live.t))
	for t := range live.t {
		ts = append(ts, t)
	}
	live.Unlock()
	for _, t := range ts {
		t.Close()
	}
}

// newTopology builds a topology; on error it removes what it created.
func newTopology(ctx context.Context, label string) (_ *topology, err error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("random name: %w", err)
	}
	h := hex.EncodeToString(b)
	prefix := fmt.Sprintf("%s-%d-%s", nsBase, os.Getpid(), h)
	t := &topology{
		Label:  label,
		Prefix: prefix,
		GenNS:  prefix + "-gen", FwNS: prefix + "-fw", SinkNS: prefix + "-sink",
		GenIf: "xg" + h, FwIn: "xi" + h, FwOut: "xo" + h, SinkIf: "xs" + h,
		// Locally administered unicast MACs.
		GenMAC:   net.HardwareAddr{0x02, 0xb0, 0, 0, 1, 2},
		FwInMAC:  net.HardwareAddr{0x02, 0xb0, 0, 0, 1, 1},
		FwOutMAC: net.HardwareAddr{0x02, 0xb0, 0, 0, 2, 1},
		SinkMAC:  net.HardwareAddr{0x02, 0xb0, 0, 0, 2, 2},
	}
	live.Lock()
	live.t[t] = true
	live.Unlock()
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for _, ns := range []string{t.GenNS, t.FwNS, t.SinkNS} {
		if err := mustIn(ctx, "", "ip", "netns", "add", ns); err != nil {
			return nil, fmt.Errorf("create namespace: %w", err)
		}
		// No IPv6: no router solicitations, MLD or neighbour
		// discovery on the measured links.
		if err := mustIn(ctx, ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
			"net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			return nil, err
		}
		if err := mustIn(ctx, "", "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	if err := mustIn(ctx, t.FwNS, "sysctl", "-qw", "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"); err != nil {
		return nil, err
	}
	cmds := [][]string{
		{"ip", "-n", t.GenNS, "link", "add", t.GenIf, "index", strconv.Itoa(genIfindex), "address", t.GenMAC.String(),
			"type", "veth", "peer", "name", t.FwIn, "index", strconv.Itoa(fwInIfindex), "address", t.FwInMAC.String(), "netns", t.FwNS},
		{"ip", "-n", t.SinkNS, "link", "add", t.SinkIf, "index", strconv.Itoa(sinkIfindex), "address", t.SinkMAC.String(),
			"type", "veth", "peer", "name", t.FwOut, "index", strconv.Itoa(fwOutIfindex), "address", t.FwOutMAC.String(), "netns", t.FwNS},
		{"ip", "-n", t.GenNS, "addr", "add", genAddr.String() + "/24", "dev", t.GenIf},
		{"ip", "-n", t.FwNS, "addr", "add", fwInAddr.String() + "/24", "dev", t.FwIn},
		{"ip", "-n", t.FwNS, "addr", "add", fwOutAddr.String() + "/24", "dev", t.FwOut},
		{"ip", "-n", t.SinkNS, "addr", "add", sinkAddr.String() + "/24", "dev", t.SinkIf},
		{"ip", "-n", t.GenNS, "link", "set", t.GenIf, "up"},
		{"ip", "-n", t.FwNS, "link", "set", t.FwIn, "up"},
		{"ip", "-n", t.FwNS, "link", "set", t.FwOut, "up"},
		{"ip", "-n", t.SinkNS, "link", "set", t.SinkIf, "up"},
		{"ip", "-n", t.FwNS, "route", "add", srcNet.String(), "via", genAddr.String()},
		{"ip", "-n", t.FwNS, "route", "add", setNet.String(), "via", genAddr.String()},
		{"ip", "-n", t.FwNS, "route", "add", fwdNet.String(), "via", sinkAddr.String()},
		{"ip", "-n", t.FwNS, "route", "add", "local", localNet.String(), "dev", "lo"},
		{"ip", "-n", t.GenNS, "route", "add", fwdNet.String(), "via", fwInAddr.String()},
		{"ip", "-n", t.GenNS, "route", "add", localNet.String(), "via", fwInAddr.String()},
		{"ip", "-n", t.FwNS, "neigh", "replace", genAddr.String(), "lladdr", t.GenMAC.String(), "dev", t.FwIn, "nud", "permanent"},
		{"ip", "-n", t.FwNS, "neigh", "replace", sinkAddr.String(), "lladdr", t.SinkMAC.String(), "dev", t.FwOut, "nud", "permanent"},
		{"ip", "-n", t.GenNS, "neigh", "replace", fwInAddr.String(), "lladdr", t.FwInMAC.String(), "dev", t.GenIf, "nud", "permanent"},
		{"ip", "-n", t.SinkNS, "neigh", "replace", fwOutAddr.String(), "lladdr", t.FwOutMAC.String(), "dev", t.SinkIf, "nud", "permanent"},
		// GRO gives a veth a NAPI instance even without XDP (so gen's
		// XDP frames can be sent to fw, and every firewall sees the same
		// receive path); threaded, so it can be pinned: fw's receive path
		// runs on fwCPU, gen's (replies to its clients) on genCPU. With
		// TSO off on the sending side, socket traffic (AF_PACKET, TCP)
		// uses the peer's NAPI too instead of being processed on the
		// sender's CPU (veth_skb_is_eligible_for_gro).
		{"ip", "netns", "exec", t.FwNS, "ethtool", "-K", t.FwIn, "gro", "on", "tso", "off"},
		{"ip", "netns", "exec", t.FwNS, "sh", "-c", "echo 1 > /sys/class/net/" + t.FwIn + "/threaded"},
		{"ip", "netns", "exec", t.GenNS, "ethtool", "-K", t.GenIf, "gro", "on", "tso", "off"},
		{"ip", "netns", "exec", t.GenNS, "sh", "-c", "echo 1 > /sys/class/net/" + t.GenIf + "/threaded"},
	}
	for _, c := range cmds {
		if err := mustIn(ctx, "", c...); err != nil {
			return nil, fmt.Errorf("topology %s: %w", prefix, err)
		}
	}
	for _, w := range [][2]string{{t.GenNS, t.GenIf}, {t.FwNS, t.FwIn}, {t.FwNS, t.FwOut}, {t.SinkNS, t.SinkIf}} {
		if err := waitUp(w[0], w[1]); err != nil {
			return nil, err
		}
	}
	if err := t.attachSink(); err != nil {
		return nil, err
	}
	if err := t.pinNAPI(); err != nil {
		return nil, err
	}
	return t, nil
}

// waitUp waits until ifname in ns is running.
func waitUp(ns, ifname string) error {
	return nettest.InNamespace(ns, func() error {
		deadline := time.Now().Add(linkUpTimeout)
		for {
			ifi, err := net.InterfaceByName(ifname)
			if err != nil {
				return fmt.Errorf("interface %s in %s: %w", ifname, ns, err)
			}
			if ifi.Flags&net.FlagRunning != 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("interface %s in %s not running after %v", ifname, ns, linkUpTimeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// attachSink loads the counting XDP program onto sink's interface.
func (t *topology) attachSink() error {
	prog, count, err := newSinkProgram()
	if err != nil {
		return err
	}
	t.sinkProg, t.sinkCount = prog, count
	return nettest.InNamespace(t.SinkNS, func() error {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: sinkIfindex, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("attach sink XDP in %s: %w", t.SinkNS, err)
		}
		t.sinkLink = l
		return nil
	})
}

// sinkPackets returns how many frames sink has received so far.
func (t *topology) sinkPackets() (uint64, error) {
	return sumPerCPU(t.sinkCount)
}

// pinNAPI pins fw's ingress NAPI thread(s) to fwCPU and gen's to genCPU.
// A thread is created when the interface gets a NAPI instance and may be
// recreated when an XDP program is attached, so measurements call it again
// first.
func (t *topology) pinNAPI() error {
	for _, p := range []struct {
		ifname string
		cpu    int
	}{{t.FwIn, fwCPU}, {t.GenIf, genCPU}} {
		pids, err := napiThreads(p.ifname)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return fmt.Errorf("no NAPI thread for %s (threaded NAPI not enabled?)", p.ifname)
		}
		for _, pid := range pids {
			if err := pinPID(pid, p.cpu); err != nil {
				return err
			}
		}
	}
	return nil
}

// napiThreads returns the pids of the kernel threads "napi/<ifname>-<id>".
func napiThreads(ifname string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	want := "napi/" + ifname + "-"
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(string(comm)), want) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// pinPID sets the CPU affinity of one thread or process to cpu.
func pinPID(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(pid, &set); err != nil {
		return fmt.Errorf("pin pid %d to CPU %d: %w", pid, cpu, err)
	}
	return nil
}

// Close removes the topology (idempotent).
func (t *topology) Close() {
	t.closeOnce.Do(func() {
		if t.sinkLink != nil {
			t.sinkLink.Close()
		}
		if t.sinkProg != nil {
			t.sinkProg.Close()
		}
		if t.sinkCount != nil {
			t.sinkCount.Close()
		}
		var errs []error
		for _, ns := range []string{t.GenNS, t.FwNS, t.SinkNS} {
			if nettest.NamespaceExists(ns) {
				if err := mustIn(context.Background(), "", "ip", "netns", "del", ns); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			progress("warning: removing topology %s: %v", t.Prefix, err)
		}
		live.Lock()
		delete(live.t, t)
		live.Unlock()
	})
}
