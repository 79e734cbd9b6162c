package dataplane

// TestReject checks the REJECT replies xfw builds (bpf/reject.h) on real
// packets, and compares each with the reply the kernel's own REJECT target
// (iptables-legacy, ip6tables-legacy) sends in an identical topology:
//
//	gen <-veth-> fw <-veth-> sink     (internal/testkit/nettest)
//
// The same rules are loaded into fw of three topologies: xfw with native
// XDP, xfw with generic XDP, and the kernel. Offending packets are injected
// from gen (INPUT, FORWARD) or sent from fw through a raw socket (OUTPUT),
// the replies captured (gen's interface; fw's out0 for xfw's OUTPUT replies,
// which enter there, and fw's lo for the kernel's, which loop back), and
// described by a signature (reject_env_test.go) of every header field that
// REJECT decides. The signatures must be equal, but for the documented
// differences each scenario lists. Real sockets then check what an
// application sees (ECONNREFUSED and friends).
//
// ICMP rate limits: nettest clears the ratemasks (and sets the
// per-destination limits to 0) in every namespace, so neither the
// per-destination limits nor the global bucket apply: the kernel answers
// every packet.

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Destination ports of the rules (see rjRules).
const (
	rjPortInReset      = 7001 // INPUT tcp-reset
	rjPortInPort       = 7002 // INPUT icmp(6)-port-unreachable
	rjPortInNet        = 7003 // INPUT icmp-net-unreachable / icmp6-adm-prohibited
	rjPortInProto      = 7004 // INPUT icmp-proto-unreachable (TCP)
	rjPortInAdmin      = 7005 // INPUT icmp-admin-prohibited
	rjPortFwdReset     = 7101 // FORWARD tcp-reset
	rjPortFwdA         = 7102 // FORWARD icmp-host-unreachable / icmp6-no-route
	rjPortFwdB         = 7103 // FORWARD icmp-net-prohibited / icmp6-policy-fail
	rjPortFwdC         = 7104 // FORWARD icmp-host-prohibited / icmp6-reject-route
	rjPortFwdD         = 7105 // FORWARD icmp-port-unreachable / icmp6-addr-unreachable
	rjPortOutReset     = 7201 // OUTPUT tcp-reset
	rjPortOutPort      = 7202 // OUTPUT icmp(6)-port-unreachable
	rjPortAnyToOut0    = 9    // UDP to fw's out0 address: INPUT, -d out0
	rjPortControl      = 7999 // no rule
	rjICMPEchoRequest  = 8
	rjICMPDestUnreach  = 3
	rjICMP6EchoRequest = 128
	rjICMP6DestUnreach = 1
	// rjUnknownICMPType is above NR_ICMP_TYPES (18): icmp_send treats it
	// as an error and does not answer it.
	rjUnknownICMPType = 42
)

// rjRules are the REJECT rules of a topology; rules with -d need its
// addresses.
func rjRules(tp *nettest.Topology) map[ir.Family][]rjRule {
	r := func(chain string, proto uint8, dport uint16, with string) rjRule {
		return rjRule{chain: chain, proto: proto, dport: dport, icmpType: -1, with: with}
	}
	tcp, udp := nettest.ProtoTCP, nettest.ProtoUDP
	v4 := []rjRule{
		r("INPUT", tcp, rjPortInReset, "tcp-reset"),
		r("INPUT", udp, rjPortInPort, "icmp-port-unreachable"),
		r("INPUT", udp, rjPortInNet, "icmp-net-unreachable"),
		r("INPUT", tcp, rjPortInProto, "icmp-proto-unreachable"),
		r("INPUT", udp, rjPortInAdmin, "icmp-admin-prohibited"),
		// ICMP from gen only: errors sent to fw itself must get through.
		{chain: "INPUT", src: tp.Gen.IPv4, proto: nettest.ProtoICMP, icmpType: -1, with: "icmp-host-unreachable"},
		{chain: "INPUT", proto: udp, dst: tp.FwOut.IPv4, icmpType: -1, with: "icmp-port-unreachable"},
		r("FORWARD", tcp, rjPortFwdReset, "tcp-reset"),
		r("FORWARD", udp, rjPortFwdA, "icmp-host-unreachable"),
		r("FORWARD", udp, rjPortFwdB, "icmp-net-prohibited"),
		r("FORWARD", udp, rjPortFwdC, "icmp-host-prohibited"),
		r("FORWARD", udp, rjPortFwdD, "icmp-port-unreachable"),
		// Fragments (no ports) to sink.
		{chain: "FORWARD", proto: udp, dst: tp.Sink.IPv4, icmpType: -1, with: "icmp-port-unreachable"},
		r("OUTPUT", tcp, rjPortOutReset, "tcp-reset"),
		r("OUTPUT", udp, rjPortOutPort, "icmp-port-unreachable"),
	}
	v6 := []rjRule{
		r("INPUT", tcp, rjPortInReset, "tcp-reset"),
		r("INPUT", udp, rjPortInPort, "icmp6-port-unreachable"),
		r("INPUT", udp, rjPortInNet, "icmp6-adm-prohibited"),
		// Only echo requests and errors: neighbour discovery must work.
		{chain: "INPUT", src: tp.Gen.IPv6, proto: nettest.ProtoICMPv6, icmpType: rjICMP6EchoRequest, with: "icmp6-addr-unreachable"},
		{chain: "INPUT", src: tp.Gen.IPv6, proto: nettest.ProtoICMPv6, icmpType: rjICMP6DestUnreach, with: "icmp6-port-unreachable"},
		{chain: "INPUT", proto: udp, dst: tp.FwOut.IPv6, icmpType: -1, with: "icmp6-port-unreachable"},
		r("FORWARD", tcp, rjPortFwdReset, "tcp-reset"),
		r("FORWARD", udp, rjPortFwdA, "icmp6-no-route"),
		r("FORWARD", udp, rjPortFwdB, "icmp6-policy-fail"),
		r("FORWARD", udp, rjPortFwdC, "icmp6-reject-route"),
		r("FORWARD", udp, rjPortFwdD, "icmp6-addr-unreachable"),
		{chain: "FORWARD", proto: udp, dst: tp.Sink.IPv6, icmpType: -1, with: "icmp6-port-unreachable"},
		r("OUTPUT", tcp, rjPortOutReset, "tcp-reset"),
		r("OUTPUT", udp, rjPortOutPort, "icmp6-port-unreachable"),
	}
	return map[ir.Family][]rjRule{ir.IPv4: v4, ir.IPv6: v6}
}

