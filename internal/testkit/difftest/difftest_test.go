package difftest

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// These tests need no root: the generators, markers, attribution and
// comparison. tests/difftest runs the oracle itself.

// genSeeds is how many random rulesets per family the generator tests load.
const genSeeds = 200

func TestGenerateRulesetLoads(t *testing.T) {
	for _, tc := range []struct {
		name string
		fam  ir.Family
		opts GenOptions
	}{
		{"ipv4", ir.IPv4, GenOptions{}},
		{"ipv6", ir.IPv6, GenOptions{}},
		{"ipv4 stateful", ir.IPv4, GenOptions{Conntrack: true}},
		{"ipv6 stateful", ir.IPv6, GenOptions{Conntrack: true}},
	} {
		fam := tc.fam
		t.Run(tc.name, func(t *testing.T) {
			plan := NewPlan(fam, DefaultSubnet)
			for seed := int64(0); seed < genSeeds; seed++ {
				text := GenerateRuleset(seed, plan, tc.opts)
				if again := GenerateRuleset(seed, plan, tc.opts); again != text {
					t.Fatalf("seed %d: not deterministic", seed)
				}
				rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{Sets: SetLookup(text)})
				if err != nil {
					t.Fatalf("seed %d: xfw's parser refuses the ruleset: %v\n%s", seed, err, text)
				}
				if _, err := compiler.Compile(rs, compiler.Options{}); err != nil {
					t.Fatalf("seed %d: xfw's compiler refuses the ruleset: %v\n%s", seed, err, text)
				}
			}
		})
	}
}

func TestGenerateRulesetCoverage(t *testing.T) {
	// Over a few seeds, every construct the generator promises appears.
	want := []string{"-j LOG", "-j REJECT", "-j RETURN", "-g ", "-m multiport", "--ports", "-m iprange",
		"-m length", "-m comment", "-m tcp", "-m udp", "--tcp-flags", "--syn", "! -", "-i +", ":DROP", "-f",
		"--reject-with tcp-reset", "in+", "-m mac", "-m ttl"}
	var all strings.Builder
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	for seed := int64(0); seed < genSeeds; seed++ {
		all.WriteString(strings.ReplaceAll(GenerateRuleset(seed, plan, GenOptions{}), " DROP [", ":DROP ["))
	}
	text := all.String()
	for _, w := range want {
		if !strings.Contains(text, w) && !(w == ":DROP" && strings.Contains(text, "DROP [0:0]")) {
			t.Errorf("no generated ruleset contains %q", w)
		}
	}
}

