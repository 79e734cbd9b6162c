package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// nflogRules4 and nflogRules6 are TestNFLogAgainstKernel's rulesets: group
// 5 logs INPUT datagrams to 7100 (prefix x), 7102 cut to 30 bytes
// (--nflog-size), FORWARD ones to 7103 and fw's own to gen's 7104 (OUTPUT,
// judged at TC); group 6 (7101) is another
// listener's and must not reach group 5's.
const (
	nflogRules4 = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 7100 -j NFLOG --nflog-group 5 --nflog-prefix x
-A INPUT -p udp --dport 7101 -j NFLOG --nflog-group 6 --nflog-prefix other
-A INPUT -p udp --dport 7102 -j NFLOG --nflog-group 5 --nflog-prefix small --nflog-size 30
-A FORWARD -p udp --dport 7103 -j NFLOG --nflog-prefix fwd --nflog-group 5 --nflog-threshold 2
-A OUTPUT -p udp --dport 7104 -j NFLOG --nflog-group 5 --nflog-prefix out
COMMIT
`
	nflogRules6 = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 7100 -j NFLOG --nflog-group 5 --nflog-prefix x6
COMMIT
`
)

// nflogPacket is one logged packet as a listener of group 5 sees it.
type nflogPacket struct {
	prefix string // "" where the pcap does not carry it (xfw's raw IP)
	fam    int
	dport  uint16
	caplen int  // bytes of the IP packet passed on
	iplen  int  // the IP packet's length (its header's)
	last   byte // the last byte passed on (0 in the text lines)
}

func (p nflogPacket) String() string {
	return fmt.Sprintf("%q v%d dport %d %d/%d bytes, last %#02x", p.prefix, p.fam, p.dport, p.caplen, p.iplen, p.last)
}

// nflogSend sends the round's datagrams from gen: two to fw:7100, one to
// fw:7101 (group 6), one of 100 bytes to fw:7102, one through fw to
// sink:7103, one to fw's IPv6 address port 7100, then one of 1,400 bytes
// to each of fw's addresses at 7100 and one from fw to gen:7104 (passed
// on whole: more than a LOG event's snapshot).
func nflogSend(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	small := []byte("nflog-e2e-payload")
	big := append(bytes.Repeat([]byte("0123456789"), 139), "abcdefghiQ"...)
	sends := []struct {
		dst     netip.Addr
		port    uint16
		payload []byte
	}{
		{tp.FwIn.IPv4, 7100, small}, {tp.FwIn.IPv4, 7100, small}, {tp.FwIn.IPv4, 7101, small},
		{tp.FwIn.IPv4, 7102, bytes.Repeat([]byte{'z'}, 100)}, {tp.Sink.IPv4, 7103, small},
		{tp.FwIn.IPv6, 7100, small}, {tp.FwIn.IPv4, 7100, big}, {tp.FwIn.IPv6, 7100, big},
	}
	for _, s := range sends {
		if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(s.dst, s.port), s.payload); a.Outcome != nettest.OK {
			t.Fatalf("send to %s:%d: %v", s.dst, s.port, a)
		}
	}
	if a := nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(tp.Gen.IPv4, 7104), big); a.Outcome != nettest.OK {
		t.Fatalf("send from fw to %s:7104: %v", tp.Gen.IPv4, a)
	}
}

// nflogWant is what group 5's listener must see of one round, in order.
var nflogWant = []nflogPacket{
	{"x", 4, 7100, 45, 45, 'd'}, {"x", 4, 7100, 45, 45, 'd'},
	{"small", 4, 7102, 30, 128, 'z'}, {"fwd", 4, 7103, 45, 45, 'd'}, {"x6", 6, 7100, 65, 65, 'd'},
	{"x", 4, 7100, 1428, 1428, 'Q'}, {"x6", 6, 7100, 1448, 1448, 'Q'}, {"out", 4, 7104, 1428, 1428, 'Q'},
}