// Where a scenario's offending packet comes from.
const (
	rjFromGen      = iota // injected by gen towards fw (INPUT, FORWARD)
	rjFromGenBcast        // injected by gen with a broadcast Ethernet destination
	rjFromFw              // sent by fw itself through a raw socket (OUTPUT)
)

// rjScenario is one offending packet and what must come back.
type rjScenario struct {
	name string
	fam  ir.Family
	from int
	// pkt builds the offending IP packet in e with source port sport.
	pkt func(e *rjEnv, sport uint16) []byte
	// want holds facts of the reply's signature that must hold in every
	// topology; nil means no reply at all.
	want rjSig
	// diff lists facts on which xfw knowingly differs from the kernel:
	// fact -> {xfw's value, the kernel's value}.
	diff map[string][2]string
	// kernelSilent: a known difference where the kernel sends nothing
	// and xfw replies.
	kernelSilent bool
	// kernelNoMatch: the kernel's rules never see the packet (IPv4
	// fragments for the host are reassembled before INPUT); xfwNoMatch:
	// nor do xfw's (xfw leaves IPv4 later fragments for the host to the
	// kernel's reassembly, judging the first one for the datagram).
	kernelNoMatch, xfwNoMatch bool
}

// rjTCP, rjUDP and rjICMP build transports.
func rjTCP(sport, dport uint16, flags uint16, seq, ack uint32, payload []byte) nettest.TCP {
	return nettest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Seq: seq, Ack: ack, Window: 512, Payload: payload}
}

func rjUDP(sport, dport uint16, n int) nettest.UDP {
	return nettest.UDP{SrcPort: sport, DstPort: dport, Payload: bytes.Repeat([]byte{0xa5}, n)}
}

// rjIP builds an IP packet with a recognisable header: IPv4 ID 0x4242,
// IPv6 flow label 0x12345, TTL / hop limit 64.
func rjIP(src, dst netip.Addr, tos uint8, l4 nettest.Transport) []byte {
	if src.Is4() {
		return nettest.IPv4{Src: src, Dst: dst, TOS: tos, ID: 0x4242}.Packet(l4)
	}
	return nettest.IPv6{Src: src, Dst: dst, TrafficClass: tos, FlowLabel: 0x12345}.Packet(l4)
}

// rjFrag returns fragment i of an IP packet cut into 64-byte pieces.
func rjFrag(pkt []byte, i int) []byte {
	const size = 64
	var frags [][]byte
	var err error
	if pkt[0]>>4 == 4 {
		frags, err = nettest.FragmentIPv4(pkt, size)
	} else {
		frags, err = nettest.FragmentIPv6(pkt, size, 0x777)
	}
	if err != nil || i >= len(frags) {
		panic("rjFrag: cannot fragment")
	}
	return frags[i]
}