func TestGenerateCorpus(t *testing.T) {
	tests := []struct {
		name  string
		fam   ir.Family
		rules string
	}{
		{"empty v4", ir.IPv4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"},
		{"random v4", ir.IPv4, GenerateRuleset(7, NewPlan(ir.IPv4, DefaultSubnet), GenOptions{})},
		{"random v6", ir.IPv6, GenerateRuleset(7, NewPlan(ir.IPv6, DefaultSubnet), GenOptions{})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := NewPlan(tc.fam, DefaultSubnet)
			c, err := GenerateCorpus(3, plan, tc.rules, 500)
			if err != nil {
				t.Fatal(err)
			}
			// 500, and the bursts aimed at the rate rules (rulegen_rate.go).
			if want := 500 + len(rateBursts(3, plan, tc.rules)); len(c.Probes) != want {
				t.Fatalf("%d probes, want %d", len(c.Probes), want)
			}
			paths := map[Path]int{}
			for i, p := range c.Probes {
				paths[p.Path]++
				if len(p.Frames) == 0 {
					t.Fatalf("probe %d has no frame", i)
				}
				if p.From == FromFw && (p.decode(p.Frames[0]) == nil || !p.decode(p.Frames[0]).Dst.IsValid()) {
					t.Errorf("probe %d from fw has no destination: %s", i, p)
				}
			}
			for _, path := range []Path{PathInput, PathForward, PathOutput} {
				if paths[path] == 0 {
					t.Errorf("no probe aimed at %s", path)
				}
			}
			var b strings.Builder
			if err := c.Format(&b); err != nil {
				t.Fatal(err)
			}
			back, err := ParseCorpus(strings.NewReader(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Probes {
				if FormatProbe(back.Probes[i]) != FormatProbe(c.Probes[i]) {
					t.Fatalf("probe %d does not survive the corpus format", i)
				}
			}
		})
	}
}

func TestGenerateStatefulCorpus(t *testing.T) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			plan := NewPlan(fam, DefaultSubnet)
			rules := GenerateRuleset(5, plan, GenOptions{Conntrack: true})
			opts := StatefulOptions{Probes: 300, Conversations: 80}
			c, err := GenerateStatefulCorpus(5, plan, rules, opts)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := GenerateStatefulCorpus(5, plan, rules, opts)
			var b, b2 strings.Builder
			if err := c.Format(&b); err != nil {
				t.Fatal(err)
			}
			_ = again.Format(&b2)
			if b.String() != b2.String() {
				t.Fatal("not deterministic")
			}
			back, err := ParseCorpus(strings.NewReader(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			independent, steps, kinds := 0, map[int]int{}, map[string]int{}
			// The TCP segments of one flow, in order: sequence numbers of
			// a conversation stay in the range markers never reach.
			for i, p := range c.Probes {
				if FormatProbe(back.Probes[i]) != FormatProbe(p) || back.Probes[i].Step != p.Step || back.Probes[i].KeepL4 != p.KeepL4 {
					t.Fatalf("probe %d does not survive the corpus format", i)
				}
				if isFragmented(p) {
					t.Errorf("probe %d is a fragment: %s", i, p)
				}
				if trackedAsGeneric(p) {
					t.Errorf("probe %d is SCTP, DCCP or GRE: %s", i, p)
				}
				if p.Step == 0 {
					independent++
					continue
				}
				steps[p.Step]++
				if !p.KeepL4 {
					t.Errorf("conversation probe %d has L4 markers", i)
				}
				if _, kind, ok := strings.Cut(p.Note, "("); ok {
					kinds[strings.Fields(kind)[0]]++
				}
				if pkt := p.decode(p.Frames[0]); pkt != nil && pkt.Protocol == nettest.ProtoTCP && pkt.TCPFlags&nettest.TCPRst == 0 {
					if pkt.Seq>>tcpMarkerShift <= maxMarker(true)/2 {
						t.Errorf("probe %d: sequence number %#x in the markers' range", i, pkt.Seq)
					}
				}
			}
			// The probes, and the bursts aimed at the rate rules.
			if want := opts.Probes + len(rateBursts(5, plan, rules)); independent != want {
				t.Errorf("%d independent probes, want %d", independent, want)
			}
			if len(steps) < 3 || steps[1] != opts.Conversations {
				t.Errorf("steps %v: want every conversation to start at step 1", steps)
			}
			for _, k := range []string{"tcp", "udp", "icmp", "stray"} {
				if kinds[k] == 0 {
					t.Errorf("no %s conversation (%v)", k, kinds)
				}
			}
		})
	}
}

func TestGenerateRulesetStateful(t *testing.T) {
	var all strings.Builder
	for seed := int64(0); seed < genSeeds; seed++ {
		all.WriteString(GenerateRuleset(seed, NewPlan(ir.IPv4, DefaultSubnet), GenOptions{Conntrack: true}))
	}
	text := all.String()
	for _, w := range []string{"-m conntrack --ctstate", "-m conntrack ! --ctstate", "--ctstatus", "NONE", "--ctdir REPLY", "--ctdir ORIGINAL",
		"--ctproto", "-m state --state", "-m state ! --state", "INVALID", "UNTRACKED",
		"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT", "-A FORWARD -m state --state RELATED,ESTABLISHED -j ACCEPT",
		"-A OUTPUT -m conntrack --ctstate INVALID -j DROP"} {
		if !strings.Contains(text, w) {
			t.Errorf("no stateful ruleset contains %q", w)
		}
	}
}

