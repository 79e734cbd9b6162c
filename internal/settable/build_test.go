package settable

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestBuildSetTables checks the set lookups built for set conditions:
// kinds, keys, prefix-length meta words, expiry conversion, list:set
// expansion (members of the other family or of more dimensions left
// out), hash:net,iface blockers, and the limit of lookups.
func TestBuildSetTables(t *testing.T) {
	get := storeSets(t, []string{
		"create ip hash:ip", "add ip 10.0.0.1",
		"create ipp hash:ip,port", "add ipp 10.0.0.1,udp:53", "add ipp 10.0.0.2,icmp:echo-request",
		"create np hash:net,port timeout 600", "add np 10.0.0.0/24,tcp:80 timeout 0", "add np 10.0.0.0/30,tcp:80 nomatch timeout 10",
		"create ni hash:net,iface", "add ni 10.0.0.0/24,in0", "add ni 10.0.0.0/24,eth+", "add ni 10.1.0.0/16,out0", "add ni 10.2.0.0/16,physdev:in0",
		"create bp bitmap:port range 1-100", "add bp 7",
		"create ip6 hash:ip family inet6", "add ip6 2001:db8::1",
		"create ls list:set timeout 600", "add ls ip timeout 20", "add ls ip6", "add ls bp", "add ls ipp",
	})
	ifaces := []compiler.Interface{{Index: 7, Name: "in0"}, {Index: 8, Name: "out0"}}
	clk := setClock{wall: time.Now(), mono: 1_000_000_000_000}
	cond := func(name string, dim, src uint8, rn bool) compiler.SetCond {
		return compiler.SetCond{Family: ir.IPv4, Name: name, Dirs: ir.SetDirs{Dim: dim, Src: src}, ReturnNomatch: rn}
	}
	find := func(st dataplane.SetTable, k dataplane.SetHashKey) (dataplane.SetHashEntry, bool) {
		for _, h := range st.Hash {
			if h.Key == k {
				return h, true
			}
		}
		return dataplane.SetHashEntry{}, false
	}
	meta0 := func(st dataplane.SetTable) uint64 {
		h, _ := find(st, dataplane.SetHashKey{Plen: dataplane.SetMetaPlen})
		return h.Expires
	}
	const ip1 = 0x0a000001

	t.Run("dxr", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("ip", 1, 0, false)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 1 || out[0].Kind != dataplane.SetKindDXR || !out[0].Dst1 || out[0].Nomatch {
			t.Fatalf("got %+v, %v", out, err)
		}
	})
	t.Run("ip,port", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("ipp", 2, 1, false)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("got %+v, %v", out, err)
		}
		st := out[0]
		if st.Kind != dataplane.SetKindAddr|dataplane.SetKindPort || st.Dst1 || !st.Dst2 || st.MaxPlen != 32 {
			t.Errorf("lookup %+v", st)
		}
		if h, ok := find(st, dataplane.SetHashKey{Lo: ip1, Port: 53, Proto: 17, Plen: 32}); !ok || h.Answer != dataplane.SetMember || h.Expires != 0 {
			t.Errorf("10.0.0.1,udp:53: %+v %v", h, ok)
		}
		if _, ok := find(st, dataplane.SetHashKey{Lo: ip1 + 1, Port: 8 << 8, Proto: 1, Plen: 32}); !ok {
			t.Errorf("10.0.0.2,icmp:echo-request missing: %+v", st.Hash)
		}
		if m := meta0(st); m != 1<<32 {
			t.Errorf("meta word 0 = %#x, want bit 32", m)
		}
	})
	t.Run("fewer directions", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("ipp", 1, 1, false)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 0 {
			t.Fatalf("got %+v, %v: a set of 2 dimensions tested with 1 direction never matches", out, err)
		}
	})
	t.Run("net,port timeouts", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("np", 2, 1, true)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("got %+v, %v", out, err)
		}
		st := out[0]
		if !st.Nomatch || !st.ReturnNomatch {
			t.Errorf("nomatch flags %+v", st)
		}
		h, ok := find(st, dataplane.SetHashKey{Lo: 0x0a000000, Port: 80, Proto: 6, Plen: 30})
		want := clk.mono + uint64(10*time.Second)
		if !ok || h.Answer != dataplane.SetNomatch || h.Expires < want-uint64(time.Second) || h.Expires > want+uint64(time.Second) {
			t.Errorf("/30 nomatch: %+v %v, want expiry about %d", h, ok, want)
		}
		if h, ok := find(st, dataplane.SetHashKey{Lo: 0x0a000000, Port: 80, Proto: 6, Plen: 24}); !ok || h.Expires != 0 {
			t.Errorf("/24 (timeout 0): %+v %v", h, ok)
		}
		if m := meta0(st); m != 1<<24|1<<30 {
			t.Errorf("meta word 0 = %#x, want bits 24 and 30", m)
		}
	})
	t.Run("net,iface", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("ni", 2, 3, false)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("got %+v, %v", out, err)
		}
		st := out[0]
		if _, ok := find(st, dataplane.SetHashKey{Lo: 0x0a000000, Ifindex: 7, Plen: 24}); !ok {
			t.Errorf("10.0.0.0/24,in0 missing")
		}
		// Blockers: /24 has two entries (in0, eth+): aux 0; /16 out0 has
		// one: aux 8; physdev entries are left out.
		if h, ok := find(st, dataplane.SetHashKey{Lo: 0x0a000000, Plen: 24}); !ok || h.Aux != 0 || h.Answer != 0 {
			t.Errorf("blocker of /24: %+v %v", h, ok)
		}
		if h, ok := find(st, dataplane.SetHashKey{Lo: 0x0a010000, Plen: 16}); !ok || h.Aux != 8 {
			t.Errorf("blocker of 10.1/16: %+v %v", h, ok)
		}
		for _, h := range st.Hash {
			if h.Key.Lo == 0x0a020000 && h.Key.Plen == 16 {
				t.Errorf("physdev entry in the table: %+v", h)
			}
		}
	})
	t.Run("bitmap:port", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("bp", 2, 0, false)}, get, ifaces, clk, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("got %+v, %v", out, err)
		}
		st := out[0]
		if st.Kind != dataplane.SetKindTCPUDP || st.MaxPlen != 0 || meta0(st) != 1 || st.Capacity != 100+dataplane.SetMetaWords {
			t.Errorf("lookup %+v", st)
		}
		if _, ok := find(st, dataplane.SetHashKey{Port: 7}); !ok {
			t.Errorf("port 7 missing: %+v", st.Hash)
		}
	})
	t.Run("list:set", func(t *testing.T) {
		out, err := buildSetTables([]compiler.SetCond{cond("ip", 1, 1, false), cond("ls", 2, 1, false)}, get, ifaces, clk, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range out {
			got = append(got, fmt.Sprintf("%d:%s/%s:%d", st.Cond, st.Set, st.Via, st.Kind))
		}
		// ip6 (other family) left out; ip becomes a hash lookup whose
		// entries expire with its list entry.
		want := "0:ip/:0 1:ip/ls:1 1:bp/ls:8 1:ipp/ls:3"
		if strings.Join(got, " ") != want {
			t.Fatalf("lookups %q, want %q", strings.Join(got, " "), want)
		}
		h, ok := find(out[1], dataplane.SetHashKey{Lo: ip1, Plen: 32})
		want20 := clk.mono + uint64(20*time.Second)
		if !ok || h.Expires < want20-uint64(time.Second) || h.Expires > want20+uint64(time.Second) {
			t.Errorf("list member entry %+v %v, want expiry about %d", h, ok, want20)
		}
	})
	t.Run("too many lookups", func(t *testing.T) {
		var conds []compiler.SetCond
		for i := 0; i < 6; i++ {
			conds = append(conds, cond("ls", 2, uint8(i%4), i >= 4))
		}
		_, err := buildSetTables(conds, get, ifaces, clk, nil)
		if err == nil || !strings.Contains(err.Error(), "at most 16") {
			t.Errorf("got %v, want the limit of 16 lookups", err)
		}
	})
}
