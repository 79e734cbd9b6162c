package e2e

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m sctp, -m dccp, -m esp, IPv4 -m ah and tcp's --tcp-option against the
// kernel: counting rules in INPUT and FORWARD of both families through
// xfw and through iptables-legacy in twin topologies, packets with chosen
// headers (cut short, malformed chunks and options included) injected at
// gen, and every rule's counters compared after each packet. Each group
// is its own ruleset: xfw takes at most 7 distinct conditions per ruleset.

// IP protocol numbers of the probes.
const (
	protoSCTP = 132
	protoDCCP = 33
	protoESP  = 50
	protoAH   = 51
)

// hdr4Group is one ruleset and its probes.
type hdr4Group struct {
	name  string
	proto string
	// specs are the rules' matches, after "-p PROTO"; v4only ones are
	// left out of the IPv6 ruleset.
	specs, v4only []string
	probes        []hdr4Probe
}

// hdr4Probe is one packet: its transport part.
type hdr4Probe struct {
	name   string
	v4only bool
	l4     nettest.Transport
}

// hdr4Ruleset returns the counting rules of g for family fam.
func hdr4Ruleset(g hdr4Group, fam int) string {
	specs := g.specs
	if fam == 4 {
		specs = append(append([]string(nil), specs...), g.v4only...)
	}
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, chain := range []string{"INPUT", "FORWARD"} {
		for _, s := range specs {
			fmt.Fprintf(&b, "-A %s -p %s %s\n", chain, g.proto, s)
		}
		fmt.Fprintf(&b, "-A %s -p %s\n", chain, g.proto)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// sctpChunk is an SCTP chunk: type, flags, and value (padded to 4 bytes;
// length the header and value unless given).
func sctpChunk(typ, flags byte, value []byte, length ...uint16) []byte {
	l := uint16(4 + len(value))
	if len(length) > 0 {
		l = length[0]
	}
	c := []byte{typ, flags, byte(l >> 8), byte(l)}
	c = append(c, value...)
	for len(c)%4 != 0 {
		c = append(c, 0)
	}
	return c
}

// sctpPacket is an SCTP packet from sport to dport with the chunks (the
// checksum is not computed: no match reads it).
func sctpPacket(sport, dport uint16, chunks ...[]byte) nettest.Raw {
	h := make([]byte, 12)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 0x01020304)
	for _, c := range chunks {
		h = append(h, c...)
	}
	return nettest.Raw{Proto: protoSCTP, Data: h}
}

// sctpGroup tests -m sctp: ports alone, and chunk types (the first chunk
// condition a malformed packet reaches is not inverted, so that both
// drop it uncounted there).
func sctpGroup() hdr4Group {
	data := sctpChunk(0, 0x03, []byte("abcd"))
	dataU := sctpChunk(0, 0x04, []byte("ab"))
	init := sctpChunk(1, 0, make([]byte, 16))
	sack := sctpChunk(3, 0, make([]byte, 12))
	abortT := sctpChunk(6, 0x01, nil)
	// 300 chunks of an unknown type before an ABORT T: the kernel walks
	// them all (xfw once stopped after 256 and hotdropped).
	many := [][]byte{data}
	for range 300 {
		many = append(many, sctpChunk(0x85, 0, nil))
	}
	many = append(many, abortT)
	return hdr4Group{
		name: "sctp", proto: "sctp",
		specs: []string{
			"-m sctp --dport 9999", "-m sctp ! --sport 4000", "-m sctp --sport 4000 --dport 9000:9998",
			"--sport 0:65535", "-m sctp",
			"-m sctp --chunk-types any DATA", "-m sctp --chunk-types all INIT,DATA",
			"-m sctp --chunk-types only DATA:BE,SACK", "-m sctp ! --chunk-types any ABORT:T",
			"-m sctp --dport 9999 --chunk-types any DATA:u,INIT", "-m sctp --chunk-types only ALL",
			"-m sctp ! --sport 4000 ! --chunk-types all NONE",
		},
		probes: []hdr4Probe{
			{name: "DATA B|E", l4: sctpPacket(4000, 9999, data)},
			{name: "INIT and DATA", l4: sctpPacket(4000, 9999, init, data)},
			{name: "DATA U and SACK", l4: sctpPacket(4001, 9500, dataU, sack)},
			{name: "DATA B|E and SACK", l4: sctpPacket(4000, 9500, data, sack)},
			{name: "ABORT T", l4: sctpPacket(5, 9999, abortT)},
			{name: "ABORT without T, then DATA", l4: sctpPacket(4000, 9999, sctpChunk(6, 0, nil), data)},
			{name: "chunk longer than the packet", l4: sctpPacket(4000, 9999, sctpChunk(0, 3, []byte("abcd"), 200))},
			{name: "common header alone", l4: sctpPacket(4000, 9999)},
			{name: "DATA, 300 chunks of type 0x85, ABORT T", l4: sctpPacket(4000, 9999, many...)},
			{name: "chunk of length 0 after DATA", l4: sctpPacket(4000, 9999, data, sctpChunk(3, 0, nil, 0))},
			{name: "chunk header cut short", l4: nettest.Raw{Proto: protoSCTP, Data: append(sctpPacket(4000, 9999, data).Data, 3, 0)}},
			{name: "common header cut short", l4: nettest.Raw{Proto: protoSCTP, Data: sctpPacket(4000, 9999).Data[:8]}},
			{name: "three bytes", l4: nettest.Raw{Proto: protoSCTP, Data: []byte{0x0f, 0xa0, 0x27}}},
		},
	}
}

// dccpPacket is a DCCP header of type typ (x: extended sequence numbers)
// from sport to dport, the type's fields zero, then the options, with the
// data offset covering them unless doff is given.
func dccpPacket(sport, dport uint16, typ byte, x bool, opts []byte, doff ...byte) nettest.Raw {
	extra := map[byte]int{0: 4, 1: 12, 2: 0, 7: 12}
	hl := 12
	if x {
		hl += 4
	}
	if e, ok := extra[typ]; ok {
		hl += e
	} else {
		hl += 8
	}
	h := make([]byte, hl)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	h[8] = typ << 1
	if x {
		h[8] |= 1
	}
	h = append(h, opts...)
	for len(h)%4 != 0 {
		h = append(h, 0)
	}
	h[4] = byte(len(h) / 4)
	if len(doff) > 0 {
		h[4] = doff[0]
	}
	return nettest.Raw{Proto: protoDCCP, Data: append(h, "data"...)}
}

// dccpGroup tests -m dccp: ports alone, packet types and options.
func dccpGroup() hdr4Group {
	return hdr4Group{
		name: "dccp", proto: "dccp",
		specs: []string{
			"-m dccp --dport 9999", "-m dccp ! --sport 4000:4001", "-m dccp --sport 0:65535",
			"-m dccp --dccp-types REQUEST,DATA", "-m dccp ! --dccp-types ACK,INVALID",
			"-m dccp --dccp-option 32", "-m dccp --dport 9999 --dccp-types DATAACK --dccp-option 44",
			"-m dccp ! --dccp-option 32 --dccp-types REQUEST", "-m dccp --dccp-types INVALID",
		},
		probes: []hdr4Probe{
			{name: "REQUEST", l4: dccpPacket(4000, 9999, 0, true, nil)},
			{name: "REQUEST with option 32", l4: dccpPacket(4000, 9999, 0, true, []byte{1, 32, 4, 0, 0})},
			{name: "DATA with padding", l4: dccpPacket(4002, 9999, 2, true, []byte{0, 0, 0, 0})},
			{name: "DATAACK with 44 after 32", l4: dccpPacket(4000, 9999, 4, true, []byte{32, 3, 1, 44, 3, 1})},
			{name: "DATAACK, short sequence numbers, option 44", l4: dccpPacket(5, 9999, 4, false, []byte{44, 2})},
			{name: "ACK", l4: dccpPacket(4000, 80, 3, true, []byte{1, 1})},
			{name: "type 12", l4: dccpPacket(4000, 9999, 12, true, nil)},
			{name: "REQUEST with data offset below its header", l4: dccpPacket(4000, 9999, 0, true, nil, 4)},
			{name: "REQUEST with options beyond the packet", l4: dccpPacket(4000, 9999, 0, true, []byte{1, 1}, 60)},
			{name: "REQUEST without options cut within its header", l4: nettest.Raw{Proto: protoDCCP, Data: dccpPacket(4000, 9999, 0, true, nil).Data[:16]}},
			{name: "header cut short", l4: nettest.Raw{Proto: protoDCCP, Data: dccpPacket(4000, 9999, 2, true, nil).Data[:10]}},
		},
	}
}

// spiHeader is an ESP (8 bytes) or AH (12 bytes) header with the SPI and
// some payload, cut to n bytes when n > 0.
func spiHeader(proto uint8, spi uint32, n int) nettest.Raw {
	var h []byte
	if proto == protoESP {
		h = binary.BigEndian.AppendUint32(nil, spi)
		h = binary.BigEndian.AppendUint32(h, 1)
	} else {
		h = []byte{59, 1, 0, 0}
		h = binary.BigEndian.AppendUint32(h, spi)
		h = binary.BigEndian.AppendUint32(h, 1)
	}
	h = append(h, "payload!"...)
	if n > 0 {
		h = h[:n]
	}
	return nettest.Raw{Proto: proto, Data: h}
}

// espGroup tests -m esp; ahGroup IPv4's -m ah.
func espGroup() hdr4Group {
	return hdr4Group{
		name: "esp", proto: "esp",
		specs: []string{"-m esp --espspi 5", "-m esp ! --espspi 5", "-m esp --espspi 1:10",
			"-m esp", "-m esp ! --espspi 0:4294967295", "-m esp --espspi 4294967295"},
		probes: []hdr4Probe{
			{name: "SPI 5", l4: spiHeader(protoESP, 5, 0)},
			{name: "SPI 7", l4: spiHeader(protoESP, 7, 0)},
			{name: "SPI 4294967295", l4: spiHeader(protoESP, 0xffffffff, 0)},
			{name: "header cut short", l4: spiHeader(protoESP, 5, 6)},
			{name: "header alone", l4: spiHeader(protoESP, 5, 8)},
		},
	}
}

func ahGroup() hdr4Group {
	return hdr4Group{
		name: "ah", proto: "ah",
		v4only: []string{"-m ah --ahspi 5", "-m ah ! --ahspi 1:10", "-m ah", "-m ah --ahspi 7:4294967295"},
		probes: []hdr4Probe{
			{name: "SPI 5", v4only: true, l4: spiHeader(protoAH, 5, 0)},
			{name: "SPI 70", v4only: true, l4: spiHeader(protoAH, 70, 0)},
			{name: "header cut short", v4only: true, l4: spiHeader(protoAH, 5, 10)},
			{name: "header alone", v4only: true, l4: spiHeader(protoAH, 5, 12)},
		},
	}
}

// tcpOptionGroup tests tcp's --tcp-option.
func tcpOptionGroup() hdr4Group {
	seg := func(opts []byte, doff uint8, payload string) nettest.TCP {
		return nettest.TCP{SrcPort: 4000, DstPort: 9999, Seq: 1, Flags: nettest.TCPSyn, Window: 1024,
			Options: opts, DataOffset: doff, Payload: []byte(payload)}
	}
	ts := []byte{8, 10, 0, 0, 0, 1, 0, 0, 0, 0}
	return hdr4Group{
		name: "tcp-option", proto: "tcp",
		specs: []string{"--dport 9999 --tcp-option 8", "--tcp-option 3", "! --tcp-option 8",
			"--syn --tcp-option 2", "-m tcp ! --tcp-option 4 --dport 9999", "--tcp-option 1"},
		probes: []hdr4Probe{
			{name: "timestamps", l4: seg(ts, 0, "")},
			{name: "MSS, window scale", l4: seg([]byte{2, 4, 5, 0xb4, 3, 3, 7, 1}, 0, "")},
			{name: "no options", l4: seg(nil, 0, "")},
			{name: "NOPs, SACK permitted", l4: seg([]byte{1, 1, 4, 2}, 0, "")},
			{name: "option of length 0, then timestamps", l4: seg(append([]byte{5, 0}, ts...), 0, "")},
			{name: "End of Option List, then window scale", l4: seg([]byte{0, 3, 3, 7}, 0, "")},
			{name: "last byte a kind with its length in the payload", l4: seg([]byte{1, 1, 1, 6}, 0, "\x08xyz")},
			{name: "options beyond the segment", l4: seg(nil, 10, "")},
			{name: "data offset 4", l4: seg([]byte{8, 2, 0, 0}, 4, "")},
		},
	}
}

// hdr4Frame builds the probe's frame in tp.
func hdr4Frame(tp *nettest.Topology, fam int, forward bool, l4 nettest.Transport) []byte {
	if fam == 4 {
		dst := in4(tp, 1, 1)
		if forward {
			dst = in4(tp, 2, 2)
		}
		return tp.GenToFw().Frame(nettest.IPv4{Src: tp.Gen.IPv4, Dst: dst, TTL: 64}.Packet(l4))
	}
	dst := in6(tp, 1, 1)
	if forward {
		dst = in6(tp, 2, 2)
	}
	return tp.GenToFw().Frame(nettest.IPv6{Src: tp.Gen.IPv6, Dst: dst, HopLimit: 64}.Packet(l4))
}

// TestHdr4MatchesAgainstKernel checks -m sctp, -m dccp, -m esp, IPv4
// -m ah and --tcp-option in INPUT and FORWARD of both families against
// the kernel, packet by packet.
func TestHdr4MatchesAgainstKernel(t *testing.T) {
	runHdr4Groups(t, []hdr4Group{sctpGroup(), dccpGroup(), espGroup(), ahGroup(), tcpOptionGroup()})
}

// TestHdr4InvertedHotdropAgainstKernel checks an inverted --chunk-types
// and --dccp-option whose walk hotdrops the packet: the kernel's match
// then returns true, so the rule is counted (when its later matches hold)
// and its target runs before the packet is dropped, the rules after it
// not reached.
func TestHdr4InvertedHotdropAgainstKernel(t *testing.T) {
	runHdr4Groups(t, []hdr4Group{sctpInvertedGroup(), dccpInvertedGroup()})
}

// sctpInvertedGroup has inverted --chunk-types rules, one destination port
// each: without a target, ACCEPT, a later match that fails, REJECT.
func sctpInvertedGroup() hdr4Group {
	data := sctpChunk(0, 0x03, []byte("abcd"))
	var probes []hdr4Probe
	for _, port := range []uint16{9001, 9002, 9003, 9004} {
		probes = append(probes,
			hdr4Probe{name: fmt.Sprintf("port %d DATA", port), l4: sctpPacket(4000, port, data)},
			hdr4Probe{name: fmt.Sprintf("port %d chunk of length 0 after DATA", port), l4: sctpPacket(4000, port, data, sctpChunk(3, 0, nil, 0))},
			hdr4Probe{name: fmt.Sprintf("port %d chunk longer than the packet", port), l4: sctpPacket(4000, port, sctpChunk(0, 3, []byte("abcd"), 200))})
	}
	return hdr4Group{
		name: "sctp", proto: "sctp",
		specs: []string{
			"-m sctp --dport 9001 ! --chunk-types any ABORT",
			"-m sctp --dport 9002 ! --chunk-types all INIT -j ACCEPT",
			"-m sctp --dport 9003 ! --chunk-types only DATA -m length --length 0:20",
			"-m sctp --dport 9004 ! --chunk-types any ABORT -j REJECT",
		},
		probes: probes,
	}
}

// dccpInvertedGroup is sctpInvertedGroup's for --dccp-option.
func dccpInvertedGroup() hdr4Group {
	var probes []hdr4Probe
	for _, port := range []uint16{9001, 9002, 9003, 9004} {
		probes = append(probes,
			hdr4Probe{name: fmt.Sprintf("port %d REQUEST", port), l4: dccpPacket(4000, port, 0, true, nil)},
			hdr4Probe{name: fmt.Sprintf("port %d data offset below the header", port), l4: dccpPacket(4000, port, 0, true, nil, 4)},
			hdr4Probe{name: fmt.Sprintf("port %d options beyond the packet", port), l4: dccpPacket(4000, port, 0, true, []byte{1, 1}, 60)})
	}
	return hdr4Group{
		name: "dccp", proto: "dccp",
		specs: []string{
			"-m dccp --dport 9001 ! --dccp-option 32",
			"-m dccp --dport 9002 ! --dccp-option 32 -j ACCEPT",
			"-m dccp --dport 9003 ! --dccp-option 32 -m length --length 0:20",
			"-m dccp --dport 9004 ! --dccp-option 32 -j REJECT",
		},
		probes: probes,
	}
}

// runHdr4Groups loads each group's ruleset in both families and compares
// the counters after each of its probes, to the host and forwarded.
func runHdr4Groups(t *testing.T, groups []hdr4Group) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				fw.restore(t, tp, 4, hdr4Ruleset(g, 4))
				fw.restore(t, tp, 6, hdr4Ruleset(g, 6))
			})
			if t.Failed() {
				return
			}
			for _, pr := range g.probes {
				for _, fam := range []int{4, 6} {
					if fam == 6 && pr.v4only {
						continue
					}
					for _, fwd := range []bool{false, true} {
						name := fmt.Sprintf("%s v%d forward=%v", pr.name, fam, fwd)
						t.Run(name, func(t *testing.T) {
							k := compareAfterProbe(t, tw, fam, func(t *testing.T, tp *nettest.Topology) {
								if err := tp.InjectFromGen(hdr4Frame(tp, fam, fwd, pr.l4)); err != nil {
									t.Errorf("inject: %v", err)
								}
							})
							t.Logf("%d rules counted the packet", countedRules(k))
						})
					}
				}
			}
		})
	}
}
