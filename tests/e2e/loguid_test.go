package e2e

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// logUIDInRules logs with --log-uid what fw receives (PFX: the run's
// prefix): in raw PREROUTING, before the kernel's early demux, a datagram
// to 5321 (p) and TCP data to 5323 (q); in filter INPUT, after it, the
// datagrams to 5321 (c: a connected socket's) and 5322 (u: an unconnected
// one's), TCP's SYN (s), pure ACK (a: the handshake's last, a request
// socket's) and data (t: the accepted socket's) to 5323, a datagram over
// loopback to 5324 (l), and, the early demux sysctls off, a datagram to
// 5331 (C: connected) and TCP data to 5333 (T). 5313: the datagrams that
// wait for xfw log.
const logUIDInRules = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p udp --dport 5321 -j LOG --log-uid --log-prefix "PFX-p "
-A PREROUTING -p tcp --dport 5323 --tcp-flags PSH PSH -j LOG --log-uid --log-prefix "PFX-q "
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 5321 -j LOG --log-uid --log-prefix "PFX-c "
-A INPUT -p udp --dport 5322 -j LOG --log-uid --log-prefix "PFX-u "
-A INPUT -p tcp --dport 5323 --tcp-flags ALL SYN -j LOG --log-uid --log-prefix "PFX-s "
-A INPUT -p tcp --dport 5323 --tcp-flags ALL ACK -j LOG --log-uid --log-prefix "PFX-a "
-A INPUT -p tcp --dport 5323 --tcp-flags PSH PSH -j LOG --log-uid --log-prefix "PFX-t "
-A INPUT -i lo -p udp --dport 5324 -j LOG --log-uid --log-prefix "PFX-l "
-A INPUT -p udp --dport 5331 -j LOG --log-uid --log-prefix "PFX-C "
-A INPUT -p tcp --dport 5333 --tcp-flags PSH PSH -j LOG --log-uid --log-prefix "PFX-T "
-A INPUT -p udp --dport 5313 -j LOG --log-prefix "PFX-r "
COMMIT
`

// logUIDInWant is the end of each prefix's line from PROTO= on (source
// port and TCP window masked) where the kernel prints the ids of uid
// 4321's sockets: in INPUT only, of the connected UDP socket and the
// accepted TCP connection, with the early demux sysctls on.
var logUIDInWant = map[string]string{
	"p": "PROTO=UDP SPT=* DPT=5321 LEN=17 ",
	"q": "PROTO=TCP SPT=* DPT=5323 WINDOW=* RES=0x00 ACK PSH URGP=0 ",
	"c": "PROTO=UDP SPT=* DPT=5321 LEN=17 UID=4321 GID=4322 ",
	"u": "PROTO=UDP SPT=* DPT=5322 LEN=17 ",
	"s": "PROTO=TCP SPT=* DPT=5323 WINDOW=* RES=0x00 SYN URGP=0 ",
	"a": "PROTO=TCP SPT=* DPT=5323 WINDOW=* RES=0x00 ACK URGP=0 ",
	"t": "PROTO=TCP SPT=* DPT=5323 WINDOW=* RES=0x00 ACK PSH URGP=0 UID=4321 GID=4322 ",
	"l": "PROTO=UDP SPT=* DPT=5324 LEN=17 ",
	"C": "PROTO=UDP SPT=* DPT=5331 LEN=17 ",
	"T": "PROTO=TCP SPT=* DPT=5333 WINDOW=* RES=0x00 ACK PSH URGP=0 ",
}

// logUIDServer is the script fw runs as uid 4321 (argv: fw's and gen's
// addresses of one family, gen's first source port, the TCP port, the
// loopback address): a UDP socket connected to gen's port on 5321 (+10
// in the sysctls' round), an unconnected one on 5322, a listener on the
// TCP port whose connection it accepts and answers with one byte, and
// two loopback sockets connected to each other, the one on 7002 sending
// a datagram to the one on 5324. It prints "ready" once bound.
const logUIDServer = `import socket, sys, threading, time
fw, gen, gport, tport, lo = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
fam = socket.AF_INET6 if ':' in fw else socket.AF_INET
c = socket.socket(fam, socket.SOCK_DGRAM); c.bind((fw, tport - 2)); c.connect((gen, gport))
u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((fw, tport - 1))
l = socket.socket(fam, socket.SOCK_STREAM); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind((fw, tport)); l.listen(4)
a = socket.socket(fam, socket.SOCK_DGRAM); a.bind((lo, tport + 1)); a.connect((lo, 7002))
b = socket.socket(fam, socket.SOCK_DGRAM); b.bind((lo, 7002)); b.connect((lo, tport + 1))
def serve():
    s, _ = l.accept(); s.send(b'k'); s.recv(64); time.sleep(30)
