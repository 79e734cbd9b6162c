package compiler

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatIPv6Refused checks the ip6tables NAT forms the data plane does
// not translate yet, each refused naming the target and IPv6
// (docs/compatibility.md, "NAT in IPv6"), while an IPv6 nat table without
// NAT targets (the chains Docker and kube-proxy create first) compiles.
func TestNatIPv6Refused(t *testing.T) {
	for _, tc := range []struct {
		rule, want string
	}{
		{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source fd00::1-::ffff:10.0.0.1", "target SNAT is not supported by xfw's data plane for IPv6 yet to ::ffff:10.0.0.1"},
		{"-t nat -A PREROUTING -p dccp -j DNAT --to-destination [fd00::2]:80", "target DNAT is not supported by xfw's data plane for -p dccp"},
		{"-t nat -A PREROUTING -p dccp -j DNAT --to-destination [fd00::2]", "target DNAT is not supported by xfw's data plane for -p dccp"},
		{"-t nat -A OUTPUT -p dccp -j DNAT --to-destination [fd00::2]", "target DNAT is not supported by xfw's data plane for -p dccp"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [::ffff:10.0.0.1]", "target DNAT is not supported by xfw's data plane for IPv6 yet to ::ffff:10.0.0.1"},
	} {
		_, err := Compile(parseRuleset(t, ir.IPv6, strings.Split(tc.rule, ";")...), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.rule, err, tc.want)
		}
	}
	unreached := parseRuleset(t, ir.IPv6, "-t nat -N X", "-t nat -A X -j MASQUERADE")
	if _, err := Compile(unreached, Options{}); err != nil {
		t.Errorf("an IPv6 MASQUERADE in a chain nothing jumps to: %v", err)
	}
	rs := parseRuleset(t, ir.IPv6,
		"-t nat -N DOCKER",
		"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A OUTPUT ! -d ::1/128 -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A DOCKER -i docker0 -j RETURN")
	if _, err := Compile(rs, Options{}); err != nil {
		t.Errorf("an IPv6 nat table without NAT targets: %v", err)
	}
}

// TestNat6Entries checks the entries of the IPv6 translations the data
// plane does: an address (or a range's two) is always a range's (Next
// Nat6Addr, EFNatRange, its ProbeNatRange naming the ProbeNatAddr6 probes
// that hold them), no address
// keeps the packet's (KeepAddr), MASQUERADE is MasqueradeAddr; ports and
// flags as for IPv4.
func TestNat6Entries(t *testing.T) {
	addrProbe := Probe{Kind: ProbeNatAddr6, Val: 0xfd00 << 16, Mask: 0, Wide: 2} // fd00::2
	if got := NatAddr6Probe(netip.MustParseAddr("fd00::2")); got != addrProbe {
		t.Fatalf("NatAddr6Probe(fd00::2) = %+v, want %+v", got, addrProbe)
	}
	for _, tc := range []struct {
		rule   string
		act    Action
		next   uint32
		ranged bool
		want   Probe // the range, Val and Mask naming addrProbe when it has an address
		port   uint16
	}{
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00::2]", ActDNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs)}, 0},
		{"-t nat -A PREROUTING -p udp -j DNAT --to-destination [fd00::2]:5353", ActDNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified), Wide: 5353<<16 | 5353}, 0},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination :8080", ActDNAT, KeepAddr, false, Probe{}, 8080},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination :8080-8090", ActDNAT, KeepAddr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified), Wide: 8080<<16 | 8090}, 0},
		{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source [fd00::2]:1000-2000 --random", ActSNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified | ir.NatRandom), Wide: 1000<<16 | 2000}, 0},
		{"-t nat -A POSTROUTING -p udp -j MASQUERADE", ActSNAT, MasqueradeAddr, false, Probe{}, 0},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00::2-fd00::9]:80-90 --random", ActDNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified | ir.NatRandom), Wide: 80<<16 | 90}, 0},
		{"-t nat -A POSTROUTING -p tcp -j MASQUERADE --to-ports 3000-3010", ActSNAT, MasqueradeAddr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified), Wide: 3000<<16 | 3010}, 0},
		// Without -p (ICMPv6 echo, protocols without ports: bpf/nat_query.h).
		{"-t nat -A POSTROUTING -s fd00:dead:beef::/48 ! -o docker0 -j MASQUERADE", ActSNAT, MasqueradeAddr, false, Probe{}, 0},
		{"-t nat -A POSTROUTING -p icmpv6 -j MASQUERADE", ActSNAT, MasqueradeAddr, false, Probe{}, 0},
		// REDIRECT in PREROUTING: the input interface's address (bpf/nat.h).
		{"-t nat -A PREROUTING -p tcp -j REDIRECT", ActDNAT, RedirectAddr, false, Probe{}, 0},
		{"-t nat -A PREROUTING -p udp -j REDIRECT --to-ports 5353", ActDNAT, RedirectAddr, false, Probe{}, 5353},
		{"-t nat -A PREROUTING -p tcp -j REDIRECT --to-ports 3000-3010 --random", ActDNAT, RedirectAddr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified | ir.NatRandom), Wide: 3000<<16 | 3010}, 0},
		{"-t nat -A POSTROUTING -j SNAT --to-source fd00::2", ActSNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs)}, 0},
		{"-t nat -A POSTROUTING -p 253 -j SNAT --to-source fd00::2-fd00::9", ActSNAT, Nat6Addr, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs)}, 0},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv6, tc.rule), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.rule, err)
			continue
		}
		n := 0
		for _, e := range g.Entries {
			if e.Action != tc.act {
				continue
			}
			n++
			if e.Next != tc.next || (e.Flags&EFNatRange != 0) != tc.ranged {
				t.Errorf("%s: Next %#x ranged %v, want %#x %v", tc.rule, e.Next, e.Flags&EFNatRange != 0, tc.next, tc.ranged)
				continue
			}
			if !tc.ranged {
				if e.Aux != tc.port {
					t.Errorf("%s: port %d, want %d", tc.rule, e.Aux, tc.port)
				}
				continue
			}
			want := tc.want
			if int(e.Aux) >= len(g.Probes) {
				t.Errorf("%s: probe %d of %d", tc.rule, e.Aux, len(g.Probes))
				continue
			}
			got := g.Probes[e.Aux]
			if tc.next == Nat6Addr {
				last := addrProbe
				if strings.Contains(tc.rule, "-fd00::9") {
					last = NatAddr6Probe(netip.MustParseAddr("fd00::9"))
				}
				for i, k := range []uint32{got.Val, got.Mask} {
					if want := []Probe{addrProbe, last}[i]; int(k) >= len(g.Probes) || g.Probes[k] != want {
						t.Errorf("%s: address probe %d of %+v, want %+v", tc.rule, k, g.Probes, want)
					}
				}
				want.Val, want.Mask = got.Val, got.Mask
			}
			if got != want {
				t.Errorf("%s: range %+v, want %+v", tc.rule, got, want)
			}
		}
		if n == 0 {
			t.Errorf("%s: no entry of action %d", tc.rule, tc.act)
		}
	}
}