// listener is a reader of group 5 running in a namespace.
type listener struct {
	cmd    *exec.Cmd
	stdout lockedBuffer
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitUntil polls cond until it holds or a deadline passes (the
// listeners write what they get; the kernel's nfnetlink_log may hold
// messages up to its flush timeout, a second).
func waitUntil(cond func() bool) {
	const deadline, poll = 10 * time.Second, 100 * time.Millisecond
	for end := time.Now().Add(deadline); !cond() && time.Now().Before(end); {
		time.Sleep(poll)
	}
}

// pcapRecords counts the records of a pcap file being written.
func pcapRecords(path string) int {
	data, err := os.ReadFile(path)
	const globalHeader, recordHeader = 24, 16
	if err != nil || len(data) < globalHeader {
		return 0
	}
	n := 0
	for off := globalHeader; off+recordHeader <= len(data); n++ {
		off += recordHeader + int(binary.LittleEndian.Uint32(data[off+8:]))
	}
	return n
}

// startListener runs argv in ns and waits until it says, on standard
// error, that it listens (ready matches the line).
func startListener(t *testing.T, ns string, ready *regexp.Regexp, argv ...string) *listener {
	t.Helper()
	l := &listener{cmd: exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)}
	l.cmd.Stdout = &l.stdout
	stderr, err := l.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(func() { l.stop() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	const readyWait = 20 * time.Second
	timeout := time.After(readyWait)
	var seen []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%v ended before listening: %q", argv, seen)
			}
			seen = append(seen, line)
			if ready.MatchString(line) {
				go func() { // keep draining
					for range lines {
					}
				}()
				return l
			}
		case <-timeout:
			t.Fatalf("%v not listening after %v: %q", argv, readyWait, seen)
		}
	}
}

// stop interrupts the listener (it writes what it has, then ends) and
// waits for it.
func (l *listener) stop() {
	if l.cmd.ProcessState != nil {
		return
	}
	_ = l.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = l.cmd.Process.Kill()
		<-done
	}
}

