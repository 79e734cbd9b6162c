package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// target is a NAT entry's address and port.
type target struct {
	addr uint32
	port uint16
}

// natTargets lists the targets of g's entries of action act, in order.
func natTargets(g *Generation, act Action) []target {
	var out []target
	for _, e := range g.Entries {
		if e.Action == act {
			out = append(out, target{e.Next, e.Aux})
		}
	}
	return out
}

// TestDNATEntries checks DNAT's entries: the address and port they carry,
// and the walks' resume positions after nat PREROUTING.
func TestDNATEntries(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-t nat -A PREROUTING -p tcp -d 10.0.0.1 --dport 80 -j DNAT --to-destination 10.9.0.2:8080",
		"-t nat -A PREROUTING -p udp -j DNAT --to-destination 10.9.0.3",
		"-t mangle -A FORWARD -j ACCEPT",
		"-A FORWARD -p tcp --dport 8080 -j ACCEPT")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := natTargets(g, ActDNAT)
	// One pair per walk with a nat PREROUTING segment (INPUT, FORWARD).
	want := target{10<<24 | 9<<16 | 2, 8080}
	want2 := target{10<<24 | 9<<16 | 3, 0}
	if len(got) != 4 || got[0] != want || got[1] != want2 || got[2] != want || got[3] != want2 {
		t.Fatalf("DNAT entries %+v, want %+v and %+v in each of two walks", got, want, want2)
	}
	for _, h := range []int{ChainInput, ChainForward} {
		r := g.Layout.NatResume[h]
		start, end := g.Walk(h)
		if r == 0 || r-1 <= start || r-1 >= end {
			t.Errorf("chain %d: resume %d outside its walk [%d,%d)", h, r, start, end)
			continue
		}
		// Every DNAT entry of the walk lies before the resume position.
		for i := start; i < end; i++ {
			if g.Entries[i].Action == ActDNAT && i >= r-1 {
				t.Errorf("chain %d: DNAT entry %d after the resume position %d", h, i, r-1)
			}
		}
	}
	if g.Layout.NatResume[ChainOutput] == 0 {
		t.Errorf("OUTPUT has no resume position after its nat OUTPUT segment")
	}
}

