package main

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// cbSample is a filter set in ClassBench's format, one rule of each kind.
const cbSample = `@176.19.181.33/32	90.145.23.162/32	0 : 65535	1550 : 1550	0x06/0xFF	0x0000/0x0200	
@37.184.89.219/29	37.184.85.16/29	7648 : 7648	1024 : 65535	0x11/0xFF	0x0000/0x0000	
@0.0.0.0/0	12.0.0.0/8	0 : 65535	0 : 65535	0x00/0x00	0x0000/0x0000	
@43.37.160.35/32	28.12.209.46/32	119 : 119	0 : 65535	0x01/0xFF	0x0000/0x0000	
@50.0.0.0/8	0.0.0.0/0	0 : 65535	0 : 65535	0x2f/0xFF	0x0000/0x0000	
@60.0.0.0/8	0.0.0.0/0	53 : 53	0 : 1023	0x00/0x00	0x0000/0x0000	
`

// TestParseClassBench checks the fields of each kind of rule and the
// iptables and nftables rules they become.
func TestParseClassBench(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(cbSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		iptables []string
		nft      []string
	}{
		{[]string{"-s 176.19.181.33/32 -d 90.145.23.162/32 -p tcp -m tcp --dport 1550 -j ACCEPT"},
			[]string{"ip saddr 176.19.181.33 ip daddr 90.145.23.162 tcp dport 1550 accept"}},
		// The source's host bits are cleared, as iptables does.
		{[]string{"-s 37.184.89.216/29 -d 37.184.85.16/29 -p udp -m udp --sport 7648 --dport 1024:65535 -j ACCEPT"},
			[]string{"ip saddr 37.184.89.216/29 ip daddr 37.184.85.16/29 udp sport 7648 udp dport 1024-65535 accept"}},
		{[]string{"-d 12.0.0.0/8 -j ACCEPT"}, []string{"ip daddr 12.0.0.0/8 accept"}},
		// ICMP with a "source port": matches nothing, left out.
		{nil, nil},
		{[]string{"-s 50.0.0.0/8 -p 47 -j ACCEPT"}, []string{"ip saddr 50.0.0.0/8 ip protocol 47 accept"}},
		// Any protocol with ports: tcp and udp.
		{[]string{"-s 60.0.0.0/8 -p tcp -m tcp --sport 53 --dport 0:1023 -j ACCEPT", "-s 60.0.0.0/8 -p udp -m udp --sport 53 --dport 0:1023 -j ACCEPT"},
			[]string{"ip saddr 60.0.0.0/8 tcp sport 53 tcp dport 0-1023 accept", "ip saddr 60.0.0.0/8 udp sport 53 udp dport 0-1023 accept"}},
	}
	if len(rules) != len(want) {
		t.Fatalf("%d rules, want %d", len(rules), len(want))
	}
	for i, w := range want {
		var ipt, nft []string
		for _, p := range rules[i].protocols() {
			ipt = append(ipt, rules[i].iptablesArgs(p))
			nft = append(nft, rules[i].nftExpr(p))
		}
		if strings.Join(ipt, "\n") != strings.Join(w.iptables, "\n") {
			t.Errorf("rule %d: iptables %q, want %q", i+1, ipt, w.iptables)
		}
		if strings.Join(nft, "\n") != strings.Join(w.nft, "\n") {
			t.Errorf("rule %d: nft %q, want %q", i+1, nft, w.nft)
		}
		if rules[i].Line != i+1 {
			t.Errorf("rule %d: line %d", i+1, rules[i].Line)
		}
	}
	r := renderIptables(rules)
	if r.Omitted != 1 || len(r.RuleOf) != 6 || r.RuleOf[5] != 5 || r.RuleOf[4] != 5 || r.RuleOf[3] != 4 {
		t.Errorf("rendered: omitted %d, rule of %v", r.Omitted, r.RuleOf)
	}
	if !strings.Contains(r.Restore, ":FORWARD DROP [0:0]\n") || !strings.HasSuffix(r.Restore, "COMMIT\n") {
		t.Errorf("restore text:\n%s", r.Restore)
	}
}

// TestParseClassBenchErrors checks that malformed lines are refused with
// their line number.
func TestParseClassBenchErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0xFF 0x0000/0x0000", "does not start with @"},
		{"@1.2.3.4/33 1.2.3.4/32 0 : 1 0 : 1 0x06/0xFF 0x0000/0x0000", "source"},
		{"@1.2.3.4/32 ::1/128 0 : 1 0 : 1 0x06/0xFF 0x0000/0x0000", "destination"},
		{"@1.2.3.4/32 1.2.3.4/32 5 : 1 0 : 1 0x06/0xFF 0x0000/0x0000", "source ports"},
		{"@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 70000 0x06/0xFF 0x0000/0x0000", "destination ports"},
		{"@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0x0F 0x0000/0x0000", "mask"},
		{"@1.2.3.4/32 1.2.3.4/32 0 - 1 0 : 1 0x06/0xFF 0x0000/0x0000", "want SRC DST"},
	} {
		_, err := parseClassBench(strings.NewReader("\n" + tc.in + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "line 2:") {
			t.Errorf("%q: error %v, want line 2 and %q", tc.in, err, tc.want)
		}
	}
}