// rjRST and rjICMPErr return the facts of a RST or ICMP error reply, with
// what every reply has (TTL 64, right checksums). A RST answering a segment
// with ACK has that segment's ack as seq and only RST set, else seq 0, ack
// = seq + SYN + FIN + payload and RST|ACK; no options, window 0.
func rjRST(addr, seq, ack string, extra rjSig) rjSig {
	flags := "0x14"
	if ack == "0" {
		flags = "0x4"
	}
	s := rjSig{"addr": addr, "flags": flags, "seq": seq, "ack": ack, "ttl": "64", "l4csum": "true",
		"payload": "0", "doff": "5", "win": "0", "urg": "0"}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func rjICMPErr(addr, icmp, quoteLen string, extra rjSig) rjSig {
	s := rjSig{"addr": addr, "icmp": icmp, "ttl": "64", "l4csum": "true", "quote-len": quoteLen, "quote-is-prefix": "true"}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func rjScenarios() []rjScenario {
	v4, v6 := ir.IPv4, ir.IPv6
	ack, syn, fin, psh, rst := nettest.TCPAck, nettest.TCPSyn, nettest.TCPFin, nettest.TCPPsh, nettest.TCPRst
	gen := func(e *rjEnv, f ir.Family) netip.Addr { return rjAddr(e.topo.Gen, f) }
	fwin := func(e *rjEnv, f ir.Family) netip.Addr { return rjAddr(e.topo.FwIn, f) }
	fwout := func(e *rjEnv, f ir.Family) netip.Addr { return rjAddr(e.topo.FwOut, f) }
	sink := func(e *rjEnv, f ir.Family) netip.Addr { return rjAddr(e.topo.Sink, f) }
	ip4 := rjSig{"ihl": "20", "ipcsum": "true"}
	v4rst := func(s rjSig) rjSig {
		// nf_reject_iphdr_put: TOS 0, ID 0, DF; 40 bytes.
		return merge(s, ip4, rjSig{"tos": "0x00", "df": "true", "id-zero": "true", "len": "40"})
	}
	v6rst := func(s rjSig) rjSig {
		return merge(s, rjSig{"tclass": "0x00", "flowlabel-zero": "true", "len": "60", "ext": "[]"})
	}
	v4icmp := func(s rjSig) rjSig { return merge(s, ip4, rjSig{"df": "false"}) }
	quoteInput := rjSig{"quote-ttl-delta": "0"}
	quoteFwd := rjSig{"quote-ttl-delta": "1"}

	var sc []rjScenario
	add := func(s rjScenario) { sc = append(sc, s) }

	// ---- IPv4 INPUT ----
	for _, f := range []ir.Family{v4, v6} {
		fam := f
		wrap := v4rst
		if fam == v6 {
			wrap = v6rst
		}
		pfx := "v4"
		if fam == v6 {
			pfx = "v6"
		}
		add(rjScenario{name: pfx + "/input/tcp-reset/syn", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwin(e, fam), 0, rjTCP(sp, rjPortInReset, syn, 1000, 0, nil))
			},
			want: wrap(rjRST("fw-in>gen", "0", "1001", rjSig{"mac": "fw-in>gen"})),
		})
		add(rjScenario{name: pfx + "/input/tcp-reset/ack-data", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwin(e, fam), 0, rjTCP(sp, rjPortInReset, ack|psh, 5000, 9000, make([]byte, 10)))
			},
			want: wrap(rjRST("fw-in>gen", "9000", "0", nil)),
		})
		add(rjScenario{name: pfx + "/input/tcp-reset/fin-data-no-ack", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwin(e, fam), 0, rjTCP(sp, rjPortInReset, fin, 7000, 0, make([]byte, 5)))
			},
			want: wrap(rjRST("fw-in>gen", "0", "7006", nil)),
		})
		add(rjScenario{name: pfx + "/input/tcp-reset/syn-with-options", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				t := rjTCP(sp, rjPortInReset, syn, 0xfffffff0, 0, nil)
				t.Options = []byte{2, 4, 0x05, 0xb4, 1, 1, 4, 2} // MSS 1460, NOP, NOP, SACK permitted
				return rjIP(gen(e, fam), fwin(e, fam), 0, t)
			},
			want: wrap(rjRST("fw-in>gen", "0", "4294967281", nil)),
		})
		add(rjScenario{name: pfx + "/input/tcp-reset/no-reset-for-reset", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwin(e, fam), 0, rjTCP(sp, rjPortInReset, rst, 1, 0, nil))
			},
		})
		add(rjScenario{name: pfx + "/input/tcp-reset/no-reset-for-reset-ack", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwin(e, fam), 0, rjTCP(sp, rjPortInReset, rst|ack, 1, 2, nil))
			},
		})
	}

	// Port unreachable with an odd TOS and a small datagram.
	add(rjScenario{name: "v4/input/port-unreachable/tos", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0xb9, rjUDP(sp, rjPortInPort, 33))
		},
		// icmp_send: TOS = (TOS & IPTOS_TOS_MASK) | IPTOS_PREC_INTERNETCONTROL.
		want: v4icmp(rjICMPErr("fw-in>gen", "3/3 rest 0x0", "61", merge(quoteInput, rjSig{"mac": "fw-in>gen", "len": "89", "tos": "0xd8"}))),
	})
	add(rjScenario{name: "v4/input/port-unreachable/truncated-to-576", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, rjUDP(sp, rjPortInPort, 1000))
		},
		want: v4icmp(rjICMPErr("fw-in>gen", "3/3 rest 0x0", "548", merge(quoteInput, rjSig{"len": "576", "tos": "0xc0"}))),
	})
	add(rjScenario{name: "v4/input/net-unreachable", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, rjUDP(sp, rjPortInNet, 8))
		},
		want: v4icmp(rjICMPErr("fw-in>gen", "3/0 rest 0x0", "36", quoteInput)),
	})
	add(rjScenario{name: "v4/input/proto-unreachable", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, rjTCP(sp, rjPortInProto, syn, 1, 0, nil))
		},
		want: v4icmp(rjICMPErr("fw-in>gen", "3/2 rest 0x0", "40", quoteInput)),
	})
	add(rjScenario{name: "v4/input/admin-prohibited", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, rjUDP(sp, rjPortInAdmin, 0))
		},
		want: v4icmp(rjICMPErr("fw-in>gen", "3/13 rest 0x0", "28", quoteInput)),
	})
	add(rjScenario{name: "v4/input/host-unreachable/echo", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, nettest.ICMPv4{Type: rjICMPEchoRequest, Rest: uint32(sp)<<16 | 1, Payload: []byte("ping")})
		},
		want: v4icmp(rjICMPErr("fw-in>gen", "3/1 rest 0x0", "32", quoteInput)),
	})
	add(rjScenario{name: "v4/input/no-error-about-error", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			inner := rjIP(fwin(e, v4), gen(e, v4), 0, rjUDP(53, sp, 4))
			return rjIP(gen(e, v4), fwin(e, v4), 0, nettest.ICMPv4{Type: rjICMPDestUnreach, Code: 3, Payload: inner})
		},
	})
	add(rjScenario{name: "v4/input/no-error-about-unknown-icmp-type", fam: v4,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, nettest.ICMPv4{Type: rjUnknownICMPType, Rest: uint32(sp)})
		},
	})
	add(rjScenario{name: "v4/input/no-error-to-broadcast-mac", fam: v4, from: rjFromGenBcast,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v4), fwin(e, v4), 0, rjUDP(sp, rjPortInPort, 8))
		},
	})
	for _, f := range []ir.Family{v4, v6} {
		fam := f
		pfx, icmp := "v4", "3/3 rest 0x0"
		extra := rjSig{"mac": "fw-in>gen"}
		if fam == v6 {
			pfx, icmp = "v6", "1/4 rest 0x0"
		} else {
			extra = merge(extra, ip4)
		}
		// INPUT answers come from the address the packet was sent to.
		add(rjScenario{name: pfx + "/input/source-is-original-destination", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), fwout(e, fam), 0, rjUDP(sp, rjPortAnyToOut0, 16))
			},
			want: rjICMPErr("fw-out>gen", icmp, map[ir.Family]string{v4: "44", v6: "64"}[fam], merge(quoteInput, extra)),
		})
		// The first fragment of a datagram to a rejected port. IPv6
		// INPUT and FORWARD (both families) see the fragment, cannot
		// verify its transport checksum, and send nothing, on both
		// sides. IPv4 reassembles before INPUT (the kernel's error
		// would come, quoting the datagram, once every fragment
		// arrived): xfw answers the first fragment, quoting it.
		firstFrag := rjScenario{name: pfx + "/input/first-fragment", fam: fam, kernelNoMatch: fam == v4,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjFrag(rjIP(gen(e, fam), fwout(e, fam), 0, rjUDP(sp, rjPortAnyToOut0, 200)), 0)
			},
		}
		if fam == v4 {
			firstFrag.kernelSilent = true
			firstFrag.want = rjICMPErr("fw-out>gen", icmp, "84", merge(quoteInput, extra))
		}
		add(firstFrag)
		add(rjScenario{name: pfx + "/input/no-error-about-later-fragment", fam: fam, kernelNoMatch: fam == v4, xfwNoMatch: fam == v4,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjFrag(rjIP(gen(e, fam), fwout(e, fam), 0, rjUDP(sp, rjPortAnyToOut0, 200)), 1)
			},
		})
		add(rjScenario{name: pfx + "/forward/first-fragment", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjFrag(rjIP(gen(e, fam), sink(e, fam), 0, rjUDP(sp, rjPortAnyToOut0, 200)), 0)
			},
		})
		add(rjScenario{name: pfx + "/forward/no-error-about-later-fragment", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjFrag(rjIP(gen(e, fam), sink(e, fam), 0, rjUDP(sp, rjPortAnyToOut0, 200)), 1)
			},
		})
	}
	// A datagram with a bad checksum: the kernel verifies it before
	// answering, and so does xfw: no reply on either side.
	for _, f := range []ir.Family{v4, v6} {
		fam := f
		add(rjScenario{name: map[ir.Family]string{v4: "v4", v6: "v6"}[fam] + "/input/bad-udp-checksum", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				u := rjUDP(sp, rjPortInPort, 8)
				u.BadChecksum = true
				return rjIP(gen(e, fam), fwin(e, fam), 0, u)
			},
		})
	}

	// ---- IPv6 INPUT ICMPv6 errors ----
	add(rjScenario{name: "v6/input/port-unreachable/tclass", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v6), fwin(e, v6), 0xb9, rjUDP(sp, rjPortInPort, 33))
		},
		// icmp6_send: traffic class 0, an automatic flow label.
		want: rjICMPErr("fw-in>gen", "1/4 rest 0x0", "81", merge(quoteInput, rjSig{"mac": "fw-in>gen", "len": "129", "ext": "[]",
			"tclass": "0x00", "flowlabel-zero": "false"})),
	})
	add(rjScenario{name: "v6/input/port-unreachable/truncated-to-1280", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v6), fwin(e, v6), 0, rjUDP(sp, rjPortInPort, 1300))
		},
		want: rjICMPErr("fw-in>gen", "1/4 rest 0x0", "1232", merge(quoteInput, rjSig{"len": "1280"})),
	})
	// A transport length whose low byte plus the protocol carries out of
	// the pseudo-header's 32-bit word (UDP length 0x1f0 + 17): the
	// checksum check summed them in 32 bits and lost the carry, so the
	// packet looked corrupt and got no reply (found by xfw difftest).
	add(rjScenario{name: "v6/input/port-unreachable/pseudo-header-carry", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v6), fwin(e, v6), 0, rjUDP(sp, rjPortInPort, 0x1f0-8))
		},
		want: rjICMPErr("fw-in>gen", "1/4 rest 0x0", "536", merge(quoteInput, rjSig{"len": "584"})),
	})
	add(rjScenario{name: "v6/input/adm-prohibited", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v6), fwin(e, v6), 0, rjUDP(sp, rjPortInNet, 0))
		},
		want: rjICMPErr("fw-in>gen", "1/1 rest 0x0", "48", quoteInput),
	})
	add(rjScenario{name: "v6/input/addr-unreachable/echo", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			return rjIP(gen(e, v6), fwin(e, v6), 0, nettest.ICMPv6{Type: rjICMP6EchoRequest, Rest: uint32(sp)<<16 | 1, Payload: []byte("ping")})
		},
		want: rjICMPErr("fw-in>gen", "1/3 rest 0x0", "52", quoteInput),
	})
	add(rjScenario{name: "v6/input/no-error-about-error", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			inner := rjIP(fwin(e, v6), gen(e, v6), 0, rjUDP(53, sp, 4))
			return rjIP(gen(e, v6), fwin(e, v6), 0, nettest.ICMPv6{Type: rjICMP6DestUnreach, Code: 4, Payload: inner})
		},
	})
	add(rjScenario{name: "v6/input/extension-headers-quoted", fam: v6,
		pkt: func(e *rjEnv, sp uint16) []byte {
			h := nettest.IPv6{Src: gen(e, v6), Dst: fwin(e, v6), Ext: []nettest.ExtHeader{nettest.DestOpts(nettest.PadNOption(4))}}
			return h.Packet(rjUDP(sp, rjPortInPort, 8))
		},
		want: rjICMPErr("fw-in>gen", "1/4 rest 0x0", "64", quoteInput),
	})

	// ---- FORWARD ----
	for _, f := range []ir.Family{v4, v6} {
		fam := f
		pfx := "v4"
		wrap, wrapICMP := v4rst, v4icmp
		codes := map[uint16]string{rjPortFwdA: "3/1", rjPortFwdB: "3/9", rjPortFwdC: "3/10", rjPortFwdD: "3/3"}
		if fam == v6 {
			pfx = "v6"
			wrap, wrapICMP = v6rst, func(s rjSig) rjSig { return s }
			codes = map[uint16]string{rjPortFwdA: "1/0", rjPortFwdB: "1/5", rjPortFwdC: "1/6", rjPortFwdD: "1/3"}
		}
		add(rjScenario{name: pfx + "/forward/tcp-reset/syn", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), sink(e, fam), 0, rjTCP(sp, rjPortFwdReset, syn, 1000, 0, nil))
			},
			// The RST impersonates the destination.
			want: wrap(rjRST("sink>gen", "0", "1001", rjSig{"mac": "fw-in>gen"})),
		})
		add(rjScenario{name: pfx + "/forward/tcp-reset/ack", fam: fam,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(gen(e, fam), sink(e, fam), 0, rjTCP(sp, rjPortFwdReset, ack, 1000, 3000, []byte("data")))
			},
			want: wrap(rjRST("sink>gen", "3000", "0", nil)),
		})
		for _, port := range []uint16{rjPortFwdA, rjPortFwdB, rjPortFwdC, rjPortFwdD} {
			dport := port
			add(rjScenario{name: pfx + "/forward/icmp-" + codes[dport], fam: fam,
				pkt: func(e *rjEnv, sp uint16) []byte {
					return rjIP(gen(e, fam), sink(e, fam), 0, rjUDP(sp, dport, 20))
				},
				// The error comes from fw's address on the way back;
				// the quote shows the TTL forwarding decremented.
				want: wrapICMP(rjICMPErr("fw-in>gen", codes[dport]+" rest 0x0",
					map[ir.Family]string{v4: "48", v6: "68"}[fam], merge(quoteFwd, rjSig{"mac": "fw-in>gen", "quote-ttl": "63"}))),
			})
		}
	}

	// ---- OUTPUT (raw sockets in fw) ----
	for _, f := range []ir.Family{v4, v6} {
		fam := f
		pfx, wrap, icmp := "v4", v4rst, "3/3 rest 0x0"
		if fam == v6 {
			pfx, wrap, icmp = "v6", v6rst, "1/4 rest 0x0"
		}
		outRST := wrap(rjRST("sink>fw-out", "0", "1001", nil))
		// The kernel's IPv4 RST loops back through lo with a
		// CHECKSUM_PARTIAL checksum nothing completes (the field holds
		// the pseudo-header sum); xfw's takes lo too and carries the
		// same field (bpf/reject.h, xfw_rj_rst4_partial). IPv6's is
		// complete, and takes lo as well.
		outRST["l4csum"] = map[ir.Family]string{v4: "false", v6: "true"}[fam]
		add(rjScenario{name: pfx + "/output/tcp-reset/syn", fam: fam, from: rjFromFw,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(fwout(e, fam), sink(e, fam), 0, rjTCP(sp, rjPortOutReset, syn, 1000, 0, nil))
			},
			want: outRST,
		})
		add(rjScenario{name: pfx + "/output/port-unreachable", fam: fam, from: rjFromFw,
			pkt: func(e *rjEnv, sp uint16) []byte {
				return rjIP(fwout(e, fam), sink(e, fam), 0, rjUDP(sp, rjPortOutPort, 12))
			},
			want: rjICMPErr("", icmp, map[ir.Family]string{v4: "40", v6: "60"}[fam], quoteInput),
			// The kernel's error loops back through lo from the host's
			// own address; so does xfw's (IPv4: a device's input
			// routing would call its source a martian; both: it passes
			// lo's INPUT, as the kernel's).
		})
	}
	return sc
}

