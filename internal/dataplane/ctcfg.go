package dataplane

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// ctCfgMap is the tracker's settings (struct xfw_ct_cfg, bpf/xfw_structs.h).
const ctCfgMap = "xfw_ct_cfg"

// Timeout slots of struct xfw_ct_cfg: the TCP states (enum xfw_tcp_state,
// RETRANS and UNACK included), then UDP, ICMP, generic, the UDP stream
// delay, ICMPv6, the SCTP states and GRE's two (XFW_CTT_*).
const (
	ctTCPSynSent = 1 + iota
	ctTCPSynRecv
	ctTCPEstablished
	ctTCPFinWait
	ctTCPCloseWait
	ctTCPLastAck
	ctTCPTimeWait
	ctTCPClose
	ctTCPSynSent2
	ctTCPRetrans
	ctTCPUnack
	ctUDPUnreplied
	ctUDPReplied
	ctICMP
	ctGeneric
	ctUDPStream
	ctICMPv6
	// ctSCTP is the first of the SCTP states' slots (XFW_CTT_SCTP + the
	// kernel's enum sctp_conntrack: NONE, which has CLOSED's timeout, then
	// CLOSED … HEARTBEAT_SENT).
	ctSCTP
	// ctGRE and ctGREStream follow them: GRE before and after a reply
	// (XFW_CTT_GRE, XFW_CTT_GRE_STREAM).
	ctGRE         = ctSCTP + 9
	ctGREStream   = ctGRE + 1
	ctNumTimeouts = ctGREStream + 1
)

// bpfCTCfg mirrors struct xfw_ct_cfg.
type bpfCTCfg struct {
	Timeout          [ctNumTimeouts]uint64
	TCPLoose         uint32
	TCPLiberal       uint32
	TCPMaxRetrans    uint32
	TCPIgnoreInvalid uint32
	Ready            uint32
	HZ               uint32
}

// ctTimeouts names each timeout slot's sysctl under /proc/sys/net/netfilter
// and gives the kernel's default in seconds (nf_conntrack_proto_*.c), used
// when the sysctl cannot be read. The UDP stream delay is a constant of the
// kernel (2 s, nf_conntrack_proto_udp.c) without a sysctl.
var ctTimeouts = []struct {
	slot    int
	sysctl  string
	seconds uint64
}{
	{ctTCPSynSent, "nf_conntrack_tcp_timeout_syn_sent", 120},
	{ctTCPSynRecv, "nf_conntrack_tcp_timeout_syn_recv", 60},
	{ctTCPEstablished, "nf_conntrack_tcp_timeout_established", 432000},
	{ctTCPFinWait, "nf_conntrack_tcp_timeout_fin_wait", 120},
	{ctTCPCloseWait, "nf_conntrack_tcp_timeout_close_wait", 60},
	{ctTCPLastAck, "nf_conntrack_tcp_timeout_last_ack", 30},
	{ctTCPTimeWait, "nf_conntrack_tcp_timeout_time_wait", 120},
	{ctTCPClose, "nf_conntrack_tcp_timeout_close", 10},
	// SYN_SENT2 shares syn_sent's sysctl in the kernel.
	{ctTCPSynSent2, "nf_conntrack_tcp_timeout_syn_sent", 120},
	{ctTCPRetrans, "nf_conntrack_tcp_timeout_max_retrans", 300},
	{ctTCPUnack, "nf_conntrack_tcp_timeout_unacknowledged", 300},
	{ctUDPUnreplied, "nf_conntrack_udp_timeout", 30},
	{ctUDPReplied, "nf_conntrack_udp_timeout_stream", 120},
	{ctICMP, "nf_conntrack_icmp_timeout", 30},
	{ctGeneric, "nf_conntrack_generic_timeout", 600},
	{ctUDPStream, "", 2},
	{ctICMPv6, "nf_conntrack_icmpv6_timeout", 30},
	// SCTP (nf_conntrack_proto_sctp.c): NONE takes CLOSED's timeout.
	{ctSCTP, "nf_conntrack_sctp_timeout_closed", 10},
	{ctSCTP + 1, "nf_conntrack_sctp_timeout_closed", 10},
	{ctSCTP + 2, "nf_conntrack_sctp_timeout_cookie_wait", 3},
	{ctSCTP + 3, "nf_conntrack_sctp_timeout_cookie_echoed", 3},
	{ctSCTP + 4, "nf_conntrack_sctp_timeout_established", 210},
	{ctSCTP + 5, "nf_conntrack_sctp_timeout_shutdown_sent", 3},
	{ctSCTP + 6, "nf_conntrack_sctp_timeout_shutdown_recd", 3},
	{ctSCTP + 7, "nf_conntrack_sctp_timeout_shutdown_ack_sent", 3},
	{ctSCTP + 8, "nf_conntrack_sctp_timeout_heartbeat_sent", 30},
	// GRE (nf_conntrack_proto_gre.c: GRE_TIMEOUT, GRE_STREAM_TIMEOUT).
	{ctGRE, "nf_conntrack_gre_timeout", 30},
	{ctGREStream, "nf_conntrack_gre_timeout_stream", 180},
}