// TestCBClassify checks first-match classification, ports only for TCP
// and UDP.
func TestCBClassify(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(cbSample))
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		p    cbPacket
		want int
	}{
		{"exact tcp", cbPacket{a("176.19.181.33"), a("90.145.23.162"), protoTCP, 9, 1550}, 0},
		{"wrong port", cbPacket{a("176.19.181.33"), a("90.145.23.162"), protoTCP, 9, 1551}, -1},
		{"wrong protocol", cbPacket{a("176.19.181.33"), a("90.145.23.162"), protoUDP, 9, 1550}, -1},
		{"udp range", cbPacket{a("37.184.89.223"), a("37.184.85.17"), protoUDP, 7648, 65535}, 1},
		{"below range", cbPacket{a("37.184.89.223"), a("37.184.85.17"), protoUDP, 7648, 1023}, -1},
		{"any protocol", cbPacket{a("1.2.3.4"), a("12.9.9.9"), 47, 0, 0}, 2},
		{"icmp with ports never", cbPacket{a("43.37.160.35"), a("28.12.209.46"), protoICMP, 119, 0}, -1},
		{"gre", cbPacket{a("50.1.1.1"), a("99.1.1.1"), 47, 0, 0}, 4},
		{"any with ports: udp", cbPacket{a("60.1.1.1"), a("99.1.1.1"), protoUDP, 53, 80}, 5},
		{"any with ports: gre", cbPacket{a("60.1.1.1"), a("99.1.1.1"), 47, 53, 80}, -1},
		{"first wins", cbPacket{a("60.1.1.1"), a("12.1.1.1"), protoUDP, 53, 80}, 2},
	} {
		if got := cbClassify(rules, tc.p); got != tc.want {
			t.Errorf("%s: rule %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCBTrace checks that a trace is deterministic, distinct, forwardable,
// and that each packet matches the rule it was drawn in, at or after its
// first match.
func TestCBTrace(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(cbSample))
	if err != nil {
		t.Fatal(err)
	}
	tr, skipped := cbTrace(rules, 500, 7)
	again, _ := cbTrace(rules, 500, 7)
	if len(tr) != 500 || skipped != 0 {
		t.Fatalf("%d packets, %d rules skipped", len(tr), skipped)
	}
	seen := map[cbPacket]bool{}
	drawn := map[int]bool{}
	for i, p := range tr {
		if again[i] != p {
			t.Fatalf("packet %d differs between two draws with one seed", i)
		}
		if seen[p.Pkt] {
			t.Errorf("packet %d repeated: %+v", i, p.Pkt)
		}
		seen[p.Pkt] = true
		drawn[p.Drawn] = true
		if !rules[p.Drawn].matches(p.Pkt) || p.Rule < 0 || p.Rule > p.Drawn {
			t.Errorf("packet %+v drawn in rule %d, first match %d", p.Pkt, p.Drawn, p.Rule)
		}
		if !forwardable(p.Pkt.Src) || !forwardable(p.Pkt.Dst) {
			t.Errorf("packet %+v not forwardable", p.Pkt)
		}
	}
	if drawn[3] || len(drawn) != 5 {
		t.Errorf("rules drawn in: %v (want every rule but the one matching nothing)", drawn)
	}
	// A rule only inside addresses the path does not forward is given up.
	only, err := parseClassBench(strings.NewReader("@127.0.0.1/32 1.1.1.1/32 0 : 65535 0 : 65535 0x11/0xFF 0x0000/0x0000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr, skipped := cbTrace(only, 10, 1); len(tr) != 0 || skipped != 1 {
		t.Errorf("loopback rule: %d packets, %d skipped", len(tr), skipped)
	}
}

// TestCBSetBoxes checks that the nftables set keeps one of equal rules and
// leaves out rules inside another, keeping partial overlaps.
func TestCBSetBoxes(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(`@1.0.0.0/8 2.0.0.0/8 0 : 65535 80 : 80 0x06/0xFF 0x0000/0x0000
@1.2.0.0/16 2.0.0.0/8 0 : 65535 80 : 80 0x06/0xFF 0x0000/0x0000
@1.0.0.0/8 2.0.0.0/8 0 : 65535 80 : 80 0x06/0xFF 0x0000/0x0000
@1.0.0.0/8 2.0.0.0/8 0 : 65535 70 : 90 0x11/0xFF 0x0000/0x0000
@1.0.0.0/8 2.0.0.0/8 0 : 65535 85 : 95 0x11/0xFF 0x0000/0x0000
@1.2.3.4/32 2.3.4.5/32 0 : 65535 0 : 65535 0x00/0x00 0x0000/0x0000
@1.2.3.4/32 2.3.4.5/32 0 : 65535 81 : 81 0x11/0xFF 0x0000/0x0000
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range cbSetBoxes(rules) {
		got = append(got, cbBoxString(b))
	}
	want := []string{
		"1.0.0.0/8 2.0.0.0/8 6-6 0-65535 80",
		"1.0.0.0/8 2.0.0.0/8 17-17 0-65535 70-90",
		"1.0.0.0/8 2.0.0.0/8 17-17 0-65535 85-95",
		"1.2.3.4/32 2.3.4.5/32 0-255 0-65535 0-65535",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("boxes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCBExpectedCounts checks that a trace packet is counted by its first
// matching rule's chain rule of its protocol, and no-match by none.
func TestCBExpectedCounts(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(cbSample))
	if err != nil {
		t.Fatal(err)
	}
	r := renderIptables(rules)
	a := netip.MustParseAddr
	trace := []cbTraced{
		{Pkt: cbPacket{a("176.19.181.33"), a("90.145.23.162"), protoTCP, 9, 1550}},
		{Pkt: cbPacket{a("60.1.1.1"), a("99.1.1.1"), protoUDP, 53, 80}},
		{Pkt: cbPacket{a("60.1.1.1"), a("99.1.1.1"), protoUDP, 53, 81}},
		{Pkt: cbPacket{a("60.1.1.1"), a("99.1.1.1"), protoTCP, 53, 80}},
		{Pkt: cbPacket{a("9.9.9.9"), a("9.9.9.9"), protoTCP, 53, 80}},
	}
	for i := range trace {
		trace[i].Rule = cbClassify(rules, trace[i].Pkt)
	}
	got := fmt.Sprint(cbExpectedCounts(r, trace))
	// Chain: rule 1, rule 2, rule 3, rule 5, rule 6 tcp, rule 6 udp.
	if want := "[1 0 0 0 1 2]"; got != want {
		t.Errorf("counts %s, want %s", got, want)
	}
}

// TestCBWithoutDefault checks that only a trailing rule matching every
// packet is dropped.
func TestCBWithoutDefault(t *testing.T) {
	const def = "@0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00 0x0000/0x0000\n"
	const tcpAll = "@0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x06/0xFF 0x0000/0x0000\n"
	for _, tc := range []struct {
		in      string
		n       int
		dropped bool
	}{
		{cbSample + def, 6, true},
		{def + cbSample, 7, false},
		{cbSample + tcpAll, 7, false},
		{"", 0, false},
	} {
		rules, err := parseClassBench(strings.NewReader(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		got, dropped := cbWithoutDefault(rules)
		if len(got) != tc.n || dropped != tc.dropped {
			t.Errorf("%d rules in: %d left, dropped %v; want %d, %v", len(rules), len(got), dropped, tc.n, tc.dropped)
		}
	}
}

// TestCBSetGroups checks that boxes go to one set until a box's lowest or
// highest corner lies inside an earlier box of it (the kernel refuses such
// an element), and that a box holding an earlier one stays in its set.
func TestCBSetGroups(t *testing.T) {
	rules, err := parseClassBench(strings.NewReader(`@10.0.0.0/8 2.0.0.0/8 0 : 65535 70 : 90 0x11/0xFF 0x0000/0x0000
@10.0.0.0/8 2.0.0.0/8 0 : 65535 85 : 95 0x11/0xFF 0x0000/0x0000
@10.0.0.0/8 2.0.0.0/8 0 : 65535 60 : 75 0x11/0xFF 0x0000/0x0000
@10.1.0.0/16 2.0.0.0/8 0 : 65535 60 : 95 0x11/0xFF 0x0000/0x0000
@10.0.0.0/8 2.0.0.0/8 0 : 65535 86 : 94 0x06/0xFF 0x0000/0x0000
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for g, boxes := range cbSetGroups(rules) {
		for _, b := range boxes {
			got = append(got, fmt.Sprintf("%d: %s", g, cbBoxString(b)))
		}
	}
	want := []string{
		"0: 10.0.0.0/8 2.0.0.0/8 17-17 0-65535 70-90",
		"0: 10.1.0.0/16 2.0.0.0/8 17-17 0-65535 60-95",
		"0: 10.0.0.0/8 2.0.0.0/8 6-6 0-65535 86-94",
		"1: 10.0.0.0/8 2.0.0.0/8 17-17 0-65535 85-95",
		"1: 10.0.0.0/8 2.0.0.0/8 17-17 0-65535 60-75",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// cbBoxString prints a box as the set tests compare them.
func cbBoxString(b cbBox) string {
	return fmt.Sprintf("%s %s %d-%d %s %s", b.Src, b.Dst, b.ProtoLo, b.ProtoHi, b.Sport.nft(), b.Dport.nft())
}