// merge returns the union of signatures (later ones win).
func merge(sigs ...rjSig) rjSig {
	out := rjSig{}
	for _, s := range sigs {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// rjRun sends the scenario's packet in e and returns the reply's signature,
// or nil when nothing answered.
func (e *rjEnv) rjRun(t *testing.T, sc rjScenario, sport uint16) rjSig {
	t.Helper()
	tp := e.topo
	orig := sc.pkt(e, sport)
	op, err := nettest.ParseIP(orig)
	if err != nil {
		t.Logf("%s: offending packet: %v", e.name, err)
	}
	// Every scenario's packet meets a REJECT rule: the rule counters say
	// the reply (or silence) is REJECT's, not the stack's own answer.
	before := e.hits(t)
	defer func() {
		noMatch := sc.xfwNoMatch
		if e.kernel {
			noMatch = sc.kernelNoMatch
		}
		if after := e.hits(t); after == before && !noMatch {
			t.Errorf("%s: no REJECT rule matched the packet", e.name)
		}
	}()
	var capt *nettest.Capture
	withMACs := true
	switch {
	case sc.from == rjFromFw:
		// Replies to fw's own packets reach its stack through lo.
		capt = rjCapture(t, tp.FwNS, "lo")
		withMACs = false
	default:
		capt = rjCapture(t, tp.GenNS, nettest.GenIfname)
	}
	defer capt.Stop()
	switch sc.from {
	case rjFromFw:
		err = rawSend(tp.FwNS, orig)
	case rjFromGenBcast:
		eth := tp.GenToFw()
		eth.Dst = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		err = tp.InjectFromGen(eth.Frame(orig))
	default:
		err = tp.InjectFromGen(tp.GenToFw().Frame(orig))
	}
	// The kernel's REJECT in OUTPUT fails the raw socket's send (NF_DROP
	// is EPERM) after sending its reply.
	if err != nil && !(e.kernel && sc.from == rjFromFw && errors.Is(err, syscall.EPERM)) {
		t.Fatalf("%s: send: %v", e.name, err)
	}
	wait := rjReplyWait
	if sc.want == nil {
		wait = rjSilenceWait
	}
	c, ok := capt.WaitFor(func(c nettest.Captured) bool { return rjAnswers(c.Packet, op) }, wait)
	if !ok {
		return nil
	}
	sig := e.signature(c.Packet, orig, withMACs)
	t.Logf("%s: %s\n\t%s", e.name, c.Packet, sig)
	return sig
}

func TestReject(t *testing.T) {
	// Auto: native XDP on the veths (lo has only generic).
	native := newRjEnv(t, "xfw-native", false)
	generic := newRjEnv(t, "xfw-generic", false)
	kern := newRjEnv(t, "kernel", true)
	native.load(t, rjRules(native.topo), XDPAuto)
	generic.load(t, rjRules(generic.topo), XDPGeneric)
	kern.load(t, rjRules(kern.topo), "")
	xfws := []*rjEnv{native, generic}

	t.Run("replies", func(t *testing.T) {
		for i, sc := range rjScenarios() {
			sc := sc
			sport := uint16(40000 + i)
			t.Run(sc.name, func(t *testing.T) {
				ksig := kern.rjRun(t, sc, sport)
				if sc.kernelSilent {
					if ksig != nil {
						t.Errorf("kernel answered (%s); the scenario expects the known difference \"kernel silent\"", ksig)
					}
				} else {
					rjCheckWant(t, kern.name, ksig, sc.want, sc.diff, 1)
				}
				for _, e := range xfws {
					sig := e.rjRun(t, sc, sport)
					rjCheckWant(t, e.name, sig, sc.want, sc.diff, 0)
					if sig == nil || ksig == nil {
						continue
					}
					// Compare with the kernel, modulo the known
					// differences.
					k := merge(ksig)
					for f, d := range sc.diff {
						if sig[f] == d[0] && k[f] == d[1] {
							delete(k, f)
							delete(sig, f)
						}
					}
					if d := rjSigDiff(sig, k); len(d) > 0 {
						t.Errorf("%s differs from the kernel:\n  %s\n  xfw:   %s\n  kernel:%s", e.name,
							joinLines(d), sig, ksig)
					}
				}
			})
		}
	})

	t.Run("sockets", func(t *testing.T) {
		for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
			for _, e := range []*rjEnv{native, generic, kern} {
				rjSockets(t, e, fam)
			}
		}
	})
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// rjCheckWant checks a reply's signature against the scenario's facts.
// idx picks the value of a known difference (0 xfw, 1 kernel).
func rjCheckWant(t *testing.T, who string, got, want rjSig, diff map[string][2]string, idx int) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s: expected no reply, got %s", who, got)
		}
		return
	}
	if got == nil {
		t.Errorf("%s: no reply (want %s)", who, want)
		return
	}
	for k, v := range want {
		if d, ok := diff[k]; ok {
			v = d[idx]
		}
		if v == "" {
			continue
		}
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q\n  reply:%s", who, k, got[k], v, got)
		}
	}
}