// TestNFLogAgainstKernel sends the same datagrams through twin topologies,
// fw logging them with -j NFLOG: the kernel's to nfnetlink_log, read by
// tcpdump -i nflog:5; xfw's to its NFLOG stream, read by xfw nflog 5 as
// text lines and, in a second round, as a pcap file (-w) that tcpdump -r
// reads. Group 5's listeners must see exactly the same packets in the same
// order: prefix, family, port, the bytes passed on (--nflog-size 30 cuts
// the 128-byte packet) and its length; group 6's packet reaches neither.
// Every NFLOG rule counts its packets as the kernel's does.
func TestNFLogAgainstKernel(t *testing.T) {
	requireTools(t, "tcpdump", "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	tw := newTwins(t, bin)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, nflogRules4)
		fw.restore(t, tp, 6, nflogRules6)
	})
	dir := t.TempDir()

	// The kernel: tcpdump on the nflog:5 device, over one round.
	kernelPcap := filepath.Join(dir, "kernel.pcap")
	ktp := tw.tps["kernel"]
	td := startListener(t, ktp.FwNS, regexp.MustCompile(`^tcpdump: listening on nflog:5,`),
		"tcpdump", "-i", "nflog:5", "-U", "-w", kernelPcap)
	nflogSend(t, ktp)
	waitUntil(func() bool { return pcapRecords(kernelPcap) >= len(nflogWant) })
	td.stop()
	kernel := readNFLogPcap(t, kernelPcap)
	if !slices.Equal(kernel, nflogWant) {
		t.Fatalf("the kernel's NFLOG listener saw %v, want %v (premise)", kernel, nflogWant)
	}

	// xfw, round 1: the text lines.
	xtp := tw.tps["xfw"]
	listening := regexp.MustCompile(`^xfw nflog: listening on NFLOG group 5$`)
	text := startListener(t, xtp.FwNS, listening, bin, "nflog", "5")
	nflogSend(t, xtp)
	waitUntil(func() bool { return strings.Count(text.stdout.String(), "\n") >= len(kernel) })
	text.stop()
	got := parseNFLogLines(t, text.stdout.String(), xtp)
	var wantText []nflogPacket
	for _, p := range kernel {
		wantText = append(wantText, nflogPacket{prefix: p.prefix, fam: p.fam, dport: p.dport, iplen: p.iplen})
	}
	if !slices.Equal(got, wantText) {
		t.Errorf("xfw nflog 5 printed %v, want %v:\n%s", got, wantText, text.stdout.String())
	}

	// xfw, round 2: a pcap file, read by tcpdump and by the test.
	xfwPcap := filepath.Join(dir, "xfw.pcap")
	pc := startListener(t, xtp.FwNS, listening, bin, "nflog", "-w", xfwPcap, "5")
	nflogSend(t, xtp)
	waitUntil(func() bool { return pcapRecords(xfwPcap) >= len(kernel) })
	pc.stop()
	res, err := nettest.Exec(xtp.FwNS, "tcpdump", "-r", xfwPcap, "-nn")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("tcpdump -r %s: %v %s", xfwPcap, err, res.Stderr)
	}
	if n := strings.Count(res.Stdout, "UDP, length"); n != len(kernel) {
		t.Errorf("tcpdump read %d UDP packets from xfw's pcap, want %d:\n%s", n, len(kernel), res.Stdout)
	}
	gotPcap := readNFLogPcap(t, xfwPcap)
	var wantPcap []nflogPacket
	for _, p := range kernel {
		p.prefix = "" // raw IP records carry no prefix
		wantPcap = append(wantPcap, p)
	}
	if !slices.Equal(gotPcap, wantPcap) {
		t.Errorf("xfw's pcap holds %v, want %v", gotPcap, wantPcap)
	}

	// The NFLOG rules count as the kernel's (xfw saw two rounds).
	for fam := 4; fam <= 6; fam += 2 {
		kc := counters(t, tw.fws["kernel"].save(t, ktp, fam))
		xc := counters(t, tw.fws["xfw"].save(t, xtp, fam))
		for rule, k := range kc {
			if !strings.Contains(rule, "NFLOG") {
				continue
			}
			if x := xc[rule]; k.packets == 0 || x.packets != 2*k.packets || x.bytes != 2*k.bytes {
				t.Errorf("IPv%d %s: xfw counted %+v in two rounds, the kernel %+v in one", fam, rule, x, k)
			}
		}
	}
}

// nflogLine is one xfw nflog line: time, host, prefix, then the fields.
var nflogLine = regexp.MustCompile(`^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ (\S*) IN=(\S*) OUT=(\S*) .*?SRC=(\S+) DST=(\S+) LEN=(\d+) .*PROTO=UDP SPT=\d+ DPT=(\d+) `)

// parseNFLogLines reads xfw nflog's text lines, checking the devices and
// the addresses against the topology.
func parseNFLogLines(t *testing.T, out string, tp *nettest.Topology) []nflogPacket {
	t.Helper()
	var got []nflogPacket
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := nflogLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("unexpected xfw nflog line %q", line)
			continue
		}
		p := nflogPacket{prefix: m[1], fam: 4}
		if strings.Contains(m[4], ":") {
			p.fam = 6
		}
		fmt.Sscan(m[6], &p.iplen)
		fmt.Sscan(m[7], &p.dport)
		src, err := netip.ParseAddr(m[4]) // IPv6 written out in full
		wantIn, wantOut, wantSrc := tp.FwIn.Ifname, "", []netip.Addr{tp.Gen.IPv4, tp.Gen.IPv6}
		switch p.prefix {
		case "fwd":
			wantOut = tp.FwOut.Ifname
		case "out": // fw's own datagram to gen
			wantIn, wantOut, wantSrc = "", tp.FwIn.Ifname, []netip.Addr{tp.FwIn.IPv4}
		}
		if m[2] != wantIn || m[3] != wantOut || err != nil || !slices.Contains(wantSrc, src) {
			t.Errorf("xfw nflog line %q: want IN=%s OUT=%s SRC=%v", line, wantIn, wantOut, wantSrc)
		}
		got = append(got, p)
	}
	return got
}

