package difftest

import "testing"

// Probes of the conformance dump ipt-save-filter.txt with seed 4
// (xfw-difftest --family 4 --seed 4 --packets 500), subnet 151.
const (
	// A lone first fragment from gen: TCP SYN, 9 bytes of data.
	loneFirstHex = "02787497010102787497010208004500003100002000ff0683950a9701020a9702021f9000160000000000000000500202007b6c0000616263646566676869"
	// A SYN in two fragments, the first cutting its options (data
	// offset 7) after 4 of their 8 bytes.
	splitFirstHex = "02787497010102787497010208004500002c00002000ff06839a0a9701020a970202005001be000000000000000070020200b2830000020405b4"
	splitLastHex  = "02787497010102787497010208004500002900000003ff06a39a0a9701020a970202010104026162636465666768696a6b6c6d6e6f7071"
	// fw's own lone first fragment, protocol 51.
	// fw's IPv6 UDP datagram in an atomic fragment (offset 0, M clear).
	atomic6Hex = "6000000000112c40fd000042000200000000000000000001fd00004200020000000000000000000211000000000000010fa0003500090000ff"
	fwLoneHex  = "4500002f000020004033df6b0a9702010a9764026162636465666768696a6b6c6d6e6f707172737475767778797a61"
)

// TestProbeFragClass checks which probes meet a documented difference
// of the kernel's reassembly: lone first fragments and datagrams whose
// first fragment cuts the transport header, not whole packets, later
// fragments alone or datagrams whose header the first fragment holds.
func TestProbeFragClass(t *testing.T) {
	whole := hexFrame(t, "0278749701010278749701020800450000280000000040068e9a0a9701020a9702021f9000160000000000000000500202007b750000")
	tests := []struct {
		name string
		p    Probe
		want fragClass
	}{
		{"lone first fragment", Probe{From: FromGen, Frames: [][]byte{hexFrame(t, loneFirstHex)}}, fragLoneFirst},
		{"fw's lone first fragment", Probe{From: FromFw, Frames: [][]byte{hexFrame(t, fwLoneHex)}}, fragLoneFirst},
		{"header split", Probe{From: FromGen, Frames: [][]byte{hexFrame(t, splitFirstHex), hexFrame(t, splitLastHex)}}, fragSplitHeader},
		{"header whole in the first", Probe{From: FromGen, Frames: [][]byte{hexFrame(t, loneFirstHex), hexFrame(t, splitLastHex)}}, fragOther},
		{"lone later fragment", Probe{From: FromGen, Frames: [][]byte{hexFrame(t, splitLastHex)}}, fragOther},
		{"IPv6 fragment header cut short", Probe{From: FromFw, Frames: [][]byte{hexFrame(t, "6000003f00032c40fe80000000000000000000000000000020010db80001c541a5fa9acff73aac77110001")}}, fragCutShort},
		{"IPv6 atomic fragment", Probe{From: FromFw, Frames: [][]byte{hexFrame(t, atomic6Hex)}}, fragAtomic},
		{"whole packet", Probe{From: FromGen, Frames: [][]byte{whole}}, fragNone},
	}
	for _, tt := range tests {
		if got := probeFragClass(tt.p); got != tt.want {
			t.Errorf("%s: class %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestExplainFragments checks that only the documented differences are
// excused: a lone first fragment the kernel showed nothing of, counters
// the run without the held probes agrees on; not a lone first fragment
// the kernel saw, another probe's difference that vanished without them,
// nor anything when the run without them still differs.
func TestExplainFragments(t *testing.T) {
	held := map[int]fragClass{1: fragLoneFirst, 3: fragSplitHeader}
	clean := &Outcome{Result: &Result{}}
	index := []int{0, 2, 4}
	lone := Difference{Kind: DiffProbe, Probe: 1, XFW: []string{"at sink: the probe"}}
	split := Difference{Kind: DiffProbe, Probe: 3, Kernel: []string{"at sink: the probe"}}
	counters := Difference{Kind: DiffCounters, Probe: -1, Subject: ":FORWARD DROP", Kernel: []string{"[1:2]"}, XFW: []string{"[2:4]"}}
	if why, ok := explainFragments([]Difference{lone, split, counters}, held, clean, index, nil); !ok || len(why) != 3 {
		t.Errorf("documented differences: %v %v", why, ok)
	}
	seen := Difference{Kind: DiffProbe, Probe: 1, Kernel: []string{"at sink: the probe"}}
	if _, ok := explainFragments([]Difference{seen}, held, clean, index, nil); ok {
		t.Error("a lone first fragment the kernel delivered was excused")
	}
	whole := Difference{Kind: DiffProbe, Probe: 5, XFW: []string{"at sink: the probe"}}
	if _, ok := explainFragments([]Difference{whole}, map[int]fragClass{5: fragNone}, clean, index, nil); ok {
		t.Error("a probe difference of a datagram whose first fragment holds its header was excused")
	}
	reply := Difference{Kind: DiffProbe, Probe: 5, XFW: []string{"at gen: ICMP error quoting it: x"}, Kernel: []string{"fw's sockets got the probe: y"}}
	if _, ok := explainFragments([]Difference{reply}, map[int]fragClass{5: fragOther}, clean, index, nil); !ok {
		t.Error("replies and deliveries to fw of a reassembled datagram were not excused")
	}
	if _, ok := explainFragments([]Difference{whole}, map[int]fragClass{5: fragOther}, clean, index, nil); ok {
		t.Error("a forwarded copy of a datagram whose first fragment holds its header was excused")
	}
	other := Difference{Kind: DiffProbe, Probe: 2, XFW: []string{"at sink: the probe"}}
	if _, ok := explainFragments([]Difference{lone, other}, held, clean, index, nil); ok {
		t.Error("another probe's difference, gone without the held probes, was excused")
	}
	still := &Outcome{Result: &Result{Differences: []Difference{{Kind: DiffProbe, Probe: 1, XFW: []string{"x"}}}}}
	if _, ok := explainFragments([]Difference{lone, other}, held, still, index, nil); ok {
		t.Error("excused while the run without the held probes still differs")
	}
}

// TestKernelReassembles checks which rulesets make the kernel reassemble
// fragments before its chains: those with a rule that tracks.
func TestKernelReassembles(t *testing.T) {
	for text, want := range map[string]bool{
		"*filter\n-A block ! -i ppp0 -m state --state NEW -j ACCEPT\nCOMMIT\n":           true,
		"*filter\n-A INPUT -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n":             true,
		"*filter\n[0:0] -A INPUT -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n":       true,
		"*nat\n-A POSTROUTING -o out0 -j MASQUERADE\nCOMMIT\n":                           true,
		"*filter\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n":                        false,
		"*raw\n-A PREROUTING -j NOTRACK\nCOMMIT\n":                                       false,
		"*filter\n# -A INPUT -m state --state NEW -j ACCEPT\n-A INPUT -j DROP\nCOMMIT\n": false,
	} {
		if got := kernelReassembles(text); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}

// TestExplainStackReplyCounters checks the held packets fw sends itself
// from link-local sources it does not hold: only counters of chains
// OUTPUT reaches, higher in the kernel, are excused, and no probe
// difference of theirs.
func TestExplainStackReplyCounters(t *testing.T) {
	held := map[int]fragClass{1: heldStackReply}
	clean := &Outcome{Result: &Result{}}
	index := []int{0, 2}
	output := map[string]bool{"OUTPUT": true, "OUTPUT_direct": true}
	more := Difference{Kind: DiffCounters, Probe: -1, Subject: ":OUTPUT ACCEPT", Kernel: []string{"[3:238]"}, XFW: []string{"[2:131]"}}
	if _, ok := explainFragments([]Difference{more}, held, clean, index, output); !ok {
		t.Error("OUTPUT's counter higher in the kernel was not excused")
	}
	fewer := Difference{Kind: DiffCounters, Probe: -1, Subject: ":OUTPUT ACCEPT", Kernel: []string{"[2:131]"}, XFW: []string{"[3:238]"}}
	input := Difference{Kind: DiffCounters, Probe: -1, Subject: ":INPUT ACCEPT", Kernel: []string{"[3:238]"}, XFW: []string{"[2:131]"}}
	probe := Difference{Kind: DiffProbe, Probe: 1, Kernel: []string{"fw's sockets got the probe: x"}}
	for _, d := range []Difference{fewer, input, probe} {
		if _, ok := explainFragments([]Difference{d}, held, clean, index, output); ok {
			t.Errorf("excused: %s", d)
		}
	}
}