// TestNatRefusedWithoutTerms checks that a NAT rule the data plane cannot
// translate is refused even when none of its terms can match yet (an
// interface the compiler was not told about), in its chain or in a chain
// only such a rule jumps to: the compile the interface's appearance
// triggers would refuse it after the command had succeeded
// (checkNatReach). A chain no nat chain reaches is not checked (the
// command that jumps to it is).
func TestNatRefusedWithoutTerms(t *testing.T) {
	for _, tc := range []struct {
		fam        ir.Family
		rule, want string
	}{
		{ir.IPv6, "-t nat -A POSTROUTING -o eth0 -p tcp -j MASQUERADE --to-ports 80-90/100", "port maps"},
		{ir.IPv4, "-t nat -A POSTROUTING -o eth0 -p tcp -j SNAT --to-source 10.0.0.2:80-90/100", "port maps"},
		{ir.IPv4, "-t nat -A PREROUTING -i eth0 -p dccp -j DNAT --to-destination 10.0.0.2", "-p dccp"},
		// Only a rule that cannot match yet jumps to the chain.
		{ir.IPv6, "-t nat -N X;-t nat -A X -p dccp -j DNAT --to-destination [fd00::2]:80;-t nat -A PREROUTING -i eth0 -j X", "-p dccp"},
		{ir.IPv6, "-t nat -N X;-t nat -A X -p tcp -j DNAT --to-destination [::ffff:10.0.0.1];-t nat -A PREROUTING -i eth0 -j X", "for IPv6"},
		{ir.IPv4, "-t nat -N X;-t nat -A X -p dccp -j DNAT --to-destination 10.0.0.1;-t nat -A OUTPUT -o eth0 -g X",
			"-p dccp"},
	} {
		rs := parseRuleset(t, tc.fam, strings.Split(tc.rule, ";")...)
		_, err := Compile(rs, Options{Interfaces: []Interface{{Index: 1, Name: "lo"}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want a refusal saying %q", tc.rule, err, tc.want)
		}
	}
}

// TestCtReplProbe6 checks --ctreplsrc and --ctrepldst in an IPv6 ruleset
// with NAT: a ProbeCtRepl naming the ProbeNatAddr6 probes of each
// option's masked address and mask, answered on the reply tuple's
// addresses as conntrack_mt answers (prefixes, "!").
func TestCtReplProbe6(t *testing.T) {
	rs := parseRuleset(t, ir.IPv6, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00:2::2]",
		"-A FORWARD -m conntrack --ctreplsrc fd00:2::/64 ! --ctrepldst fd00:1::1 -j ACCEPT")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pr *Probe
	for i := range g.Probes {
		if g.Probes[i].Kind == ProbeCtRepl {
			pr = &g.Probes[i]
		}
	}
	if pr == nil || pr.Arg != CtReplSrc|CtReplDst|CtReplDstInv {
		t.Fatalf("probes %+v: want one ProbeCtRepl with the source, the destination and its \"!\"", g.Probes)
	}
	a := func(s string) U128 { return AddrU128(netip.MustParseAddr(s)) }
	if v := addr6Value(g.Probes[pr.Val]); v != a("fd00:2::") {
		t.Errorf("source address probe holds %+v", v)
	}
	if v := addr6Value(g.Probes[pr.Mask]); v != a("ffff:ffff:ffff:ffff::") {
		t.Errorf("source mask probe holds %+v", v)
	}
	ct := uint32(CtsEstablished)
	for _, tc := range []struct {
		src, dst string
		want     bool
	}{
		{"fd00:2::2", "fd00:1::2", true},
		{"fd00:2::ffff:1", "fd00:1::3", true},
		{"fd00:3::2", "fd00:1::2", false}, // the source outside the prefix
		{"fd00:2::2", "fd00:1::1", false}, // the destination excluded
	} {
		if got := CtReplAnswer6(g, *pr, ct, a(tc.src), a(tc.dst)); got != tc.want {
			t.Errorf("CtReplAnswer6(%s > %s) = %v, want %v", tc.src, tc.dst, got, tc.want)
		}
	}
	if !CtReplAnswer6(g, *pr, uint32(CtsInvalid), a("fd00:3::2"), a("fd00:1::1")) {
		t.Errorf("an INVALID packet does not pass, as conntrack_mt passes it by its state alone")
	}
}

// TestNat6OutputEntries checks IPv6 DNAT in nat OUTPUT (Docker's published
// port reached from OUTPUT): the OUTPUT walk has its resume position, the
// DNAT entries IPv6's ranged address (Nat6Addr).
func TestNat6OutputEntries(t *testing.T) {
	rs := parseRuleset(t, ir.IPv6,
		"-t nat -N DOCKER",
		"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A OUTPUT ! -d ::1/128 -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A DOCKER -i docker0 -j RETURN",
		"-t nat -A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00:dead:beef::2]:80")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatalf("Docker's IPv6 published port: %v", err)
	}
	r := g.Layout.NatResume[ChainOutput]
	start, end := g.Walk(ChainOutput)
	if r == 0 || r-1 <= start || r-1 >= end {
		t.Fatalf("OUTPUT resume %d outside its walk [%d,%d)", r, start, end)
	}
	found := 0
	for i, e := range g.Entries {
		if e.Action != ActDNAT {
			continue
		}
		found++
		if e.Next != Nat6Addr || e.Flags&EFNatRange == 0 {
			t.Errorf("DNAT entry %d: Next %d flags %#x, want Nat6Addr and EFNatRange", i, e.Next, e.Flags)
		}
	}
	if found == 0 {
		t.Error("no DNAT entry for the published port")
	}
}

