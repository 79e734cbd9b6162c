package difftest

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestKnownReplyPairs checks that a reply of the kernel's is only taken
// for xfw's by a documented difference when everything that difference
// does not explain is the same: the source address above all (a reply
// from a wrong source was once called "routed by the kernel, sent back by
// the input interface by xfw", the IP header not being compared).
func TestKnownReplyPairs(t *testing.T) {
	const (
		genEth  = "0278742a01020278742a01010800"
		sinkEth = "0278742a02020278742a02010800"
		// An ICMP port unreachable from fw's in0 (10.42.1.1) to gen
		// (10.42.1.2) quoting a UDP packet, identification and header
		// checksum normalized.
		unreach = "45c0002c00000000400100000a2a01010a2a0102" + "0303abcd00000000" +
			"4500001c04d2000040110000" + "0a2a01020a2a0101" + "00350035000800aa"
		// The same from out0's address (10.42.2.1).
		wrongSrc = "45c0002c00000000400100000a2a02010a2a0102" + "0303abcd00000000" +
			"4500001c04d2000040110000" + "0a2a01020a2a0101" + "00350035000800aa"
	)
	at := func(place, eth, pkt string) string {
		return "at " + place + ": ICMP error quoting it: IPv4 x > y ICMP type 3 code 3\n      " + eth + pkt
	}
	// IPv4 options: a packet fw sent from 198.51.100.188 to 10.71.2.1
	// with a timestamp option (difftest conntrack seed 4); the kernel's
	// error echoes the option and quotes it filled in, xfw's does not.
	const (
		optProbe  = "48000040000040004006af71c63364bc0a470201440c0d0000000001000000029b62701b000000000000000050f8020003bf00006162636465666768696a6b6c"
		kernelOpt = "48c0004c00000000400100000a470201c63364bc440c0d100000000100000002" + "0303aaaa00000000" +
			"48000040000040004006af71c63364bc0a470201440c0d1000000001000000029b62701b00000000"
		xfwOpt = "45c0004000000000400100000a470201c63364bc" + "0303bbbb00000000" +
			"48000040000040004006af71c63364bc0a470201440c0d0000000001000000029b62701b00000000"
	)
	// IPv6: an error to a spoofed source behind out0 (gen sent a
	// packet from sink's prefix), the kernel's from in0's address, xfw's
	// from out0's (before bpf/reject_saddr.h); both seen at sink: no
	// longer excused.
	const (
		eth6    = "0278742a02020278742a020186dd"
		inAddr  = "fd000042000100000000000000000001"
		outAddr = "fd000042000200000000000000000001"
		sinkA   = "fd000042000200000000000000000002"
		quote6  = "6000000000083a40" + sinkA + inAddr + "8000000000000000"
	)
	icmp6 := func(src, typeCode, sum, quote string) string {
		return "60000000003a3a40" + src + sinkA + typeCode + sum + "00000000" + quote
	}
	at6 := func(pkt string) string {
		return "at sink: ICMP error quoting it: IPv6 x > y ICMPv6 type 1 code 3\n      " + eth6 + pkt
	}
	fromFwOpt := Probe{From: FromFw, Frames: [][]byte{hexFrame(t, optProbe)}}
	fromGen := Probe{From: FromGen}
	tests := []struct {
		name   string
		p      Probe
		ipv4   bool
		kernel string
		xfw    string
		known  bool
	}{
		{"routed elsewhere, same bytes", fromGen, true, at("sink", sinkEth, unreach), at("gen", genEth, unreach), true},
		{"routed elsewhere, wrong source", fromGen, true, at("sink", sinkEth, unreach), at("gen", genEth, wrongSrc), false},
		// fw's packet to its own address from gen's: the same place,
		// the kernel's from the packet's destination, xfw's from out0's.
		{"same place, wrong source", Probe{From: FromFw}, true, at("gen", genEth, unreach), at("gen", genEth, wrongSrc), false},
		{"same place, other MAC, same bytes", fromGen, true, at("gen", genEth, unreach), at("gen", sinkEth, unreach), false},
		{"options not echoed", fromFwOpt, true, at("gen", genEth, kernelOpt), at("gen", genEth, xfwOpt), true},
		{"options not echoed, wrong source", fromFwOpt, true, at("gen", genEth, kernelOpt),
			at("gen", genEth, strings.Replace(xfwOpt, "0a470201c63364bc", "0a470301c63364bc", 1)), false},
		{"options not echoed, another quoted port", fromFwOpt, true, at("gen", genEth, kernelOpt),
			at("gen", genEth, strings.Replace(xfwOpt, "9b62701b", "9b62701c", 1)), false},
		{"options not echoed, another code", fromFwOpt, true, at("gen", genEth, kernelOpt),
			at("gen", genEth, strings.Replace(xfwOpt, "0303bbbb", "030abbbb", 1)), false},
		{"options, elsewhere", fromFwOpt, true, at("sink", sinkEth, kernelOpt), at("gen", genEth, xfwOpt), false},
		{"ICMPv6 to a spoofed source", fromGen, false, at6(icmp6(inAddr, "0103", "1111", quote6)), at6(icmp6(outAddr, "0103", "2222", quote6)), false},
		{"ICMPv6 to a spoofed source, another code", fromGen, false, at6(icmp6(inAddr, "0103", "1111", quote6)), at6(icmp6(outAddr, "0104", "2222", quote6)), false},
		{"ICMPv6 to a spoofed source, another quote", fromGen, false, at6(icmp6(inAddr, "0103", "1111", quote6)),
			at6(icmp6(outAddr, "0103", "2222", strings.Replace(quote6, "8000", "8100", 1))), false},
		{"ICMPv6 to a spoofed source, from sink", Probe{From: FromSink}, false, at6(icmp6(inAddr, "0103", "1111", quote6)), at6(icmp6(outAddr, "0103", "2222", quote6)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Corpus{Probes: []Probe{tc.p}}
			d := Difference{Kind: DiffProbe, Kernel: []string{tc.kernel}, XFW: []string{tc.xfw}}
			k := knownContext{ipv4: tc.ipv4}
			why := knownRejectDifference(d, c, k)
			if got := why != ""; got != tc.known {
				t.Errorf("known = %v, want %v (%q)", got, tc.known, why)
			}
		})
	}
}