// TestDNATRefusals checks the DNAT forms and neighbours the data plane
// cannot translate yet.
func TestDNATRefusals(t *testing.T) {
	for _, tc := range []struct {
		fam   ir.Family
		rules []string
	}{
		{ir.IPv4, []string{"-t nat -A PREROUTING -p dccp -j DNAT --to-destination 10.0.0.2"}},
		{ir.IPv4, []string{"-t nat -A PREROUTING -p dccp -j DNAT --to-destination 10.0.0.2:80"}},
		{ir.IPv4, []string{"-t nat -A OUTPUT -p dccp -j DNAT --to-destination 10.0.0.2:80"}},
		{ir.IPv4, []string{"-t nat -A OUTPUT -p dccp -j REDIRECT"}},
		{ir.IPv4, []string{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 0.0.0.0"}},
		{ir.IPv4, []string{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.2:80-90/100"}},
		{ir.IPv4, []string{"-t nat -A POSTROUTING -p tcp -j MASQUERADE --to-ports 80-90/100"}},
		{ir.IPv4, []string{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.2",
			"-A FORWARD -m conntrack --ctstate DNAT --ctexpire 10 -j ACCEPT"}},
		{ir.IPv6, []string{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [::ffff:10.0.0.2]"}},
	} {
		rs := parseRuleset(t, tc.fam, tc.rules...)
		_, err := Compile(rs, Options{})
		if err == nil || !strings.Contains(err.Error(), "not supported by xfw") {
			t.Errorf("%q: got %v, want a refusal", tc.rules, err)
		}
	}
}

// TestDNATAccepted checks forms that compile: a user chain reached from
// PREROUTING, REDIRECT, conntrack options a DNAT does not change.
func TestDNATAccepted(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-t nat -N fwd",
		"-t nat -A fwd -p udp --dport 53 -j DNAT --to-destination 10.0.0.2:5353",
		"-t nat -A PREROUTING -i eth0 -j fwd",
		"-t nat -A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 3128",
		"-t nat -A PREROUTING -p udp --dport 53 -j REDIRECT",
		"-A FORWARD -m conntrack --ctorigdst 10.0.0.1 --ctorigdstport 53 -j ACCEPT")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var redirects []uint16
	for _, tg := range natTargets(g, ActDNAT) {
		if tg.addr == RedirectAddr {
			redirects = append(redirects, tg.port)
		}
	}
	// REDIRECT --to-ports 3128 and a REDIRECT keeping the port, in the
	// INPUT and FORWARD walks.
	if len(redirects) != 4 || redirects[0] != 3128 || redirects[1] != 0 {
		t.Errorf("REDIRECT entries' ports %v, want [3128 0 3128 0]", redirects)
	}
}

// TestSNATEntries checks SNAT's and MASQUERADE's entries and refusals.
func TestSNATEntries(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-t nat -A POSTROUTING -p tcp -j MASQUERADE",
		"-t nat -A POSTROUTING -p udp -j SNAT --to-source 192.0.2.1:5000",
		"-t nat -A POSTROUTING -p udp -j MASQUERADE --to-ports 6000")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := natTargets(g, ActSNAT)
	// POSTROUTING is in the FORWARD and OUTPUT walks.
	want := []target{{MasqueradeAddr, 0}, {192<<24 | 2<<8 | 1, 5000}, {MasqueradeAddr, 6000}}
	if len(got) != 2*len(want) {
		t.Fatalf("SNAT entries %+v, want %+v in each of two walks", got, want)
	}
	for i, w := range want {
		if got[i] != w || got[len(want)+i] != w {
			t.Errorf("SNAT entry %d: %+v and %+v, want %+v", i, got[i], got[len(want)+i], w)
		}
	}
}

// TestSNATInputEntries checks SNAT in nat INPUT (the kernel's LOCAL_IN):
// ActSNAT entries of the INPUT walk alone, both families (an IPv6
// address ranged, as in POSTROUTING).
func TestSNATInputEntries(t *testing.T) {
	for _, tc := range []struct {
		fam   ir.Family
		rules []string
	}{
		{ir.IPv4, []string{"-t nat -A INPUT -p tcp -j SNAT --to-source 192.0.2.1:5000", "-t nat -A INPUT -j SNAT --to-source 192.0.2.2"}},
		{ir.IPv6, []string{"-t nat -A INPUT -p udp -j SNAT --to-source [fd00::1]:5000", "-t nat -A INPUT -j SNAT --to-source fd00::2"}},
	} {
		g, err := Compile(parseRuleset(t, tc.fam, tc.rules...), Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		start, end := g.Walk(ChainInput)
		n := 0
		for i, e := range g.Entries {
			if e.Action != ActSNAT {
				continue
			}
			n++
			if uint32(i) < start || uint32(i) >= end {
				t.Errorf("%q: SNAT entry %d outside the INPUT walk [%d,%d)", tc.rules, i, start, end)
			}
		}
		if n != len(tc.rules) {
			t.Errorf("%q: %d SNAT entries, want %d", tc.rules, n, len(tc.rules))
		}
		if tc.fam == ir.IPv4 {
			if got := natTargets(g, ActSNAT); got[0] != (target{192<<24 | 2<<8 | 1, 5000}) || got[1] != (target{192<<24 | 2<<8 | 2, 0}) {
				t.Errorf("%q: SNAT entries %+v", tc.rules, got)
			}
		}
	}
}

// TestDNATAddressOnlyAccepted checks that DNAT and REDIRECT in nat
// PREROUTING without ports compile for any protocol (the data plane
// translates ICMP echo, SCTP and protocols without ports by the address:
// bpf/nat_query.h), both families, with the entry's address as for TCP.
func TestDNATAddressOnlyAccepted(t *testing.T) {
	for _, tc := range []struct {
		fam  ir.Family
		rule string
	}{
		{ir.IPv4, "-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.2"},
		{ir.IPv4, "-t nat -A PREROUTING -p icmp -j DNAT --to-destination 10.0.0.2-10.0.0.4"},
		{ir.IPv4, "-t nat -A PREROUTING ! -p tcp -j DNAT --to-destination 10.0.0.2"},
		{ir.IPv4, "-t nat -A PREROUTING -p sctp --dport 80 -j DNAT --to-destination 10.0.0.2"},
		{ir.IPv4, "-t nat -A PREROUTING -p 47 -j DNAT --to-destination 10.0.0.2 --random"},
		{ir.IPv4, "-t nat -A PREROUTING -p icmp -j REDIRECT"},
		{ir.IPv4, "-t nat -A PREROUTING -p udplite -j DNAT --to-destination 10.0.0.2"},
		{ir.IPv6, "-t nat -A PREROUTING -p icmpv6 -j DNAT --to-destination fd00::2"},
		{ir.IPv6, "-t nat -A PREROUTING -j REDIRECT"},
		{ir.IPv6, "-t nat -A PREROUTING -p 255 -j DNAT --to-destination fd00::2-fd00::4"},
	} {
		g, err := Compile(parseRuleset(t, tc.fam, tc.rule), Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.rule, err)
			continue
		}
		if len(natTargets(g, ActDNAT)) == 0 {
			t.Errorf("%q: no DNAT entry", tc.rule)
		}
	}
}

// TestSCTPPortNatAccepted checks that NAT with SCTP ports compiles in the
// nat chains where TCP's and UDP's does (the data plane tracks SCTP by its
// ports and updates its CRC32c: bpf/ct_sctp.h, bpf/sctp_nat.h), both
// families, to an entry of the target's action.
func TestSCTPPortNatAccepted(t *testing.T) {
	for _, tc := range []struct {
		fam  ir.Family
		rule string
		act  Action
	}{
		{ir.IPv4, "-t nat -A PREROUTING -p sctp --dport 80 -j DNAT --to-destination 10.0.0.2:8080", ActDNAT},
		{ir.IPv4, "-t nat -A PREROUTING -p sctp -m sctp --dport 80 -j DNAT --to-destination 10.0.0.2:8080-8090 --random", ActDNAT},
		{ir.IPv4, "-t nat -A PREROUTING -p sctp --dport 80 -j REDIRECT --to-ports 8080", ActDNAT},
		{ir.IPv4, "-t nat -A OUTPUT -p sctp --dport 80 -j DNAT --to-destination 10.0.0.2:8080", ActDNAT},
		{ir.IPv4, "-t nat -A POSTROUTING -p sctp -j MASQUERADE --to-ports 1000-2000", ActSNAT},
		{ir.IPv4, "-t nat -A POSTROUTING -p sctp -j SNAT --to-source 10.0.0.1:1000-2000", ActSNAT},
		{ir.IPv6, "-t nat -A PREROUTING -p sctp -j DNAT --to-destination [fd00::2]:80", ActDNAT},
		{ir.IPv6, "-t nat -A POSTROUTING -p sctp -j SNAT --to-source [fd00::1]:1000-2000", ActSNAT},
	} {
		g, err := Compile(parseRuleset(t, tc.fam, tc.rule), Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.rule, err)
			continue
		}
		if len(natTargets(g, tc.act)) == 0 {
			t.Errorf("%q: no entry of action %v", tc.rule, tc.act)
		}
	}
}