// pcap link types of the files read.
const (
	linkRaw   = 101 // LINKTYPE_RAW: xfw nflog -w
	linkNFLog = 239 // LINKTYPE_NFLOG: tcpdump -i nflog:N
	// nflogAttrPayload and nflogAttrPrefix are NFULA_PAYLOAD, NFULA_PREFIX.
	nflogAttrPayload = 9
	nflogAttrPrefix  = 10
)

// readNFLogPcap reads a pcap file of raw IP or NFLOG records (little
// endian, as both writers on this machine write them).
func readNFLogPcap(t *testing.T, path string) []nflogPacket {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const globalHeader, recordHeader = 24, 16
	if len(data) < globalHeader || binary.LittleEndian.Uint32(data) != 0xa1b2c3d4 {
		t.Fatalf("%s: not a little-endian pcap file", path)
	}
	link := binary.LittleEndian.Uint32(data[20:])
	var out []nflogPacket
	r := bytes.NewReader(data[globalHeader:])
	for {
		var h [recordHeader]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			break
		}
		rec := make([]byte, binary.LittleEndian.Uint32(h[8:]))
		if _, err := io.ReadFull(r, rec); err != nil {
			t.Fatalf("%s: short record: %v", path, err)
		}
		var p nflogPacket
		payload := rec
		if link == linkNFLog {
			p.prefix, payload = nflogAttrs(t, rec)
		} else if link != linkRaw {
			t.Fatalf("%s: link type %d", path, link)
		}
		p.caplen = len(payload)
		if len(payload) > 0 {
			p.last = payload[len(payload)-1]
		}
		p.fam, p.dport, p.iplen = ipFacts(payload)
		out = append(out, p)
	}
	return out
}

// nflogAttrs returns the prefix and the payload of an NFLOG record: a
// 4-byte header, then attributes (length and type, host order), each
// padded to 4 bytes.
func nflogAttrs(t *testing.T, rec []byte) (prefix string, payload []byte) {
	const recHeader, attrHeader, align = 4, 4, 4
	for off := recHeader; off+attrHeader <= len(rec); {
		n := int(binary.LittleEndian.Uint16(rec[off:]))
		typ := binary.LittleEndian.Uint16(rec[off+2:])
		if n < attrHeader || off+n > len(rec) {
			t.Fatalf("bad NFLOG attribute at %d", off)
		}
		v := rec[off+attrHeader : off+n]
		switch typ {
		case nflogAttrPayload:
			payload = v
		case nflogAttrPrefix:
			prefix = strings.TrimRight(string(v), "\x00")
		}
		off += (n + align - 1) &^ (align - 1)
	}
	return prefix, payload
}

// ipFacts returns the family, UDP destination port and IP length of a
// packet from its IP header (no IPv6 extension headers here).
func ipFacts(b []byte) (fam int, dport uint16, iplen int) {
	const ip6Header = 40
	if len(b) < 1 {
		return 0, 0, 0
	}
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) >= ihl+4 {
			dport = binary.BigEndian.Uint16(b[ihl+2:])
		}
		return 4, dport, int(binary.BigEndian.Uint16(b[2:]))
	case 6:
		if len(b) >= ip6Header+4 {
			dport = binary.BigEndian.Uint16(b[ip6Header+2:])
		}
		return 6, dport, int(binary.BigEndian.Uint16(b[4:])) + ip6Header
	}
	return 0, 0, 0
}
