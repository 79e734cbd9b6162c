package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// withIpsetStore makes newIpsetStore return store for the test.
func withIpsetStore(t *testing.T, store ipset.Store, err error) {
	t.Helper()
	saved := newIpsetStore
	newIpsetStore = func() (ipset.Store, error) { return store, err }
	t.Cleanup(func() { newIpsetStore = saved })
}

// TestIpsetLookup checks the set match's view of xfw ipset's sets: family,
// dimensions and type, missing sets, and a store that cannot be loaded.
func TestIpsetLookup(t *testing.T) {
	store := ipset.NewMemStore()
	for _, line := range []string{
		"create v4 hash:ip", "create v6 hash:net family inet6", "create ipport hash:ip,port",
		"create list list:set", "create ports bitmap:port range 1-100",
	} {
		if st := ipset.Run(strings.Fields(line), nil, io.Discard, io.Discard, store); st != 0 {
			t.Fatalf("ipset %s: status %d", line, st)
		}
	}
	withIpsetStore(t, store, nil)
	tests := []struct {
		name string
		want iptables.SetInfo
		ok   bool
	}{
		{"v4", iptables.SetInfo{Family: ir.IPv4, Dims: 1, Type: "hash:ip"}, true},
		{"v6", iptables.SetInfo{Family: ir.IPv6, Dims: 1, Type: "hash:net"}, true},
		{"ipport", iptables.SetInfo{Family: ir.IPv4, Dims: 2, Type: "hash:ip,port"}, true},
		{"list", iptables.SetInfo{Dims: 0, Type: "list:set"}, true},
		{"ports", iptables.SetInfo{Dims: 1, Type: "bitmap:port"}, true},
		{"missing", iptables.SetInfo{}, false},
	}
	l := &ipsetLookup{}
	for _, tt := range tests {
		got, ok := l.lookup(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %+v %v, want %+v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}

	// Through the parser: family checks and messages are iptables'.
	_, err := iptables.ParseCommandWith(ir.IPv4, strings.Fields("-A INPUT -m set --match-set v6 src"), iptables.ParseOptions{Sets: l.lookup})
	if err == nil || !strings.Contains(err.Error(), "The protocol family of set v6 is IPv6, which is not applicable.") {
		t.Errorf("v6 set in iptables: got %v", err)
	}

	// A store that cannot be loaded: its error, not "Set … doesn't exist.".
	withIpsetStore(t, nil, errors.New("no store here"))
	bad := &ipsetLookup{}
	_, err = iptables.ParseCommandWith(ir.IPv4, strings.Fields("-A INPUT -m set --match-set v4 src"), iptables.ParseOptions{Sets: bad.lookup})
	if err = bad.setsErr(err); err == nil || err.Error() != "load ipsets: no store here" {
		t.Errorf("unloadable store: got %v", err)
	}
}

// TestSetMatchGate checks that rulesets with set matches are refused before
// the data plane (in any chain, reachable or not), with the message naming the match and
// iptables' parameter-problem status, while others pass.
func TestSetMatchGate(t *testing.T) {
	if setMatchInDataPlane {
		t.Skip("the data plane computes the set match")
	}
	rs := ir.NewRuleset(ir.IPv4)
	in := rs.Chain("INPUT")
	in.Rules = []*ir.Rule{{Proto: ir.ProtoMatch{Set: true, Num: 6}, Target: ir.Target{Kind: ir.TargetAccept}}}
	if err := checkDataPlaneSupport(rs); err != nil {
		t.Errorf("ruleset without set match refused: %v", err)
	}
	unused := &ir.Chain{Name: "unused"}
	rs.Chains = append(rs.Chains, unused)
	unused.Rules = append(unused.Rules, &ir.Rule{
		Matches: []ir.Match{&ir.SetMatch{Invert: true, Name: "bl", Dirs: ir.SetDirs{Dim: 2, Src: 1}}},
		Target:  ir.Target{Kind: ir.TargetDrop},
	})
	err := checkDataPlaneSupport(rs)
	var ie *iptables.Error
	want := "xfw: the set match is not supported by the data plane yet (chain unused rule 1: --match-set bl src,dst)"
	if !errors.As(err, &ie) || ie.Msg != want || ie.Status != iptables.StatusParameter {
		t.Errorf("got %#v, want %q with status %d", err, want, iptables.StatusParameter)
	}
}