func TestParseCorpusErrors(t *testing.T) {
	tests := []struct{ name, line string }{
		{"fields", "gen forward"},
		{"origin", "moon forward 00112233445566778899aabbccdd"},
		{"path", "gen sideways 00112233445566778899aabbccdd"},
		{"hex", "gen forward zz"},
		{"short frame", "gen forward 0011"},
		{"bad step", "gen forward step=x 00112233445566778899aabbccdd"},
		{"unknown option", "gen forward fast 00112233445566778899aabbccdd"},
		{"too many fields", "gen forward step=1 keep-l4 extra 00112233445566778899aabbccdd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseCorpus(strings.NewReader(tc.line + "\n")); err == nil {
				t.Errorf("%q: no error", tc.line)
			}
		})
	}
}

// ipv4HeaderOK reports whether an IPv4 header's checksum is right.
func ipv4HeaderOK(b []byte) bool {
	return nettest.Checksum(b[:int(b[0]&0xf)*4]) == 0
}

func TestSetMarker(t *testing.T) {
	src4, dst4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	src6, dst6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	tests := []struct {
		name   string
		pkt    []byte
		marker uint32
		check  func(t *testing.T, p *nettest.Packet, b []byte)
	}{
		{"ipv4 udp", nettest.IPv4{Src: src4, Dst: dst4}.Packet(nettest.UDP{SrcPort: 1, DstPort: 2}), 0x1234,
			func(t *testing.T, p *nettest.Packet, b []byte) {
				if p.IPv4ID != 0x1234 || !ipv4HeaderOK(b) {
					t.Errorf("id %#x, header checksum ok %v", p.IPv4ID, ipv4HeaderOK(b))
				}
			}},
		{"ipv4 bad checksum stays bad", nettest.IPv4{Src: src4, Dst: dst4, BadChecksum: true}.Packet(nettest.UDP{}), 7,
			func(t *testing.T, p *nettest.Packet, b []byte) {
				if ipv4HeaderOK(b) {
					t.Error("a wrong header checksum became right")
				}
			}},
		{"ipv4 tcp", nettest.IPv4{Src: src4, Dst: dst4}.Packet(nettest.TCP{Flags: nettest.TCPAck}), 99,
			func(t *testing.T, p *nettest.Packet, b []byte) {
				if p.Seq != 99<<tcpMarkerShift || p.Ack != 99<<tcpMarkerShift|tcpAckTag {
					t.Errorf("seq %#x ack %#x", p.Seq, p.Ack)
				}
				want := nettest.TCP{Flags: nettest.TCPAck, Seq: p.Seq, Ack: p.Ack}.Marshal(src4, dst4)
				if got := b[ipv4HeaderLen:]; binary.BigEndian.Uint16(got[16:]) != binary.BigEndian.Uint16(want[16:]) {
					t.Errorf("TCP checksum %#x, want %#x", binary.BigEndian.Uint16(got[16:]), binary.BigEndian.Uint16(want[16:]))
				}
			}},
		{"ipv4 echo", nettest.IPv4{Src: src4, Dst: dst4}.Packet(nettest.ICMPv4{Type: nettest.ICMPv4EchoRequest}), 5,
			func(t *testing.T, p *nettest.Packet, b []byte) {
				if p.ICMPRest != 5 || nettest.Checksum(b[ipv4HeaderLen:]) != 0 {
					t.Errorf("rest %d, ICMP checksum ok %v", p.ICMPRest, nettest.Checksum(b[ipv4HeaderLen:]) == 0)
				}
			}},
		{"ipv6 tcp after extension headers", nettest.IPv6{Src: src6, Dst: dst6, Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.PadNOption(4))}}.Packet(nettest.TCP{}), 0xabcde,
			func(t *testing.T, p *nettest.Packet, b []byte) {
				if flowLabel(b) != 0xabcde || p.Seq != 0xabcde<<tcpMarkerShift {
					t.Errorf("flow label %#x seq %#x", flowLabel(b), p.Seq)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), tc.pkt...)
			if !setMarker(b, 0, tc.marker, false) {
				t.Fatal("no marker written")
			}
			p, _ := nettest.ParseIP(b)
			tc.check(t, p, b)
		})
	}
}