threading.Thread(target=serve, daemon=True).start()
print('ready', flush=True)
sys.stdin.readline()
if tport == 5323:
    b.send(b'loopback!')
time.sleep(30)
`

// logUIDClient is the script gen runs (argv: fw's and gen's addresses,
// gen's source port, the TCP port, optionally the datagrams' size and
// the port to connect to, the TCP port's unless given): a datagram (9
// bytes unless sized) from the source port to
// the connected and the unconnected socket, then a TCP connection that
// sends once the server's byte arrived.
const logUIDClient = `import socket, sys, time
fw, gen, gport, tport = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 0
cport = int(sys.argv[6]) if len(sys.argv) > 6 else tport
fam = socket.AF_INET6 if ':' in fw else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM); s.bind((gen, gport))
payload = b'd' * size if size else b'datagram!'
s.sendto(payload, (fw, tport - 2)); s.sendto(payload, (fw, tport - 1))
t = socket.create_connection((fw, cport), timeout=10)
t.recv(1); t.send(b'data'); time.sleep(0.5); t.close()
`

// windowField masks a LOG line's TCP window (each twin's connection
// advertises its own).
var windowField = regexp.MustCompile(`WINDOW=\d+`)

// TestLogUIDReceivedAgainstKernel compares --log-uid's UID= and GID= on
// received packets with the kernel's, both families: the kernel prints
// the ids of the socket its early demux found (a connected UDP socket,
// an accepted TCP connection) in INPUT and never in PREROUTING; nothing
// for an unconnected socket, a listener, a request socket, loopback's
// packets, or with net.ipv4.udp_early_demux and tcp_early_demux off
// (xfw reads them at sync).
func TestLogUIDReceivedAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "setpriv", "/usr/bin/python3")
	bin := xfwPath(t)
	tw, pfx := logTwins(t, bin, "xfwuin", logUIDInRules)
	want := bothFamilies(logUIDInWant)
	kernel, got := logLinesOfTwins(t, tw, bin, pfx, 5313, want, func(tp *nettest.Topology) {
		sync := "" // xfw's twin syncs to read the early demux sysctls
		if tp == tw.tps["xfw"] {
			sync = bin
		}
		logUIDInSend(t, tp, sync)
	})
	for k, w := range want {
		kl := windowField.ReplaceAllString(kernel[k], "WINDOW=*")
		gl := windowField.ReplaceAllString(got[k], "WINDOW=*")
		if kl != w {
			t.Errorf("kernel: %s-%s line ends %q, want %q (premise)", pfx, k, kl, w)
		}
		if gl != kl {
			t.Errorf("xfw: %s-%s line ends %q, the kernel's %q", pfx, k, gl, kl)
		}
	}
}

// logUIDInSend runs both rounds of TestLogUIDReceivedAgainstKernel in
// tp, both families each: the early demux sysctls on (ports 5321–5324),
// then off (5331–5333; xfw, when bin is set, syncs to read them).
func logUIDInSend(t *testing.T, tp *nettest.Topology, bin string) {
	t.Helper()
	logUIDInRound(t, tp, 7001, 5323)
	for _, k := range []string{"net.ipv4.udp_early_demux=0", "net.ipv4.tcp_early_demux=0"} {
		if out, err := exec.Command("ip", "netns", "exec", tp.FwNS, "sysctl", "-q", "-w", k).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s in fw: %v: %s", k, err, out)
		}
	}
	if bin != "" {
		if out, err := exec.Command("ip", "netns", "exec", tp.FwNS, bin, "sync").CombinedOutput(); err != nil {
			t.Fatalf("xfw sync: %v: %s", err, out)
		}
	}
	logUIDInRound(t, tp, 7011, 5333)
}

// logUIDClientOpts are logUIDClient's optional arguments: the datagrams'
// size (0: 9 bytes) and the port it connects to (0: the TCP port).
type logUIDClientOpts struct{ size, connect int }

// logUIDInRound starts logUIDServer in fw as uid 4321 and runs
// logUIDClient in gen against it (opts: at most one), for each family.
func logUIDInRound(t *testing.T, tp *nettest.Topology, gport, tport int, opts ...logUIDClientOpts) {
	t.Helper()
	for _, fam := range []struct{ fw, gen, lo netip.Addr }{
		{tp.FwIn.IPv4, tp.Gen.IPv4, netip.MustParseAddr("127.0.0.1")},
		{tp.FwIn.IPv6, tp.Gen.IPv6, netip.IPv6Loopback()},
	} {
		args := []string{fam.fw.String(), fam.gen.String(), fmt.Sprint(gport), fmt.Sprint(tport)}
		cargs := args
		if len(opts) > 0 {
			cargs = append(append([]string{}, args...), fmt.Sprint(opts[0].size), fmt.Sprint(cmp.Or(opts[0].connect, tport)))
		}
		srv := exec.Command("ip", append([]string{"netns", "exec", tp.FwNS, "setpriv", "--reuid", "4321", "--regid", "4322",
			"--clear-groups", "/usr/bin/python3", "-c", logUIDServer}, append(args, fam.lo.String())...)...) // a system python the uid may run
		stdin, err := srv.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr lockedBuffer
		srv.Stderr = &stderr
		if err := srv.Start(); err != nil {
			t.Fatalf("start the server in fw: %v", err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = srv.Process.Kill()
			_ = srv.Wait()
			t.Fatalf("server in fw: %q, %v: %s", line, err, stderr.String())
		}
		cli := exec.Command("ip", append([]string{"netns", "exec", tp.GenNS, "/usr/bin/python3", "-c", logUIDClient}, cargs...)...)
		out, cerr := cli.CombinedOutput()
		_, _ = io.WriteString(stdin, "go\n")
		time.Sleep(300 * time.Millisecond)
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if cerr != nil {
			t.Fatalf("client in gen (%s): %v: %s; server: %s", fam.fw, cerr, out, stderr.String())
		}
	}
}

// logUIDFragRules tracks connections (nf_defrag then reassembles before
// PREROUTING) and logs with --log-uid the datagrams to 5341 (f), sent in
// fragments to a connected socket of uid 4321.
const logUIDFragRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -p udp --dport 5341 -j LOG --log-uid --log-prefix "PFX-f "
-A INPUT -p udp --dport 5313 -j LOG --log-prefix "PFX-r "
COMMIT
`

