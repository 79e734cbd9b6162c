package compiler_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// filter100KDigest is the digest (generationDigest) of filter100K's
// generation as the compiler made it before its terms became lists and
// its single-port sets were shared (e0bde8e, digest 5b0c2ca6…): those
// changes must not change one bit of what the data plane gets. The digest
// changed once since, with the layout's printed form alone (its Regions
// field, empty here: this ruleset has no user chain), and is the same with
// and without the term and port-set changes.
const filter100KDigest = "da8b2e6f9e7dba78846d5ee88979290d00f1853b959a728440755eea7b485861"

// filter100K returns the benchmarks' 100,000 random 5-tuple FORWARD rules
// (BenchmarkCompile100K's, seed 1) and, in INPUT and OUTPUT, 300 rules
// each with subnets, non-contiguous netmasks, port ranges and multiport.
func filter100K() string {
	var sb strings.Builder
	sb.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&sb, "-A FORWARD -s 10.100.%d.%d/32 -d 10.200.%d.%d/32 -p udp -m udp --sport %d --dport %d -j ACCEPT\n",
			rng.Intn(256), 1+rng.Intn(254), rng.Intn(256), 1+rng.Intn(254), 1024+rng.Intn(64512), 1+rng.Intn(65535))
	}
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&sb, "-A INPUT -s 10.1.%d.0/24 -p tcp -m multiport --dports %d,%d -j ACCEPT\n", i%256, 1+i, 2000+i)
		fmt.Fprintf(&sb, "-A OUTPUT -d 10.2.0.0/255.255.0.%d -p tcp --sport %d:%d -j DROP\n", 255-i%8, i, i+100)
	}
	sb.WriteString("COMMIT\n")
	return sb.String()
}

// TestFilter100KGenerationDigest compiles filter100K and compares the
// digest of its generation with filter100KDigest. Skipped with -short
// (seconds).
func TestFilter100KGenerationDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 100K rules take seconds")
	}
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(filter100K()), nil, iptables.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := compiler.Compile(rs, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := generationDigest(g); got != filter100KDigest {
		t.Errorf("digest %s, want %s", got, filter100KDigest)
	}
}