func TestCandidates(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	probe := nettest.IPv4{Src: src, Dst: dst, ID: 42}.Packet(nettest.UDP{SrcPort: 1, DstPort: 2})
	errMsg := nettest.IPv4{Src: dst, Dst: src, ID: 7}.Packet(nettest.ICMPv4{Type: 3, Code: 3, Payload: probe})
	rst := nettest.IPv4{Src: dst, Dst: src}.Packet(nettest.TCP{Flags: nettest.TCPRst, Seq: 42 << tcpMarkerShift})
	tests := []struct {
		name string
		pkt  []byte
		want candidate
	}{
		{"copy", probe, candidate{marker: 42, rel: relCopy, src: src, dst: dst}},
		{"quote", errMsg, candidate{marker: 42, rel: relQuote, src: src, dst: dst}},
		{"answer", rst, candidate{marker: 42, rel: relAnswer, src: src, dst: dst}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := nettest.ParseIP(tc.pkt)
			for _, c := range candidates(p, 0) {
				if c == tc.want {
					return
				}
			}
			t.Errorf("candidates %+v lack %+v", candidates(p, 0), tc.want)
		})
	}
}

func TestLogLines(t *testing.T) {
	copyLine := "dt: IN=in0 OUT=out0 MAC=02:00 SRC=10.0.0.1 DST=10.0.0.2 LEN=40 TOS=0x00 PREC=0x00 TTL=63 ID=42 PROTO=UDP SPT=1 DPT=2 LEN=20 "
	reply := "x IN= OUT=in0 SRC=10.0.0.2 DST=10.0.0.1 LEN=68 TOS=0x00 PREC=0xC0 TTL=64 ID=999 PROTO=ICMP TYPE=3 CODE=3 [SRC=10.0.0.1 DST=10.0.0.2 LEN=40 TOS=0x00 PREC=0x00 TTL=63 ID=42 PROTO=UDP SPT=1 DPT=2 LEN=20 ] "
	uid := "x IN= OUT=in0 SRC=10.0.0.1 DST=10.0.0.2 LEN=40 TOS=0x00 PREC=0x00 TTL=64 ID=42 PROTO=UDP SPT=1 DPT=2 LEN=20 UID=0 GID=0 "
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	tests := []struct {
		name     string
		line     string
		want     candidate
		normWant string
	}{
		{"copy", copyLine, candidate{42, relCopy, src, dst}, copyLine},
		{"quote", reply, candidate{42, relQuote, src, dst}, strings.Replace(reply, "ID=999", "ID=?", 1)},
		{"uid", uid, candidate{42, relCopy, src, dst}, strings.Replace(uid, " UID=0 GID=0", "", 1)},
		// A prefix with brackets ("[UFW BLOCK] "): the quote is the
		// bracket after IN=.
		{"bracketed prefix", strings.Replace(reply, "x IN=", "[UFW BLOCK] IN=", 1), candidate{42, relQuote, src, dst},
			strings.Replace(strings.Replace(reply, "x IN=", "[UFW BLOCK] IN=", 1), "ID=999", "ID=?", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			found := false
			for _, c := range logCandidates(tc.line) {
				if c == tc.want {
					found = true
				}
			}
			if !found {
				t.Errorf("candidates %+v lack %+v", logCandidates(tc.line), tc.want)
			}
			if got := normLogLine(tc.line, tc.want.rel); got != tc.normWant {
				t.Errorf("normalised\n got %q\nwant %q", got, tc.normWant)
			}
		})
	}
}