// rjSockets checks what applications see, in topology e, for family fam.
func rjSockets(t *testing.T, e *rjEnv, fam ir.Family) {
	tp := e.topo
	gen, fwin, sink := rjAddr(tp.Gen, fam), rjAddr(tp.FwIn, fam), rjAddr(tp.Sink, fam)
	name := func(s string) string { return e.name + "/" + fam.String() + "/" + s }

	// (1) INPUT tcp-reset: connect is refused at once; the RST answers
	// the SYN: seq 0, ack = ISN + 1, RST|ACK.
	any := netip.IPv4Unspecified()
	if fam == ir.IPv6 {
		any = netip.IPv6Unspecified()
	}
	// Listeners everywhere: a refusal can only be REJECT's.
	listen := func(t *testing.T, ns string, tcp, udp uint16) {
		nettest.StartTCPServer(t, ns, netip.AddrPortFrom(any, tcp))
		nettest.StartUDPServer(t, ns, netip.AddrPortFrom(any, udp), nettest.Echo())
	}

	t.Run(name("input-tcp-reset"), func(t *testing.T) {
		listen(t, tp.FwNS, rjPortInReset, rjPortInPort)
		// Control: a port no rule rejects.
		nettest.StartTCPServer(t, tp.FwNS, netip.AddrPortFrom(any, rjPortControl))
		if a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(fwin, rjPortControl)); a.Outcome != nettest.OK {
			t.Fatalf("control connect: %s, want ok", a)
		}
		capt := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(c nettest.Captured) bool {
			return c.Packet != nil && c.Protocol == nettest.ProtoTCP
		})
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(fwin, rjPortInReset))
		if a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
			t.Fatalf("connect: %s, want refused within %v", a, rjQuickRefusal)
		}
		// Wait for the RST (frames are read in order, the SYN first).
		rc, ok := capt.WaitFor(func(c nettest.Captured) bool {
			return !c.Outgoing && c.IsTCPReset() && c.SrcPort == rjPortInReset
		}, rjReplyWait)
		var syn, rst *nettest.Packet
		if ok {
			rst = rc.Packet
		}
		for _, c := range capt.Frames() {
			if c.Outgoing && c.TCPFlags == nettest.TCPSyn && c.DstPort == rjPortInReset && c.SrcPort == rc.DstPort {
				syn = c.Packet
				break
			}
		}
		if rst != nil && syn == nil {
			t.Fatalf("no SYN captured in gen")
		}
		var synSeq uint32
		if syn != nil {
			synSeq = syn.Seq
		}
		if rst == nil {
			t.Fatalf("no RST captured in gen")
		}
		if rst.Seq != 0 || rst.Ack != synSeq+1 || rst.TCPFlags != nettest.TCPRst|nettest.TCPAck ||
			rst.Src != fwin || rst.Dst != gen || rst.TTL != 64 {
			t.Errorf("RST %s seq %d ack %d ttl %d, want from %s, seq 0, ack %d, RST|ACK, ttl 64",
				rst, rst.Seq, rst.Ack, rst.TTL, fwin, synSeq+1)
		}
	})

	// (2) INPUT icmp-port-unreachable for UDP: a connected socket gets
	// ECONNREFUSED; the error quotes the datagram.
	t.Run(name("input-udp-port-unreachable"), func(t *testing.T) {
		listen(t, tp.FwNS, rjPortInReset, rjPortInPort)
		capt := rjCapture(t, tp.GenNS, nettest.GenIfname)
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(fwin, rjPortInPort), []byte("hello"), nettest.ExpectReply())
		if a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
			t.Fatalf("udp: %s, want refused within %v", a, rjQuickRefusal)
		}
		c, ok := capt.WaitFor(func(c nettest.Captured) bool {
			return c.IsICMPUnreachable() && c.Inner != nil && c.Inner.SrcPort == a.Local.Port()
		}, rjReplyWait)
		if !ok {
			t.Fatalf("no ICMP error captured in gen")
		}
		s := e.signature(c.Packet, nil, true)
		want := rjSig{"addr": "fw-in>gen", "mac": "fw-in>gen", "ttl": "64", "l4csum": "true",
			"quote-addr": "gen>fw-in", "quote-len": "33"}
		if fam == ir.IPv4 {
			want["icmp"], want["ipcsum"], want["quote-ipcsum"] = "3/3 rest 0x0", "true", "true"
		} else {
			want["icmp"], want["quote-len"] = "1/4 rest 0x0", "53"
		}
		if c.Inner.DstPort != rjPortInPort {
			t.Errorf("quoted destination port %d, want %d", c.Inner.DstPort, rjPortInPort)
		}
		rjCheckWant(t, e.name, s, want, nil, 0)
	})

	// (3) FORWARD: the client sees the reset or the ICMP error.
	t.Run(name("forward"), func(t *testing.T) {
		listen(t, tp.SinkNS, rjPortFwdReset, rjPortFwdC)
		if a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(sink, rjPortFwdReset)); a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
			t.Errorf("tcp-reset: %s, want refused", a)
		}
		// A connected UDP socket hears of "fatal" errors only (without
		// IP_RECVERR): icmp-host-prohibited is EHOSTUNREACH,
		// icmp6-reject-route EACCES.
		wantErrno := syscall.EHOSTUNREACH
		if fam == ir.IPv6 {
			wantErrno = syscall.EACCES
		}
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, rjPortFwdC), []byte("x"), nettest.ExpectReply())
		if a.Outcome != nettest.Unreachable || a.Errno != wantErrno {
			t.Errorf("udp: %s (errno %v), want %v", a, a.Errno, wantErrno)
		}
	})

	// (4) OUTPUT: fw's own connections are refused (the reply goes to
	// the local stack).
	t.Run(name("output"), func(t *testing.T) {
		listen(t, tp.SinkNS, rjPortOutReset, rjPortOutPort)
		if a := nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(sink, rjPortOutReset)); a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
			t.Errorf("tcp-reset: %s, want refused", a)
		}
		a := nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(sink, rjPortOutPort), []byte("x"), nettest.ExpectReply())
		// The kernel's REJECT makes send() itself fail with EPERM (the
		// verdict is NF_DROP); xfw's send succeeds and recv is refused.
		if e.kernel {
			if a.Outcome != nettest.NotPermitted {
				t.Errorf("udp: %s, want not permitted (EPERM)", a)
			}
		} else if a.Outcome != nettest.Refused {
			t.Errorf("udp: %s, want refused", a)
		}
	})

	// INPUT on loopback: fw connecting to itself through lo, where xfw's
	// XDP runs in generic mode and answers with XDP_TX on lo.
	t.Run(name("input-loopback"), func(t *testing.T) {
		listen(t, tp.FwNS, rjPortInReset, rjPortInPort)
		lo := netip.IPv6Loopback()
		if fam == ir.IPv4 {
			lo = netip.MustParseAddr("127.0.0.1")
		}
		if a := nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(lo, rjPortInReset)); a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
			t.Errorf("tcp-reset: %s, want refused", a)
		}
		if a := nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(lo, rjPortInPort), []byte("x"), nettest.ExpectReply()); a.Outcome != nettest.Refused {
			t.Errorf("udp: %s, want refused", a)
		}
	})

	// OUTPUT on loopback: fw connecting to its own address.
	t.Run(name("output-loopback"), func(t *testing.T) {
		listen(t, tp.FwNS, rjPortOutReset, rjPortOutPort)
		lo := netip.IPv6Loopback()
		if fam == ir.IPv4 {
			lo = netip.MustParseAddr("127.0.0.1")
		}
		for _, dst := range []netip.Addr{fwin, lo} {
			if a := nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(dst, rjPortOutReset)); a.Outcome != nettest.Refused || a.Elapsed > rjQuickRefusal {
				t.Errorf("tcp-reset to %s: %s, want refused", dst, a)
			}
		}
		a := nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(fwin, rjPortOutPort), []byte("x"), nettest.ExpectReply())
		if e.kernel {
			if a.Outcome != nettest.NotPermitted {
				t.Errorf("udp: %s, want not permitted (EPERM)", a)
			}
		} else if a.Outcome != nettest.Refused {
			t.Errorf("udp: %s, want refused", a)
		}
	})
}