// TestLogUIDFragmentAgainstKernel: a datagram that arrives in fragments,
// with connection tracking on, is demuxed whole by the kernel (reassembled
// before PREROUTING): its INPUT line has the connected socket's UID= and
// GID=, in both families, and xfw's (of the first fragment, which stands
// for the datagram) ends as the kernel's from PROTO= on (before it, the
// IP header's length and fragment fields are the fragment's).
func TestLogUIDFragmentAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "setpriv", "/usr/bin/python3")
	bin := xfwPath(t)
	tw, pfx := logTwins(t, bin, "xfwufr", logUIDFragRules)
	want := map[string]string{"f": "", "f6": ""}
	const size = 3000 // over the links' MTU: sent in fragments
	kernel, got := logLinesOfTwins(t, tw, bin, pfx, 5313, want, func(tp *nettest.Topology) {
		logUIDInRound(t, tp, 7021, 5343, logUIDClientOpts{size: size})
	})
	const ids = "UID=4321 GID=4322 "
	for k := range want {
		if !strings.Contains(kernel[k], ids) {
			t.Errorf("kernel: %s-%s line %q has no %q (premise)", pfx, k, kernel[k], ids)
		}
		if got[k] != kernel[k] {
			t.Errorf("xfw: %s-%s line ends %q, the kernel's %q", pfx, k, got[k], kernel[k])
		}
	}
}

// logUIDRedirectRules redirects TCP to 5363 to the listener on 5353 (nat
// PREROUTING, before the kernel's early demux) and logs with --log-uid
// the data that reaches it (n).
const logUIDRedirectRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p tcp --dport 5363 -j REDIRECT --to-ports 5353
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 5353 --tcp-flags PSH PSH -j LOG --log-uid --log-prefix "PFX-n "
-A INPUT -p udp --dport 5313 -j LOG --log-prefix "PFX-r "
COMMIT
`

// TestLogUIDRedirectAgainstKernel: the early demux looks up the packet as
// nat PREROUTING left it: data of a connection REDIRECTed to a listener
// of uid 4321 gets the accepted socket's ids in INPUT, both families, in
// the kernel's lines and xfw's (translated at XDP before the lookup).
func TestLogUIDRedirectAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "setpriv", "/usr/bin/python3")
	bin := xfwPath(t)
	tw, pfx := logTwins(t, bin, "xfwurd", logUIDRedirectRules)
	want := map[string]string{"n": "", "n6": ""}
	redirected := logUIDClientOpts{connect: 5363}
	kernel, got := logLinesOfTwins(t, tw, bin, pfx, 5313, want, func(tp *nettest.Topology) {
		logUIDInRound(t, tp, 7031, 5353, redirected)
	})
	for k := range want {
		kl := windowField.ReplaceAllString(kernel[k], "WINDOW=*")
		gl := windowField.ReplaceAllString(got[k], "WINDOW=*")
		if w := "PROTO=TCP SPT=* DPT=5353 WINDOW=* RES=0x00 ACK PSH URGP=0 UID=4321 GID=4322 "; kl != w {
			t.Errorf("kernel: %s-%s line ends %q, want %q (premise)", pfx, k, kl, w)
		}
		if gl != kl {
			t.Errorf("xfw: %s-%s line ends %q, the kernel's %q", pfx, k, gl, kl)
		}
	}
}
