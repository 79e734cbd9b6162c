package difftest_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// rawSendProbes protocol-255 datagrams of rawSendPayload bytes hold more
// than a socket's default receive buffer (net.core.rmem_default, 212,992
// bytes: about a hundred such datagrams).
const (
	rawSendProbes  = 160
	rawSendPayload = 1000
)

// TestRawSendSocketRead checks the tester's own socket: fw sends its
// packets from an IPPROTO_RAW socket, which also receives every
// protocol-255 datagram delivered to fw. Left unread, its queue filled up
// during a long campaign and from then on fw's stack answered each such
// datagram with "protocol unreachable", at a point that depended on the
// truesize of every packet queued before, not the same on both sides (an
// intermittent difference late in long nat campaigns). Read as the other
// raw sockets are, each datagram is one observation on each side, and
// none is answered.
func TestRawSendSocketRead(t *testing.T) {
	s := session(t, ir.IPv4)
	p := s.Plan()
	var probes []difftest.Probe
	for i := 0; i < rawSendProbes; i++ {
		data := bytes.Repeat([]byte{byte(i)}, rawSendPayload)
		pkt := nettest.IPv4{Src: p.Gen, Dst: p.FwIn}.Packet(nettest.Raw{Proto: 255, Data: data})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		probes = append(probes, difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame},
			Note: fmt.Sprintf("protocol 255 to fw, %d", i)})
	}
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p 255\nCOMMIT\n"
	c := difftest.Case{Name: "protocol 255 to fw", Ruleset: ruleset, Corpus: &difftest.Corpus{Probes: probes}}
	checkObserved(t, s, c, [2]int{rawSendProbes, rawSendProbes}, "every datagram delivered to fw's raw socket, none answered")
}