// TestKnownReplyToOwnAnycast checks that the kernel's reset delivered to
// fw itself, about a packet from sink whose source is fw's subnet-router
// anycast address (plain IPv6 seed 139, --subnet 174, probe #1772), is not
// excused (xfw delivers it too), nor the same reply about a packet from
// another host's source or from fw's link-local address (xfw delivers
// those as well: tests/e2e TestRejectOwnLinkLocalSourceAgainstKernel).
func TestKnownReplyToOwnAnycast(t *testing.T) {
	plan := NewPlan(ir.IPv6, 174)
	const probe = "027874ae0201027874ae020286dd6000000000533300fd000174000100000000000000000000fd0001740002000000000000000000012c016162636465666768696a3c00000031fe9ce4060001020000010000171f8f00000000000000005009020007f400006162636465666768696a6b6c6d6e6f707172737475767778797a616263646566676869"
	const reset = "fw's sockets got answer: IPv6 protocol 6 (the bytes after the IPv6 header), 20 bytes: 1f8f001700000000006ed02450140000c2aa0000"
	const anycast = "fd000174000100000000000000000000"
	// The same packet from sink's own address (fd00:174:2::2), and from
	// fw's link-local address.
	other := strings.Replace(probe, anycast, "fd000174000200000000000000000002", 1)
	ll := plan.FwInLL.As16()
	linkLocal := strings.Replace(probe, anycast, hex.EncodeToString(ll[:]), 1)
	k := knownContext{}
	for _, tc := range []struct {
		name  string
		frame string
		known bool
	}{{"anycast source", probe, false}, {"sink's source", other, false}, {"fw's link-local source", linkLocal, false}} {
		c := &Corpus{Probes: []Probe{{From: FromSink, Frames: [][]byte{hexFrame(t, tc.frame)}}}}
		why := knownRejectDifference(Difference{Kind: DiffProbe, Kernel: []string{reset}}, c, k)
		if got := why != ""; got != tc.known {
			t.Errorf("%s: known = %v, want %v (%q)", tc.name, got, tc.known, why)
		}
	}
}