func TestCompareSaves(t *testing.T) {
	base := "*filter\n:INPUT ACCEPT [1:40]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:U - [0:0]\n%s\nCOMMIT\n"
	tests := []struct {
		name         string
		kernel, xfw  string
		kinds        []DiffKind
		firstSubject string
	}{
		{"same", "[2:80] -A INPUT -p tcp -j ACCEPT", "[2:80] -A INPUT -p tcp -j ACCEPT", nil, ""},
		{"counters", "[2:80] -A INPUT -p tcp -j ACCEPT", "[1:40] -A INPUT -p tcp -j ACCEPT", []DiffKind{DiffCounters}, "-A INPUT -p tcp -j ACCEPT"},
		{"text", "[0:0] -A INPUT -p tcp -j ACCEPT", "[0:0] -A INPUT -p udp -j ACCEPT", []DiffKind{DiffSave}, "#4"},
		{"inverted full range printed by xfw only", "[0:0] -A INPUT -p tcp -m tcp -j DROP", "[0:0] -A INPUT -p tcp -m tcp ! --dport 0:65535 -j DROP", nil, ""},
		{"inverted full segments-left range printed by xfw only", "[0:0] -A INPUT -m rt", "[0:0] -A INPUT -m rt ! --rt-segsleft 0:4294967295", nil, ""},
		{"inverted full spi range printed by xfw only", "[0:0] -A INPUT -p esp -m esp -j DROP", "[0:0] -A INPUT -p esp -m esp ! --espspi 0:4294967295 -j DROP", nil, ""},
		{"inverted partial spi range", "[0:0] -A INPUT -m ah", "[0:0] -A INPUT -m ah ! --ahspi 0:5", []DiffKind{DiffSave}, "#4"},
		{"inverted interface wildcard printed by xfw only", "[0:0] -A FORWARD -j DROP", "[0:0] -A FORWARD ! -i + -j DROP", nil, ""},
		{"icmp type 255 with a code", "[0:0] -A INPUT -p icmp -m icmp --icmp-type any", "[0:0] -A INPUT -p icmp -m icmp --icmp-type 255/4", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := compareSaves(strings.Replace(base, "%s", tc.kernel, 1), strings.Replace(base, "%s", tc.xfw, 1))
			if len(ds) != len(tc.kinds) {
				t.Fatalf("differences %v, want kinds %v", ds, tc.kinds)
			}
			for i, d := range ds {
				if d.Kind != tc.kinds[i] {
					t.Errorf("difference %d is %s, want %s", i, d.Kind, tc.kinds[i])
				}
			}
			if len(ds) > 0 && ds[0].Subject != tc.firstSubject {
				t.Errorf("subject %q, want %q", ds[0].Subject, tc.firstSubject)
			}
		})
	}
}

