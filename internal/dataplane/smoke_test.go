package dataplane

import (
	"bytes"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// inFreshNetns runs fn on a locked thread inside a new, anonymous network
// namespace that disappears when fn returns.
func inFreshNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_NET_ADMIN, CAP_BPF)")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		orig, err := netns.Get()
		if err != nil {
			t.Errorf("get netns: %v", err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("new netns: %v", err)
			return
		}
		defer ns.Close()
		defer netns.Set(orig)
		fn()
	}()
	<-done
}

func TestLoadSmoke(t *testing.T) {
	inFreshNetns(t, func() {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		netlink.LinkSetUp(lo)
		rs := ir.NewRuleset(ir.IPv4)
		in := rs.Chain("INPUT")
		in.Rules = append(in.Rules, &ir.Rule{
			Src:     ir.AddrMatch{Set: true, Addr: netip.MustParseAddr("10.0.0.0"), Mask: netip.MustParseAddr("255.0.0.0")},
			Proto:   ir.ProtoMatch{Set: true, Num: 6},
			Matches: []ir.Match{&ir.TCPMatch{DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 22, Last: 22}}}},
			Target:  ir.Target{Kind: ir.TargetDrop},
		})
		ifs, err := CompilerInterfaces()
		if err != nil {
			t.Fatal(err)
		}
		g, err := compiler.Compile(rs, compiler.Options{Interfaces: ifs})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(g)
		srcs := make([]CounterSource, g.NumCounters())
		for i := range srcs {
			srcs[i].From = -1
		}
		// The saved form comes back byte for byte, zero bytes included,
		// also when an update reuses the maps of a longer one.
		for _, saved := range [][]byte{bytes.Repeat([]byte("hello\x00"), 2000), []byte("hi\x00")} {
			if err := Apply(ir.IPv4, &Update{Gen: g, Saved: saved, Counters: srcs}, AttachOptions{}); err != nil {
				t.Fatal(err)
			}
			got, counters, err := Running(ir.IPv4)
			if err != nil || !bytes.Equal(got, saved) || len(counters) != g.NumCounters() {
				t.Fatalf("saved %d bytes, read back %d (%v), %d counters of %d", len(saved), len(got), err, len(counters), g.NumCounters())
			}
		}
		if err := Stop(); err != nil {
			t.Fatal(err)
		}
	})
}
