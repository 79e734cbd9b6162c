package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// pacedSlot is the pacing period of the AF_PACKET sender: every slot it
// sends rate × slot frames with one or more sendmmsg calls.
const pacedSlot = time.Millisecond

// maxMmsg is the most frames one sendmmsg call carries.
const maxMmsg = 1024

// pacedSender sends prebuilt frames out of gen's veth at a fixed rate with
// batched AF_PACKET (sendmmsg, qdisc bypassed). Unlike the live-frames
// generator it can be paced without an RCU grace period per call.
type pacedSender struct {
	t      *topology
	frames [][]byte
	// idle runs the sending thread with SCHED_IDLE: it gets only the
	// CPU time that the other work on genCPU leaves.
	idle bool
}

// newPacedSender prebuilds one frame per flow.
func newPacedSender(t *topology, flows []flow) *pacedSender {
	s := &pacedSender{t: t}
	for _, f := range flows {
		fr := udpFrame(t, f.Src, f.Dst, f.Sport, f.Dport)
		s.frames = append(s.frames, fr)
	}
	return s
}

// newFrameSender sends the given prebuilt frames, in order and cycling.
func newFrameSender(t *topology, frames [][]byte) *pacedSender {
	return &pacedSender{t: t, frames: frames}
}

// synFrame returns a frameLen-byte Ethernet frame gen → fw carrying a TCP
// SYN without options, with valid IPv4 and TCP checksums (the kernel's
// conntrack verifies the TCP checksum at PREROUTING, and TCP does).
func synFrame(t *topology, src, dst netip.Addr, sport, dport uint16, seq uint32) []byte {
	const tcpLen = 20
	f := make([]byte, frameLen)
	copy(f[0:6], t.FwInMAC)
	copy(f[6:12], t.GenMAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := ipv4Header(src, dst, 20+tcpLen)
	ip[9] = unix.IPPROTO_TCP
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], nettest.Checksum(ip))
	copy(f[14:], ip)
	tcp := f[34 : 34+tcpLen]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4 // data offset: 5 words
	tcp[13] = 0x02   // SYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	// Checksum over the pseudo-header and the segment.
	ph := make([]byte, 0, 12+tcpLen)
	s4, d4 := src.As4(), dst.As4()
	ph = append(ph, s4[:]...)
	ph = append(ph, d4[:]...)
	ph = append(ph, 0, unix.IPPROTO_TCP, 0, tcpLen)
	ph = append(ph, tcp...)
	binary.BigEndian.PutUint16(tcp[16:], nettest.Checksum(ph))
	return f
}

// run sends at rate frames/s until stop is closed or maxDur passes, from a
// thread pinned to genCPU in gen's namespace.
func (s *pacedSender) run(stop <-chan struct{}, rate float64, maxDur time.Duration) (genReport, error) {
	var rep genReport
	err := nettest.InNamespace(s.t.GenNS, func() error {
		if err := pinSelf(genCPU); err != nil {
			return err
		}
		if s.idle {
			// nettest.InNamespace ends the thread after use, and
			// its policy with it.
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
			if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
				return fmt.Errorf("SCHED_IDLE: %w", err)
			}
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
		sa := &unix.SockaddrLinklayer{Ifindex: genIfindex, Protocol: htons(unix.ETH_P_IP)}
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind AF_PACKET: %w", err)
		}
		n := len(s.frames)
		iovs := make([]unix.Iovec, n)
		msgs := make([]unix.Mmsghdr, n)
		for i := range s.frames {
			iovs[i].Base = &s.frames[i][0]
			iovs[i].SetLen(len(s.frames[i]))
			msgs[i].Hdr.Iov = &iovs[i]
			msgs[i].Hdr.SetIovlen(1)
		}
		cpu0, err := selfCPU()
		if err != nil {
			return err
		}
		start := time.Now()
		deadline := start.Add(maxDur)
		perSlot := max(int(rate*pacedSlot.Seconds()+0.5), 1)
		next, idx := start, 0
	loop:
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				break loop
			default:
			}
			for left := perSlot; left > 0; {
				k := min(left, maxMmsg, n-idx)
				sent, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[idx])), uintptr(k), 0, 0, 0)
				if errno != 0 && errno != unix.EINTR && errno != unix.ENOBUFS && errno != unix.EAGAIN {
					return fmt.Errorf("sendmmsg: %w", errno)
				}
				if errno != 0 {
					sent = 0
					k = 1 // skip the frame the kernel refused
				}
				rep.Frames += uint64(sent)
				left -= k
				idx = (idx + k) % n
			}
			next = next.Add(pacedSlot)
			// How far behind the sender may catch up: an idle-priority
			// sender, often preempted, would otherwise send bursts
			// larger than the receiver's ring.
			lag := 10 * pacedSlot
			if s.idle {
				lag = pacedSlot
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			} else if d < -lag {
				// Saturated: do not burst to catch up.
				next = time.Now()
			}
		}
		rep.Elapsed = time.Since(start)
		cpu1, err := selfCPU()
		rep.CPU = cpu1 - cpu0
		return err
	})
	return rep, err
}

// htons converts a 16-bit value to network byte order.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
