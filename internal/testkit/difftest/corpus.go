package difftest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Origin is where a probe is sent from.
type Origin string

const (
	// FromGen: Ethernet frames injected at gen's interface, towards fw's in0.
	FromGen Origin = "gen"
	// FromSink: Ethernet frames injected at sink's interface, towards fw's out0.
	FromSink Origin = "sink"
	// FromFw: IP packets sent by fw itself through a raw socket (OUTPUT).
	FromFw Origin = "fw"
)

// Path is the chain the generator aimed a probe at. It is informative: the
// firewalls decide, and the comparison does not depend on it.
type Path string

const (
	// PathInput is a packet for fw itself.
	PathInput Path = "input"
	// PathForward is a packet fw routes on.
	PathForward Path = "forward"
	// PathOutput is a packet fw sends.
	PathOutput Path = "output"
)

// Probe is one packet (or the fragments of one datagram) the comparison
// sends through both topologies.
type Probe struct {
	// From says how it is sent.
	From Origin
	// Path is the chain it was aimed at.
	Path Path
	// Frames are Ethernet frames (FromGen, FromSink) or IP packets (FromFw),
	// sent in order. A marker is written into each when it is sent.
	Frames [][]byte
	// Note says what the generator aimed at.
	Note string
	// Step orders probes whose fate depends on earlier ones (the packets
	// of a conversation through connection tracking): the probes of step
	// 0 go first, in batches, as independent probes do; those of each
	// later step only once both sides have settled after the step before.
	Step int
	// KeepL4 leaves the transport header as written: the marker goes into
	// the IPv4 identification or IPv6 flow label only, not into the TCP
	// sequence numbers or the ICMP echo identifier, which the packets of
	// a conversation must keep consistent.
	KeepL4 bool
	// Answer makes the probe the answer of sink (or gen) to an earlier
	// probe from the other end (the one whose addresses and ports its
	// frame reverses): built when it is sent, on each side from the copy
	// that arrived there (after that side's translations), its addresses
	// and ports swapped; not sent where none arrived. Its frame says what the answer is without
	// translation (nat.go).
	Answer bool
}

// String describes the probe for reports: where it goes and each frame
// decoded.
func (p Probe) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s from %s", p.Path, p.From)
	if p.Step > 0 {
		fmt.Fprintf(&b, " at step %d", p.Step)
	}
	if p.Note != "" {
		fmt.Fprintf(&b, " (%s)", p.Note)
	}
	for i, f := range p.Frames {
		pkt := p.decode(f)
		fmt.Fprintf(&b, "\n  frame %d: %s", i+1, describePacket(pkt))
	}
	return b.String()
}

// decode parses one of the probe's frames.
func (p Probe) decode(f []byte) *nettest.Packet {
	if p.From == FromFw {
		pkt, _ := nettest.ParseIP(f)
		return pkt
	}
	pkt, _ := nettest.Parse(f)
	return pkt
}

// describePacket is Packet.String with the header fields rules look at.
func describePacket(p *nettest.Packet) string {
	s := p.String()
	if p.IPVersion == 0 {
		return s
	}
	extra := fmt.Sprintf(" ttl %d len %d", p.TTL, l3Len(p))
	if p.IPVersion == 4 && len(p.IPv4Options) > 0 {
		extra += fmt.Sprintf(" options %x", p.IPv4Options)
	}
	if p.SrcMAC != nil {
		extra += fmt.Sprintf(" mac %s > %s", p.SrcMAC, p.DstMAC)
	}
	if p.Protocol == nettest.ProtoTCP {
		extra += fmt.Sprintf(" seq %#x ack %#x", p.Seq, p.Ack)
	}
	return s + extra
}

// l3Len returns the length of the IP packet of p (from the IP header on).
func l3Len(p *nettest.Packet) int {
	off := 0
	if p.SrcMAC != nil {
		off = ethHeaderLen + vlanTagLen*len(p.VLANs)
	}
	if n := len(p.Raw) - off; n > 0 {
		return n
	}
	return 0
}

// Corpus is a list of probes.
type Corpus struct {
	Probes []Probe
}