func TestRulesetText(t *testing.T) {
	tests := []struct {
		name, in, want string
		fn             func(string) string
	}{
		{"without reject", "-A INPUT -p tcp -j REJECT --reject-with tcp-reset\n-A INPUT -j REJECT\n", "-A INPUT -p tcp -j DROP\n-A INPUT -j DROP\n", WithoutReject},
		{"filter table", "*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n*mangle\nCOMMIT\n", "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n", FilterTable},
		{"interfaces", "-A INPUT -i eth1 -j ACCEPT\n-A INPUT -i eth1 -j DROP\n-A FORWARD -i eth0 -o eth1 ! -i lo -o ppp+\n", "-A INPUT -i in0 -j ACCEPT\n-A INPUT -i in0 -j DROP\n-A FORWARD -i out0 -o in0 ! -i lo -o ppp+\n", MapInterfaces},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fn(tc.in); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestHalves(t *testing.T) {
	tests := []struct{ in, lo, hi string }{
		{"10.42.1.0/24", "10.42.1.0/25", "10.42.1.128/25"},
		{"fd00:42:1::/64", "fd00:42:1::/65", "fd00:42:1:0:8000::/65"},
	}
	for _, tc := range tests {
		h := halves(netip.MustParsePrefix(tc.in))
		if h[0].String() != tc.lo || h[1].String() != tc.hi {
			t.Errorf("halves(%s) = %v, want %s %s", tc.in, h, tc.lo, tc.hi)
		}
	}
}

func TestRealisticLoad(t *testing.T) {
	sets, err := Realistic()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := DumpsDir(".")
	if err != nil {
		t.Fatal(err)
	}
	dumps, _, err := Dumps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) == 0 || len(dumps) == 0 {
		t.Fatalf("%d hand-written rulesets, %d dumps", len(sets), len(dumps))
	}
	for _, n := range append(sets, dumps...) {
		if err := supported(n.Family, n.Text); err != nil {
			t.Errorf("%s: xfw refuses it: %v", n.Name, err)
		}
		if _, err := GenerateCorpus(1, NewPlan(n.Family, DefaultSubnet), n.Text, 50); err != nil {
			t.Errorf("%s: %v", n.Name, err)
		}
	}
}

func TestKnownRejectDifference(t *testing.T) {
	// Probes 2 and 3: from sink and from gen with a (spoofed) source of
	// fw's own, whose replies xfw delivers as the kernel does (none
	// excused).
	ownSrc := "0278742a01010278742a010286dd6000000000083a40" + "fd000042000100000000000000000001" + "fd000042000100000000000000000001" + "8000000000000000"
	c := &Corpus{Probes: []Probe{{From: FromGen}, {From: FromFw}, {From: FromSink, Frames: [][]byte{hexFrame(t, ownSrc)}},
		{From: FromGen, Frames: [][]byte{hexFrame(t, ownSrc)}}}}
	reply := func(where, ethSrc string) string {
		return "at " + where + ": ICMP error quoting it: IPv4 10.42.1.1 > 10.42.1.2 ICMP type 3 code 3\n      " +
			"0278742a0102" + ethSrc + "0800" + "45c0001c00000000400100000a2a01010a2a01020303fcfc00000000"
	}
	sockets := "fw's sockets got ICMP error quoting it: IPv6 protocol 58 (the bytes after the IPv6 header), 8 bytes: 0106916e00000000"
	// xfw's reply to a packet fw sent itself through lo, logged as it
	// arrives on lo (difftest seed 11 with sets, probe #1503): it now
	// passes OUTPUT as the kernel's does, which dropped it there.
	loReplyLog := "LOG: IN=lo OUT= MAC=00:00:00:00:00:00:00:00:00:00:00:00:08:00 SRC=10.42.1.1 DST=10.42.1.1 LEN=81 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.1 DST=10.42.1.1 LEN=53 ID=1504 PROTO=TCP SPT=52 DPT=53059 ]"
	tests := []struct {
		name       string
		d          Difference
		xfwReplies bool // some probe shows a reply only xfw sent
		known      bool
	}{
		{"xfw-only reply", Difference{Kind: DiffProbe, Probe: 0, XFW: []string{reply("gen", "0278742a0101")}}, false, true},
		{"xfw-only reply to fw", Difference{Kind: DiffProbe, Probe: 1, XFW: []string{sockets}}, false, true},
		{"reply to fw itself", Difference{Kind: DiffProbe, Probe: 2, Kernel: []string{sockets}}, false, false},
		{"reply to fw itself, probe not from fw's address", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{sockets}}, false, false},
		{"reply to fw itself, probe from fw", Difference{Kind: DiffProbe, Probe: 1, Kernel: []string{sockets}}, false, false},
		{"reply to fw itself, probe from gen", Difference{Kind: DiffProbe, Probe: 3, Kernel: []string{sockets}}, false, false},
		{"kernel-only reply", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{reply("gen", "0278742a0101")}}, false, false},
		{"routed elsewhere", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{reply("sink", "0278742a0201")},
			XFW: []string{reply("gen", "0278742a0101")}}, false, true},
		// Routed elsewhere, but from another source: not the documented
		// difference (IPv4 only; IPv6's spoofed sources: TestKnownReplyPairs).
		{"another source, elsewhere", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{strings.Replace(reply("sink", "0278742a0201"), "0a2a0101", "0a2a0201", 1)},
			XFW: []string{reply("gen", "0278742a0101")}}, false, false},
		{"other bytes", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{reply("sink", "0278742a0201")},
			XFW: []string{strings.Replace(reply("gen", "0278742a0101"), "0303fcfc", "0301fcfe", 1)}}, false, false},
		{"other bytes, same place", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{reply("gen", "0278742a0101")},
			XFW: []string{strings.Replace(reply("gen", "0278742a0101"), "fcfc0000", "fcfc0001", 1)}}, false, false},
		{"reply logged", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{"LOG: IN= OUT=in0 SRC=10.42.1.1 DST=10.42.1.2 LEN=28 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.2 DST=10.42.2.2 ID=5 ]"},
			XFW: []string{reply("gen", "0278742a0101")}}, false, true},
		// A LOG line of the kernel's reply alone: only for a reply that
		// passes the kernel's chains and not xfw's.
		{"reply logged, nothing else", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{"LOG: IN= OUT=in0 SRC=10.42.1.1 DST=10.42.1.2 LEN=28 TOS=0x00 PREC=0xC0 TTL=64 ID=? PROTO=ICMP TYPE=3 CODE=3 [SRC=10.42.1.2 DST=10.42.2.2 ID=5 ]"}}, false, false},
		{"reply to fw's own source logged", Difference{Kind: DiffProbe, Probe: 2, Kernel: []string{"LOG: IN=lo OUT= SRC=fd00:0042:0001:0000:0000:0000:0000:0001 DST=fd00:0042:0001:0000:0000:0000:0000:0001 LEN=56 TC=0 HOPLIMIT=64 FLOWLBL=? PROTO=ICMPv6 TYPE=1 CODE=4 [SRC=fd00:0042:0001:0000:0000:0000:0000:0001 ]"}}, false, false},
		{"probe logged", Difference{Kind: DiffProbe, Probe: 0, Kernel: []string{"LOG: IN=in0 OUT= SRC=10.42.1.2 DST=10.42.1.1 LEN=28 TTL=64 ID=5 PROTO=ICMP TYPE=8 CODE=0"}}, false, false},
		{"xfw's reply to fw through lo, logged in INPUT", Difference{Kind: DiffProbe, Probe: 1, XFW: []string{loReplyLog, sockets}}, false, false},
		// Nothing makes a counter higher in the kernel (but IPv4's
		// echoed options): not even a spoofed source of fw's own (once
		// excused: random IPv6 seed 4, IPv4 seed 16).
		{"counters higher in the kernel", Difference{Kind: DiffCounters, Kernel: []string{"[2:100]"}, XFW: []string{"[1:50]"}}, false, false},
		{"counters higher in xfw", Difference{Kind: DiffCounters, Kernel: []string{"[1:50]"}, XFW: []string{"[2:100]"}}, false, false},
		{"counters higher in xfw in OUTPUT", Difference{Kind: DiffCounters, Subject: "-A OUTPUT -j REJECT", Kernel: []string{"[1:50]"}, XFW: []string{"[2:100]"}}, true, true},
		// Alone (difftest ipt-save-filter.txt, before xfw sent no reset
		// about a packet to a broadcast address): nothing shows a reply.
		{"counters higher in xfw in OUTPUT, no reply shown", Difference{Kind: DiffCounters, Subject: "-A OUTPUT -j REJECT", Kernel: []string{"[1:50]"}, XFW: []string{"[2:100]"}}, false, false},
		{"counters higher in xfw in INPUT", Difference{Kind: DiffCounters, Subject: "-A INPUT -j REJECT", Kernel: []string{"[1:50]"}, XFW: []string{"[2:100]"}}, true, false},
		{"counters higher in xfw in FORWARD", Difference{Kind: DiffCounters, Subject: "-A FORWARD -j REJECT", Kernel: []string{"[1:50]"}, XFW: []string{"[2:100]"}}, false, false},
		{"saved rule", Difference{Kind: DiffSave, Kernel: []string{"a"}, XFW: []string{"b"}}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := knownContext{outputSide: map[string]bool{"OUTPUT": true}, xfwReplies: tc.xfwReplies}
			why := knownRejectDifference(tc.d, c, k)
			if got := why != ""; got != tc.known {
				t.Errorf("known = %v, want %v (%q)", got, tc.known, why)
			}
		})
	}
}

