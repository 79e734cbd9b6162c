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

// TestSetMatchSupport checks which sets rules may use: every type `xfw
// ipset` creates, with or without timeouts; a missing set is refused
// before the data plane, naming the rule and the match, with iptables'
// parameter-problem status; rulesets without set matches pass.
func TestSetMatchSupport(t *testing.T) {
	store := ipset.NewMemStore()
	for _, line := range []string{
		"create ip hash:ip", "create net hash:net", "create ipport hash:ip,port",
		"create tmo hash:ip timeout 60", "create list list:set",
	} {
		if st := ipset.Run(strings.Fields(line), nil, io.Discard, io.Discard, store); st != 0 {
			t.Fatalf("ipset %s: status %d", line, st)
		}
	}
	withIpsetStore(t, store, nil)
	rs := ir.NewRuleset(ir.IPv4)
	in := rs.Chain("INPUT")
	in.Rules = []*ir.Rule{{Proto: ir.ProtoMatch{Set: true, Num: 6}, Target: ir.Target{Kind: ir.TargetAccept}}}
	if err := checkDataPlaneSupport(rs, &ipsetLookup{}); err != nil {
		t.Errorf("ruleset without set match refused: %v", err)
	}
	tests := []struct {
		set  string
		want string // "" when accepted
	}{
		{"ip", ""},
		{"net", ""},
		{"ipport", ""},
		{"tmo", ""},
		{"list", ""},
		{"gone", "xfw: chain unused rule 1: --match-set gone src,dst: set gone does not exist"},
	}
	for _, tt := range tests {
		rs := ir.NewRuleset(ir.IPv4)
		// In a chain no base chain reaches: still checked.
		unused := &ir.Chain{Name: "unused"}
		rs.Chains = append(rs.Chains, unused)
		unused.Rules = []*ir.Rule{{
			Matches: []ir.Match{&ir.SetMatch{Invert: true, Name: tt.set, Dirs: ir.SetDirs{Dim: 2, Src: 1}}},
			Target:  ir.Target{Kind: ir.TargetDrop},
		}}
		err := checkDataPlaneSupport(rs, &ipsetLookup{})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tt.set, err)
			}
			continue
		}
		var ie *iptables.Error
		if !errors.As(err, &ie) || ie.Msg != tt.want || ie.Status != iptables.StatusParameter {
			t.Errorf("%s: got %#v, want %q with status %d", tt.set, err, tt.want, iptables.StatusParameter)
		}
	}
}
