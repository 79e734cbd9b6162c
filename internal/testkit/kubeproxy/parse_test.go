package kubeproxy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// small returns 3 services × 3 endpoints (one a NodePort service).
func small(t testing.TB) ([]Service, Options) {
	t.Helper()
	o := DefaultOptions(3, 3)
	o.NodePortEvery = 2
	svcs, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return svcs, o
}

// restoreXFW parses text with xfw's iptables-restore front end (what
// `xfw iptables-restore --test` checks) and compiles it.
func restoreXFW(text string, base *ir.Ruleset, noflush bool) (*ir.Ruleset, error, error) {
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), base, iptables.RestoreOptions{NoFlush: noflush})
	if err != nil {
		return nil, err, nil
	}
	rs.Chains = iptables.OrderedChains(rs)
	_, cerr := compiler.Compile(rs, compiler.Options{})
	return rs, nil, cerr
}

// TestIPTablesParsesInXFW: the full and the partial sync parse in xfw's
// front end and compile, with the NAT targets and with them replaced by
// ACCEPT.
func TestIPTablesParsesInXFW(t *testing.T) {
	svcs, o := small(t)
	for _, tc := range []struct {
		name       string
		opts       IPTablesOptions
		refusedMsg string // a regexp of the refusal; "": compiles
	}{
		{"kube-proxy", IPTablesOptions{Bootstrap: true}, ""},
		{"nat-as-accept", IPTablesOptions{Bootstrap: true, NATAsAccept: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := IPTables(svcs, o.ClusterCIDR, tc.opts)
			rs, perr, cerr := restoreXFW(text, nil, false)
			if perr != nil {
				t.Fatalf("parse: %v\n%s", perr, text)
			}
			checkCompile(t, cerr, tc.refusedMsg)
			old := svcs[1]
			moved := append([]Service(nil), svcs...)
			moved[1] = MoveEndpoint(&old, o.EndpointCIDR.Addr().Next().Next())
			upd := IPTablesUpdate(moved, 1, &old, o.ClusterCIDR, tc.opts)
			after, perr, cerr := restoreXFW(upd, rs, true)
			if perr != nil {
				t.Fatalf("parse update: %v\n%s", perr, upd)
			}
			checkCompile(t, cerr, tc.refusedMsg)
			// The update leaves what a full sync of the new state writes.
			want, perr, _ := restoreXFW(IPTables(moved, o.ClusterCIDR, tc.opts), nil, false)
			if perr != nil {
				t.Fatal(perr)
			}
			if g, w := saveOf(t, after), saveOf(t, want); g != w {
				t.Errorf("after the partial sync:\n%s\nwant (full sync):\n%s", g, w)
			}
		})
	}
}

// checkCompile compares a compile error with the expected refusal.
func checkCompile(t *testing.T, err error, refused string) {
	t.Helper()
	switch {
	case refused == "" && err != nil:
		t.Fatalf("compile: %v", err)
	case refused != "" && (err == nil || !regexp.MustCompile(refused).MatchString(err.Error())):
		t.Fatalf("compile: got %v, want refusal %q", err, refused)
	}
}

// saveOf is the iptables-save text of rs, chains sorted, counters zero.
func saveOf(t *testing.T, rs *ir.Ruleset) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(iptables.SaveAll(rs, "", false), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestIPTablesShape checks the counts of a generated ruleset: per service
// one KUBE-SERVICES jump, one KUBE-SVC chain of 1 + M rules, M KUBE-SEP
// chains of 2 rules, and the statistic probabilities 1/M, 1/(M-1), ….
func TestIPTablesShape(t *testing.T) {
	svcs, o := small(t)
	text := IPTables(svcs, o.ClusterCIDR, IPTablesOptions{})
	for _, tc := range []struct {
		substr string
		want   int
	}{
		{"-A KUBE-SERVICES ", 3 + 1},
		{"-j KUBE-MARK-MASQ", 3 + 9 + 2}, // SVC, SEP, EXT of 2 NodePort services
		{"--probability 0.3333333333", 3},
		{"--probability 0.5000000000", 3},
		{"-j DNAT --to-destination 10.180.0.", 9},
		{"-A KUBE-NODEPORTS ", 2 * 2},
		{"-j MASQUERADE --random-fully", 1},
		{"COMMIT", 2},
	} {
		if got := strings.Count(text, tc.substr); got != tc.want {
			t.Errorf("%q: %d times, want %d\n%s", tc.substr, got, tc.want, text)
		}
	}
}