func TestChainsReachedFrom(t *testing.T) {
	ruleset := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:a - [0:0]
:b - [0:0]
:c - [0:0]
-A INPUT -p tcp -j a
-A a -s 10.0.0.0/8 -g b
-A OUTPUT --jump c
-A c -j ACCEPT
COMMIT
`
	tests := []struct {
		start string
		want  []string
	}{
		{"INPUT", []string{"INPUT", "a", "b"}},
		{"OUTPUT", []string{"OUTPUT", "c"}},
		{"FORWARD", []string{"FORWARD"}},
	}
	for _, tc := range tests {
		got := chainsReachedFrom(ruleset, tc.start)
		if len(got) != len(tc.want) {
			t.Errorf("%s: reached %v, want %v", tc.start, got, tc.want)
		}
		for _, ch := range tc.want {
			if !got[ch] {
				t.Errorf("%s: %s not reached (%v)", tc.start, ch, got)
			}
		}
	}
}

// TestGeneratedSets checks the ipsets of generated rulesets: their restore
// lines, the set matches that use them, the lookup the parser gets, and
// that rulesets without sets do not change.
func TestGeneratedSets(t *testing.T) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		plan := NewPlan(fam, DefaultSubnet)
		if GenerateRuleset(3, plan, GenOptions{}) != GenerateRuleset(3, plan, GenOptions{}) ||
			len(SetLines(GenerateRuleset(3, plan, GenOptions{}))) != 0 {
			t.Fatalf("%s: a ruleset without sets carries set lines or is not deterministic", fam)
		}
		matches, setTargets, writtenMatches := 0, 0, 0
		for seed := int64(0); seed < 30; seed++ {
			text := GenerateRuleset(seed, plan, GenOptions{Sets: true})
			setTargets += strings.Count(text, "-j SET --")
			writtenMatches += strings.Count(text, "--match-set xs-w ")
			lines := SetLines(text)
			if len(lines) < 4 || !strings.HasPrefix(lines[0], "create xs-net hash:net") || !strings.HasPrefix(lines[1], "create xs-ip hash:ip") {
				t.Fatalf("%s seed %d: set lines %q", fam, seed, lines)
			}
			matches += strings.Count(text, "--match-set")
			rs, err := iptables.Restore(fam, strings.NewReader(text), nil, iptables.RestoreOptions{Sets: SetLookup(text)})
			if err != nil || rs == nil {
				t.Fatalf("%s seed %d: %v\n%s", fam, seed, err, text)
			}
		}
		if matches == 0 {
			t.Errorf("%s: 30 rulesets with sets use no set match", fam)
		}
		if setTargets == 0 || writtenMatches == 0 {
			t.Errorf("%s: 30 rulesets with sets have %d SET targets and %d matches of the set they write", fam, setTargets, writtenMatches)
		}
		lookup := SetLookup("# ipset: create a hash:net family inet6\n# ipset: create b hash:ip\n*filter\nCOMMIT\n")
		if info, ok := lookup("a"); !ok || info.Family != ir.IPv6 || info.Dims != 1 || info.Type != "hash:net" {
			t.Errorf("lookup a: %+v %v", info, ok)
		}
		if info, ok := lookup("b"); !ok || info.Family != ir.IPv4 {
			t.Errorf("lookup b: %+v %v", info, ok)
		}
		if _, ok := lookup("c"); ok {
			t.Error("lookup c: found")
		}
	}
}
