package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestConnlimitProbes checks that a connlimit match compiles to a probe
// before its rule with the match's parameters packed in its argument,
// asked only when the rule's IP part and earlier matches hold, that the
// generation tracks connections (FieldCt active), and that the probe's
// answer decides whether the rule is reached.
func TestConnlimitProbes(t *testing.T) {
	tests := []struct {
		fam  ir.Family
		rule string
		arg  uint32
	}{
		{ir.IPv4, "-A INPUT -p tcp --syn --dport 22 -m connlimit --connlimit-above 3 -j REJECT", 0 | 32<<8 | 3<<16},
		{ir.IPv4, "-A INPUT -m connlimit --connlimit-upto 2 --connlimit-mask 24 --connlimit-daddr -j ACCEPT", 0 | 24<<8 | 2<<16 | 1<<24 | 1<<25},
		{ir.IPv6, "-A FORWARD -p tcp -m connlimit ! --connlimit-upto 64 --connlimit-mask 64 -j DROP", 0 | 64<<8 | 64<<16},
	}
	for _, tt := range tests {
		rs := parseRuleset(t, tt.fam, tt.rule)
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		if len(g.Probes) != 1 || g.Probes[0] != (Probe{Kind: ProbeConnlimit, Arg: tt.arg}) {
			t.Errorf("%s: probes %+v, want one connlimit probe with arg %#x", tt.rule, g.Probes, tt.arg)
		}
		if g.Active&(1<<FieldCt) == 0 {
			t.Errorf("%s: FieldCt not active: connections would not be tracked", tt.rule)
		}
	}
}

// TestConnlimitProbeDecides walks a packet through a connlimit rule with
// the probe answering true and false, and a packet the rule's IP part
// does not match, which must not ask the probe.
func TestConnlimitProbeDecides(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -p tcp -s 10.0.0.0/8 -m connlimit --connlimit-above 1 -j DROP")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src      uint64
		answer   bool
		asked    int
		terminal bool
	}{
		{0x0a000001, true, 1, true},
		{0x0a000001, false, 1, false},
		{0x0b000001, true, 0, false},
	} {
		asked := 0
		p := &Packet{Proto: 6, Src: U64(c.src), Dst: U64(0x0a000002), Sport: 1000, Dport: 80, TCPFlags: 2,
			Connlimit: func(uint32) bool { asked++; return c.answer }}
		res := g.Classify(p, ChainInput)
		if asked != c.asked || (res.Entry >= 0) != c.terminal {
			t.Errorf("src %#x answer %v: asked %d, entry %d; want asked %d, terminal %v", c.src, c.answer, asked, res.Entry, c.asked, c.terminal)
		}
	}
}

// TestConnlimitLimitRefused checks that limits the data plane cannot
// count exactly are refused, never loaded to compare wrongly.
func TestConnlimitLimitRefused(t *testing.T) {
	for _, rule := range []string{
		"-A INPUT -m connlimit --connlimit-above 65 -j DROP",
		"-A INPUT -m connlimit --connlimit-upto 4294967295 -j ACCEPT",
	} {
		rs := parseRuleset(t, ir.IPv4, rule)
		if _, err := Compile(rs, Options{}); err == nil || !strings.Contains(err.Error(), "not supported by xfw") {
			t.Errorf("%s: error %v, want a refusal", rule, err)
		}
	}
}

// TestCPUProbes checks that the cpu match is a probe answering by the
// packet's CPU, inverted with "!", a CPU number beyond 2^31-1 matching no
// CPU.
func TestCPUProbes(t *testing.T) {
	for _, c := range []struct {
		rule  string
		cpu   uint32
		match bool
	}{
		{"-A INPUT -m cpu --cpu 1 -j DROP", 1, true},
		{"-A INPUT -m cpu --cpu 1 -j DROP", 0, false},
		{"-A INPUT -m cpu ! --cpu 1 -j DROP", 0, true},
		{"-A INPUT -m cpu ! --cpu 1 -j DROP", 1, false},
		{"-A INPUT -m cpu --cpu 4294967295 -j DROP", 0x7fffffff, true}, // no such CPU exists
		{"-A INPUT -m cpu ! --cpu 4294967295 -j DROP", 3, true},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, c.rule), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.rule, err)
		}
		p := &Packet{Proto: 17, Src: U64(1), Dst: U64(2), CPU: c.cpu}
		if res := g.Classify(p, ChainInput); (res.Entry >= 0) != c.match {
			t.Errorf("%s on CPU %d: entry %d, want match %v", c.rule, c.cpu, res.Entry, c.match)
		}
	}
}