// ctSysctlDir holds the namespace's conntrack sysctls: xfw honours the
// ones the administrator already knows.
const ctSysctlDir = "/proc/sys/net/netfilter/"

// readSysctl returns the number in sysctl name, or def when it cannot be
// read.
func readSysctl(name string, def uint64) uint64 {
	if name == "" {
		return def
	}
	b, err := os.ReadFile(ctSysctlDir + name)
	if err != nil {
		return def
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return def
	}
	return v
}

// ctConfig builds the tracker's settings from the namespace's
// nf_conntrack sysctls (kernel defaults where absent), in jiffies of hz.
// ICMPv6 has its own timeout (nf_conntrack_icmpv6_timeout), as in the
// kernel; the default for ICMP and ICMPv6 is 30 s.
func ctConfig(hz uint64) bpfCTCfg {
	var c bpfCTCfg
	for _, t := range ctTimeouts {
		c.Timeout[t.slot] = readSysctl(t.sysctl, t.seconds) * hz
	}
	c.TCPLoose = uint32(readSysctl("nf_conntrack_tcp_loose", 1))
	c.TCPLiberal = uint32(readSysctl("nf_conntrack_tcp_be_liberal", 0))
	c.TCPMaxRetrans = uint32(readSysctl("nf_conntrack_tcp_max_retrans", 3))
	c.TCPIgnoreInvalid = uint32(readSysctl("nf_conntrack_tcp_ignore_invalid_rst", 0))
	c.Ready = 1
	c.HZ = uint32(hz)
	return c
}

// configureConntrack writes the tracker's settings into the running
// programs' xfw_ct_cfg when they changed (called by every Apply of a
// generation that uses connection tracking, so a changed sysctl takes
// effect with the next ruleset change).
func configureConntrack(cur *state) error {
	m := cur.maps[ctCfgMap]
	if m == nil {
		return fmt.Errorf("connection tracking: %w", ErrNoConntrack)
	}
	var old bpfCTCfg
	if err := m.Lookup(uint32(0), &old); err != nil {
		return fmt.Errorf("read connection tracking settings: %w", err)
	}
	hz := uint64(old.HZ)
	if hz == 0 {
		var err error
		if hz, err = kernelHZ(); err != nil {
			return err
		}
	}
	c := ctConfig(hz)
	if c == old {
		return nil
	}
	if err := m.Put(uint32(0), c); err != nil {
		return fmt.Errorf("write connection tracking settings: %w", err)
	}
	return nil
}

// kernelHZ returns CONFIG_HZ from the kernel's configuration when it is
// published (/proc/config.gz, /boot/config-*), else measures it (HZ).
func kernelHZ() (uint64, error) {
	if hz := configHZ(); hz != 0 {
		return hz, nil
	}
	return HZ()
}

// configHZ reads CONFIG_HZ from the kernel configuration, 0 if unknown.
func configHZ() uint64 {
	var data []byte
	if b, err := os.ReadFile("/proc/config.gz"); err == nil {
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(zr); err == nil {
				data = buf.Bytes()
			}
		}
	}
	if data == nil {
		if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
			data, _ = os.ReadFile("/boot/config-" + strings.TrimSpace(string(rel)))
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
			hz, err := strconv.ParseUint(v, 10, 64)
			if err == nil {
				return hz
			}
		}
	}
	return 0
}

// runningHZ returns the HZ the running programs were configured with, 0
// when connection tracking was never configured.
func runningHZ(m *ebpf.Map) uint64 {
	var c bpfCTCfg
	if m == nil || m.Lookup(uint32(0), &c) != nil {
		return 0
	}
	return uint64(c.HZ)
}

// Connection table sizes. The table of assured connections follows the
// namespace's nf_conntrack_max (the kernel's own limit; entries are not
// preallocated) unless XFW_CT_MAX says otherwise; the LRU table of
// connections not yet assured is preallocated, XFW_CT_NEW_MAX entries
// (default 65,536: about 17 MiB). Both are fixed when xfw is loaded into
// the namespace (`xfw stop` and a new ruleset resize them).
const (
	ctDefaultNewMax = 65536
	ctMinEntries    = 64
)

// sizeConnTables sets the connection tables' sizes in spec.
func sizeConnTables(spec *ebpf.CollectionSpec) {
	if m := spec.Maps[ctMainMap]; m != nil {
		n := readSysctl("nf_conntrack_max", uint64(m.MaxEntries))
		if v, ok := envCount("XFW_CT_MAX"); ok {
			n = v
		}
		m.MaxEntries = uint32(max(n, ctMinEntries))
	}
	if m := spec.Maps[ctNewMap]; m != nil {
		n := uint64(ctDefaultNewMax)
		if v, ok := envCount("XFW_CT_NEW_MAX"); ok {
			n = v
		}
		m.MaxEntries = uint32(max(n, ctMinEntries))
	}
}

// envCount reads a positive entry count from environment variable name.
func envCount(name string) (uint64, bool) {
	v, err := strconv.ParseUint(os.Getenv(name), 10, 32)
	return v, err == nil && v > 0
}
