package logd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

// NFLogOptions say what RunNFLog writes.
type NFLogOptions struct {
	// Group is the NFLOG group read (--nflog-group; events of other
	// groups are dropped, as the kernel delivers them to other listeners).
	Group uint16
	// Pcap, when set, receives a pcap stream (LINKTYPE_RAW: the IP packet,
	// cut to the rule's --nflog-size and the event's snapshot) instead of
	// the text lines.
	Pcap io.Writer
	// Hostname is the host name of the text lines ("" for os.Hostname).
	Hostname string
	// Listening, when set, is called once events are being read (events
	// of packets sent before are not written).
	Listening func()
}

// RunNFLog copies the NFLOG events of group o.Group of the xfw data plane
// running in the current network namespace to out, one line each in the
// text format of ulogd's LOGEMU output (time, host name, prefix, then the
// kernel LOG line's fields), or to o.Pcap as a pcap stream. Events in the
// ring when it starts were logged while nobody listened and are dropped,
// as the kernel drops NFLOG messages without a listener. It follows the
// data plane as Run does and returns nil when ctx is cancelled.
func RunNFLog(ctx context.Context, out io.Writer, o NFLogOptions) error {
	unlock, err := lockNFLogReader()
	if err != nil {
		return err
	}
	defer unlock()
	host := o.Hostname
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("host name: %w", err)
		}
	}
	w := &nflogWriter{group: o.Group, out: out, host: host, names: newIfNames(), now: time.Now}
	if o.Pcap != nil {
		if w.pcap, err = newPcapWriter(o.Pcap); err != nil {
			return err
		}
	}
	r := &runner{open: openRunningNFLogRing, sink: w.event, skipOld: true, opened: o.Listening,
		names: w.names, host: liveHost{}}
	return r.run(ctx)
}

// openRunningNFLogRing returns the running NFLOG ring buffer, or nil when
// xfw is not loaded in the namespace.
func openRunningNFLogRing() (*ebpf.Map, error) {
	return openRunning(dataplane.NFLogRing, "NFLOG")
}

// skipPending discards the records g holds now.
func skipPending(g *ring) {
	var rec ringbuf.Record
	g.rd.SetDeadline(time.Now())
	for g.rd.ReadInto(&rec) == nil {
	}
}

// nflogWriter writes the events of one group.
type nflogWriter struct {
	group uint16
	out   io.Writer
	pcap  *pcapWriter
	host  string
	names *ifNames
	now   func() time.Time
}

// event writes ev when it is an NFLOG event of the group.
func (w *nflogWriter) event(ev Event) error {
	if ev.Flags&ir.LogFlagNFLog == 0 || ev.NFLogGroup != w.group {
		return nil
	}
	now := w.now()
	if w.pcap != nil {
		data, length := nflogPayload(ev)
		return w.pcap.packet(now, data, length)
	}
	if _, err := io.WriteString(w.out, nflogLine(ev, now, w.host, w.names.name, liveHost{})+"\n"); err != nil {
		return fmt.Errorf("write NFLOG line: %w", err)
	}
	return nil
}

// nflogLine renders ev as ulogd's LOGEMU prints an NFLOG packet: the time
// (ctime's "Mmm dd hh:mm:ss"), the host name, the prefix and a space, then
// the fields of the kernel's LOG line, TCP sequence numbers included
// (ulogd always prints them).
func nflogLine(ev Event, now time.Time, host string, ifName func(uint32) string, h host) string {
	prefix := ev.Prefix
	ev.Prefix = ""
	ev.Flags = ev.Flags&(ir.LogViewPrerouting|ir.LogViewPostrouting) | ir.LogFlagTCPSeq
	ev.Mark, ev.HasUID = 0, false // ulogd's own MARK=, UID= and GID= fields are not reproduced
	return now.Format("Jan _2 15:04:05") + " " + host + " " + prefix + " " + formatEvent(ev, ifName, h)
}

// nflogPayload is the IP packet of ev as NFLOG passes it on: from the
// network header, cut to the rule's copy length, and the packet's length.
func nflogPayload(ev Event) (data []byte, length int) {
	var l3 []byte
	if ev.L3Off <= len(ev.Frame) {
		l3 = ev.Frame[ev.L3Off:]
	}
	frameL3 := max(max(ev.FrameLen, len(ev.Frame))-ev.L3Off, 0)
	length = int(ipLength(ev.Family, l3, uint32(frameL3)))
	l3 = l3[:min(len(l3), length)]
	if uint64(len(l3)) > uint64(ev.NFLogLen) {
		l3 = l3[:ev.NFLogLen]
	}
	return l3, length
}

// nflogLockPath is where RunNFLog takes its lock: one reader per network
// namespace (the NFLOG ring has one consumer position), named by the
// namespace's inode.
const nflogLockPath = "/run/xfw-nflog-%d.lock"

// lockNFLogReader takes the namespace's NFLOG reader lock or says who has
// it.
func lockNFLogReader() (func(), error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	path := fmt.Sprintf(nflogLockPath, st.Ino)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("NFLOG reader lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errors.New("another xfw nflog reads this network namespace's NFLOG events")
		}
		return nil, fmt.Errorf("NFLOG reader lock %s: %w", path, err)
	}
	return func() {
		os.Remove(path)
		f.Close()
	}, nil
}