// TestNat6RedirectOutput checks IPv6 REDIRECT in nat OUTPUT: a DNAT to
// ::1 (nf_nat_redirect_ipv6 for the host's own packets), with
// REDIRECT's ports and flags and NF_NAT_RANGE_MAP_IPS.
func TestNat6RedirectOutput(t *testing.T) {
	loopback := NatAddr6Probe(netip.IPv6Loopback())
	for _, tc := range []struct {
		rule string
		want Probe // Val and Mask name loopback
	}{
		{"-t nat -A OUTPUT -p tcp -j REDIRECT", Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs)}},
		{"-t nat -A OUTPUT -p tcp -j REDIRECT --to-ports 8080", Probe{Kind: ProbeNatRange,
			Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified), Wide: 8080<<16 | 8080}},
		{"-t nat -A OUTPUT -p udp -j REDIRECT --to-ports 5000-5010 --random", Probe{Kind: ProbeNatRange,
			Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified | ir.NatRandom), Wide: 5000<<16 | 5010}},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv6, tc.rule), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.rule, err)
			continue
		}
		dnat := 0
		for _, e := range g.Entries {
			if e.Action != ActDNAT {
				continue
			}
			dnat++
			if e.Next != Nat6Addr || e.Flags&EFNatRange == 0 || int(e.Aux) >= len(g.Probes) {
				t.Errorf("%s: entry %+v, want Nat6Addr and a range", tc.rule, e)
				continue
			}
			got := g.Probes[e.Aux]
			for _, k := range []uint32{got.Val, got.Mask} {
				if int(k) >= len(g.Probes) || g.Probes[k] != loopback {
					t.Errorf("%s: address probe %d of %+v, want %+v", tc.rule, k, g.Probes, loopback)
				}
			}
			want := tc.want
			want.Val, want.Mask = got.Val, got.Mask
			if got != want {
				t.Errorf("%s: range %+v, want %+v", tc.rule, got, want)
			}
		}
		if dnat != 1 {
			t.Errorf("%s: %d DNAT entries, want 1", tc.rule, dnat)
		}
	}
}
