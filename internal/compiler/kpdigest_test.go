package compiler_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// kubeProxyDigests are the digests (generationDigest) of kube-proxy's
// rulesets (10 endpoints per service, with DNAT and MASQUERADE or with
// ACCEPT in their place) as the compiler made them before its flattening
// and class sweep were reworked for speed: the rework must not change one
// bit of what the data plane gets. (Updated since: when Layout gained
// RawPre and PrePassive, the same generation, RawPre all zero,
// PrePassive false, printed with the new fields; and when the nat chains
// reached from both nat PREROUTING and nat OUTPUT became one region for
// both views, natViewFree: half the entries, 1,065,466 → 532,967 at 10K,
// the same walks; and when Layout gained PreEnd, the same generation and
// entries, printed with the new field: nat PREROUTING's end in the INPUT
// and FORWARD walks; and when a jump to a chain without rules became a
// counted CONTINUE, emptyJump: filter's KUBE-SERVICES,
// KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL and KUBE-NODEPORTS jumps
// lost their CALL, RETURN and exit entries, 53,717 → 53,701 entries at
// 1K, the same walks; and when a CALL followed by its exit entry got
// Aux CallExitNext, the same entries otherwise; and when nat
// PREROUTING's gate, the walk's first segment, sent a later packet past
// the reroute entries, gatePastReroute; and when filter's regions were
// placed before the other tables', filterRegionsFirst; and when the
// port fields' direct arrays gained the values of headers cut short
// after their ports, ValShort + port: the same entries and classes,
// 65,536 more values of each port field; and when those values were
// left out again for rulesets whose conditions treat them as ValTrunc,
// NoShortPorts, hashed too: kube-proxy has no multiport, and its port
// arrays grown back by 65,536 copies of ValTrunc's class gave the
// previous digests bit for bit; and when Layout gained Regions, the
// regions with slack, which kube-proxy's rulesets, with their nat table,
// do not get: the same generation, printed with the new, empty field.)
var kubeProxyDigests = []struct {
	services    int
	natAsAccept bool
	digest      string
}{
	{1000, false, "3636471f7d08c7b73250c353c4d0bf8dda64075f4a767b75e6d9d358e1420019"},
	{1000, true, "cca616c117b2645662893e615d47b7a302b9857ff4f9b3b37bd775dec1b11959"},
	{10000, false, "2aa6b222e9df5b35d3a1e20c7a83080b9121deb84144a3b1e5986ad48ed14b15"},
}

// TestKubeProxyGenerationDigest compiles kube-proxy's rulesets and compares
// a digest of every map and constant the data plane gets, and of the
// entries' conditions, with the reference (kubeProxyDigests). The 10K
// ruleset (about ten seconds) is skipped with -short.
func TestKubeProxyGenerationDigest(t *testing.T) {
	for _, tc := range kubeProxyDigests {
		t.Run(fmt.Sprintf("%d-accept=%v", tc.services, tc.natAsAccept), func(t *testing.T) {
			if tc.services > 1000 && testing.Short() {
				t.Skip("-short: the 10K ruleset takes seconds")
			}
			o := kubeproxy.DefaultOptions(tc.services, 10)
			svcs, err := kubeproxy.Generate(o)
			if err != nil {
				t.Fatal(err)
			}
			text := kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true, NATAsAccept: tc.natAsAccept})
			rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), nil, iptables.RestoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rs.Chains = iptables.OrderedChains(rs)
			g, err := compiler.Compile(rs, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Layout.Regions) != 0 {
				t.Errorf("%d regions with slack in a ruleset with other tables", len(g.Layout.Regions))
			}
			got := generationDigest(g)
			if os.Getenv("KP_DIGEST_PRINT") != "" {
				t.Logf("digest %s", got)
			}
			if got != tc.digest {
				t.Errorf("generation digest %s, want %s (%s)", got, tc.digest, g)
			}
		})
	}
}

// generationDigest hashes generation g: its entries (their conditions'
// intervals too), and every other field in fmt's %v form (maps print
// in key order; a generation's other fields hold no pointers).
func generationDigest(g *compiler.Generation) string {
	h := sha256.New()
	for i := range g.Entries {
		e := &g.Entries[i]
		writeUints(h, uint64(e.Rule), uint64(e.Action), uint64(e.Flags), uint64(e.Aux), uint64(e.Next), uint64(len(e.Cond)))
		for _, fs := range e.Cond {
			writeUints(h, uint64(fs.Field), uint64(len(fs.Set.Ivs)))
			for _, iv := range fs.Set.Ivs {
				writeUints(h, iv.Lo.Hi, iv.Lo.Lo, iv.Hi.Hi, iv.Hi.Lo)
			}
		}
	}
	for _, c := range g.Chunks {
		writeUints(h, c.Summary)
		writeUints(h, c.Words[:]...)
	}
	for _, b := range g.ClassChunks.Blocks() {
		for _, id := range b {
			writeUints(h, uint64(id))
		}
	}
	for _, v := range g.Small {
		writeUints(h, uint64(v))
	}
	for _, b := range g.Bounds {
		writeUints(h, b.Value.Hi, b.Value.Lo, uint64(b.Class))
	}
	fmt.Fprintf(h, "%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v|%v",
		g.Family, g.Active, g.NumChunks, g.ChainStart, g.ChainEnd, g.PolicyDrop, g.MaxIters,
		g.SmallBase, g.AddrBase, g.AddrCount, g.Hash, g.DefaultClass, g.LogConfigs, g.SetConds,
		g.Rules, g.Layout, g.Limits, g.Probes, g.Recents, g.HashLimits, g.Preds, g.CtExpires, g.SetWrites)
	fmt.Fprintf(h, "|%v|%v|%v", g.Trivial, len(g.Ext6Conds()), g.Hdr4Conds())
	fmt.Fprintf(h, "|%v", g.NoShortPorts)
	return hex.EncodeToString(h.Sum(nil))
}

// writeUints writes vs to h in little-endian order.
func writeUints(h hash.Hash, vs ...uint64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
}