// corpusHeader starts a corpus file.
const corpusHeader = "# xfw difftest corpus v1: ORIGIN PATH [step=N] [keep-l4] [answer] HEX[,HEX...] [# NOTE]"

// Format writes the corpus as text, one probe per line: origin (gen, sink,
// fw), path (input, forward, output), "step=N" for a probe of a later step
// (Probe.Step), "keep-l4" (Probe.KeepL4), the frames in hex separated by
// commas, and "# note".
func (c *Corpus) Format(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, corpusHeader)
	for _, p := range c.Probes {
		fmt.Fprintln(bw, FormatProbe(p))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write corpus: %w", err)
	}
	return nil
}

// FormatProbe returns the probe's corpus line.
func FormatProbe(p Probe) string {
	hexes := make([]string, len(p.Frames))
	for i, f := range p.Frames {
		hexes[i] = hex.EncodeToString(f)
	}
	line := fmt.Sprintf("%s %s ", p.From, p.Path)
	if p.Step > 0 {
		line += fmt.Sprintf("step=%d ", p.Step)
	}
	if p.KeepL4 {
		line += "keep-l4 "
	}
	if p.Answer {
		line += "answer "
	}
	line += strings.Join(hexes, ",")
	if p.Note != "" {
		line += " # " + p.Note
	}
	return line
}

// maxCorpusLine bounds one corpus line (a few fragments of 1500 bytes in hex).
const maxCorpusLine = 1 << 20

// ParseCorpus reads a corpus written by Format (blank lines and lines
// starting with # are skipped).
func ParseCorpus(r io.Reader) (*Corpus, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxCorpusLine)
	c := &Corpus{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var note string
		if i := strings.Index(line, " # "); i >= 0 {
			line, note = line[:i], strings.TrimSpace(line[i+3:])
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 6 {
			return nil, fmt.Errorf("corpus line %d: want ORIGIN PATH [step=N] [keep-l4] [answer] HEX[,HEX...], got %d fields", n, len(f))
		}
		p := Probe{From: Origin(f[0]), Path: Path(f[1]), Note: note}
		for _, opt := range f[2 : len(f)-1] {
			switch v, isStep := strings.CutPrefix(opt, "step="); {
			case isStep:
				st, err := strconv.Atoi(v)
				if err != nil || st < 0 {
					return nil, fmt.Errorf("corpus line %d: bad step %q", n, v)
				}
				p.Step = st
			case opt == "keep-l4":
				p.KeepL4 = true
			case opt == "answer":
				p.Answer = true
			default:
				return nil, fmt.Errorf("corpus line %d: unknown option %q (step=N, keep-l4, answer)", n, opt)
			}
		}
		f = []string{f[0], f[1], f[len(f)-1]}
		switch p.From {
		case FromGen, FromSink, FromFw:
		default:
			return nil, fmt.Errorf("corpus line %d: unknown origin %q (gen, sink or fw)", n, f[0])
		}
		switch p.Path {
		case PathInput, PathForward, PathOutput:
		default:
			return nil, fmt.Errorf("corpus line %d: unknown path %q (input, forward or output)", n, f[1])
		}
		for _, h := range strings.Split(f[2], ",") {
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("corpus line %d: %w", n, err)
			}
			if p.From != FromFw && len(b) < ethHeaderLen {
				return nil, fmt.Errorf("corpus line %d: a %d-byte frame is shorter than an Ethernet header", n, len(b))
			}
			if p.From == FromFw && len(b) < 1 {
				return nil, fmt.Errorf("corpus line %d: empty IP packet", n)
			}
			p.Frames = append(p.Frames, b)
		}
		c.Probes = append(c.Probes, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read corpus: %w", err)
	}
	return c, nil
}

// addrs returns the source and destination of a probe's first frame
// (invalid addresses when it has no IP header).
func (p Probe) addrs() (src, dst netip.Addr) {
	if len(p.Frames) == 0 {
		return
	}
	pkt := p.decode(p.Frames[0])
	if pkt == nil || pkt.IPVersion == 0 {
		return
	}
	return pkt.Src, pkt.Dst
}
