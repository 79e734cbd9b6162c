package metrics

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// restored returns the ruleset iptables-restore --counters makes of text.
func restored(t *testing.T, fam ir.Family, text string) *ir.Ruleset {
	t.Helper()
	rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{Counters: true})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return rs
}

// render writes snap's metrics.
func render(t *testing.T, snap *snapshot) string {
	t.Helper()
	var b strings.Builder
	if err := writeFamilies(&b, snap.families()); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// counterRuleset has a rule of every kind the drop count looks at: DROP
// and REJECT rules, a DROP policy, a jump (not a drop: the user chain's
// own rules count), user chains out of name order, comments.
const counterRuleset = `*filter
:INPUT DROP [10:1000]
:FORWARD ACCEPT [5:500]
:OUTPUT ACCEPT [0:0]
:zeta - [0:0]
:alpha - [0:0]
[3:300] -A INPUT -p tcp -m comment --comment "ssh \"admin\"" -j ACCEPT
[4:400] -A INPUT -j alpha
[2:200] -A INPUT -p udp -j REJECT --reject-with icmp-port-unreachable
[1:100] -A FORWARD -j DROP
[7:700] -A alpha -s 10.0.0.0/8 -j DROP
[6:600] -A zeta -m comment --comment a -m comment --comment b
COMMIT
`

// TestRulesetFamilies renders the counters of an IPv4 ruleset and an
// empty IPv6 table: rules numbered as iptables -L --line-numbers numbers
// them, chains in its order, drops derived from the verdicts.
func TestRulesetFamilies(t *testing.T) {
	snap := &snapshot{rulesets: []*ir.Ruleset{restored(t, ir.IPv4, counterRuleset), ir.NewRuleset(ir.IPv6)}}
	got := render(t, snap)
	want := `# HELP xfw_rule_packets_total Packets that matched the rule (the pkts column of iptables -L -v -x); rule is its position in the chain, as iptables -L --line-numbers shows it.
# TYPE xfw_rule_packets_total counter
xfw_rule_packets_total{family="ipv4",table="filter",chain="INPUT",rule="1",comment="ssh \"admin\""} 3
xfw_rule_packets_total{family="ipv4",table="filter",chain="INPUT",rule="2",comment=""} 4
xfw_rule_packets_total{family="ipv4",table="filter",chain="INPUT",rule="3",comment=""} 2
xfw_rule_packets_total{family="ipv4",table="filter",chain="FORWARD",rule="1",comment=""} 1
xfw_rule_packets_total{family="ipv4",table="filter",chain="alpha",rule="1",comment=""} 7
xfw_rule_packets_total{family="ipv4",table="filter",chain="zeta",rule="1",comment="a b"} 6
# HELP xfw_rule_bytes_total Bytes of the packets that matched the rule (the bytes column of iptables -L -v -x).
# TYPE xfw_rule_bytes_total counter
xfw_rule_bytes_total{family="ipv4",table="filter",chain="INPUT",rule="1",comment="ssh \"admin\""} 300
xfw_rule_bytes_total{family="ipv4",table="filter",chain="INPUT",rule="2",comment=""} 400
xfw_rule_bytes_total{family="ipv4",table="filter",chain="INPUT",rule="3",comment=""} 200
xfw_rule_bytes_total{family="ipv4",table="filter",chain="FORWARD",rule="1",comment=""} 100
xfw_rule_bytes_total{family="ipv4",table="filter",chain="alpha",rule="1",comment=""} 700
xfw_rule_bytes_total{family="ipv4",table="filter",chain="zeta",rule="1",comment="a b"} 600
# HELP xfw_chain_policy_packets_total Packets the built-in chain's policy decided (they reached the end of the chain).
# TYPE xfw_chain_policy_packets_total counter
xfw_chain_policy_packets_total{family="ipv4",table="filter",chain="INPUT"} 10
xfw_chain_policy_packets_total{family="ipv4",table="filter",chain="FORWARD"} 5
xfw_chain_policy_packets_total{family="ipv4",table="filter",chain="OUTPUT"} 0
xfw_chain_policy_packets_total{family="ipv6",table="filter",chain="INPUT"} 0
xfw_chain_policy_packets_total{family="ipv6",table="filter",chain="FORWARD"} 0
xfw_chain_policy_packets_total{family="ipv6",table="filter",chain="OUTPUT"} 0
# HELP xfw_chain_policy_bytes_total Bytes of the packets the built-in chain's policy decided.
# TYPE xfw_chain_policy_bytes_total counter
xfw_chain_policy_bytes_total{family="ipv4",table="filter",chain="INPUT"} 1000
xfw_chain_policy_bytes_total{family="ipv4",table="filter",chain="FORWARD"} 500
xfw_chain_policy_bytes_total{family="ipv4",table="filter",chain="OUTPUT"} 0
xfw_chain_policy_bytes_total{family="ipv6",table="filter",chain="INPUT"} 0
xfw_chain_policy_bytes_total{family="ipv6",table="filter",chain="FORWARD"} 0
xfw_chain_policy_bytes_total{family="ipv6",table="filter",chain="OUTPUT"} 0
# HELP xfw_chain_drops_packets_total Packets the chain dropped: its rules' DROP and REJECT verdicts, and its policy when it is DROP.
# TYPE xfw_chain_drops_packets_total counter
xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="INPUT"} 12
xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="FORWARD"} 1
xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="OUTPUT"} 0
xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="alpha"} 7
xfw_chain_drops_packets_total{family="ipv4",table="filter",chain="zeta"} 0
xfw_chain_drops_packets_total{family="ipv6",table="filter",chain="INPUT"} 0
xfw_chain_drops_packets_total{family="ipv6",table="filter",chain="FORWARD"} 0
xfw_chain_drops_packets_total{family="ipv6",table="filter",chain="OUTPUT"} 0
# HELP xfw_chain_drops_bytes_total Bytes of the packets the chain dropped.
# TYPE xfw_chain_drops_bytes_total counter
xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="INPUT"} 1200
xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="FORWARD"} 100
xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="OUTPUT"} 0
xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="alpha"} 700
xfw_chain_drops_bytes_total{family="ipv4",table="filter",chain="zeta"} 0
xfw_chain_drops_bytes_total{family="ipv6",table="filter",chain="INPUT"} 0
xfw_chain_drops_bytes_total{family="ipv6",table="filter",chain="FORWARD"} 0
xfw_chain_drops_bytes_total{family="ipv6",table="filter",chain="OUTPUT"} 0
# HELP xfw_loaded 1 when a ruleset of the family is loaded in the network namespace, else 0.
# TYPE xfw_loaded gauge
xfw_loaded{family="ipv4"} 0
xfw_loaded{family="ipv6"} 0
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestStateFamilies renders the families besides the ruleset counters,
// each alone in its snapshot (the others empty).
func TestStateFamilies(t *testing.T) {
	loadedOnly := "# HELP xfw_loaded 1 when a ruleset of the family is loaded in the network namespace, else 0.\n# TYPE xfw_loaded gauge\n"
	tests := []struct {
		name string
		snap *snapshot
		want string
	}{
		{
			name: "connection tables absent: no conntrack metric",
			snap: &snapshot{},
			want: loadedOnly + "xfw_loaded{family=\"ipv4\"} 0\nxfw_loaded{family=\"ipv6\"} 0\n",
		},
		{
			name: "connections by family, a family without any at 0",
			snap: &snapshot{conntrack: map[ir.Family]int{ir.IPv6: 2}},
			want: "# HELP xfw_conntrack_entries Connections in the data plane's connection tables (both: assured and not yet assured), as xfw conntrack -C counts them.\n" +
				"# TYPE xfw_conntrack_entries gauge\nxfw_conntrack_entries{family=\"ipv4\"} 0\nxfw_conntrack_entries{family=\"ipv6\"} 2\n" +
				loadedOnly + "xfw_loaded{family=\"ipv4\"} 0\nxfw_loaded{family=\"ipv6\"} 0\n",
		},
		{
			name: "sets",
			snap: &snapshot{sets: []setInfo{{name: "bl", typ: "hash:net", entries: 3, references: 2}, {name: "ports", typ: "bitmap:port", entries: 0, references: 0}}},
			want: "# HELP xfw_set_entries Members of the set (ipset list's Number of entries).\n# TYPE xfw_set_entries gauge\n" +
				"xfw_set_entries{set=\"bl\",type=\"hash:net\"} 3\nxfw_set_entries{set=\"ports\",type=\"bitmap:port\"} 0\n" +
				"# HELP xfw_set_references Rules of the running rulesets and list:set sets that use the set (ipset list's References).\n# TYPE xfw_set_references gauge\n" +
				"xfw_set_references{set=\"bl\"} 2\nxfw_set_references{set=\"ports\"} 0\n" +
				loadedOnly + "xfw_loaded{family=\"ipv4\"} 0\nxfw_loaded{family=\"ipv6\"} 0\n",
		},
		{
			name: "interfaces and families loaded",
			snap: &snapshot{status: &dataplane.NamespaceStatus{Loaded: true, IPv4: true, Interfaces: []dataplane.InterfaceStatus{
				{Name: "lo", XDPMode: "generic", TCX: true, TCXIngress: true}, {Name: "eth0", XDPMode: "-", TCX: false}}}},
			want: "# HELP xfw_interfaces_attached 1 when xfw's program is attached to the interface at the hook (xdp: ingress, tcx_egress: egress, tcx_ingress: REJECT replies' way out), else 0.\n# TYPE xfw_interfaces_attached gauge\n" +
				"xfw_interfaces_attached{interface=\"lo\",hook=\"xdp\"} 1\nxfw_interfaces_attached{interface=\"lo\",hook=\"tcx_egress\"} 1\nxfw_interfaces_attached{interface=\"lo\",hook=\"tcx_ingress\"} 1\n" +
				"xfw_interfaces_attached{interface=\"eth0\",hook=\"xdp\"} 0\nxfw_interfaces_attached{interface=\"eth0\",hook=\"tcx_egress\"} 0\nxfw_interfaces_attached{interface=\"eth0\",hook=\"tcx_ingress\"} 0\n" +
				loadedOnly + "xfw_loaded{family=\"ipv4\"} 1\nxfw_loaded{family=\"ipv6\"} 0\n",
		},
		{
			name: "attach events",
			snap: &snapshot{events: []eventCount{{eventKey{"eth0", Attach}, 1}, {eventKey{"eth0", Reattach}, 4}}},
			want: loadedOnly + "xfw_loaded{family=\"ipv4\"} 0\nxfw_loaded{family=\"ipv6\"} 0\n" +
				"# HELP xfw_attach_events_total Attachments of xfw's programs to the interface by the agent: first ones (attach) and repairs (reattach).\n# TYPE xfw_attach_events_total counter\n" +
				"xfw_attach_events_total{interface=\"eth0\",kind=\"attach\"} 1\nxfw_attach_events_total{interface=\"eth0\",kind=\"reattach\"} 4\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, tt.snap); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
