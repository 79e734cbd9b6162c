package nettest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Drain is the barrier a test needs before it reads counters (or anything
// else fw keeps) about frames it sent into fw: sending only queues a frame
// on a veth, and fw takes it in later, in softirq, which on a loaded
// machine can run in ksoftirqd long after the send returned. A sleep
// cannot bound that; Drain waits for it.
//
// The kernel queues a frame a veth delivers on the sending CPU's backlog
// (one queue per CPU, for every device; with an XDP program on the
// receiving device, that device's ring) and takes each queue in order,
// every frame through its hooks before the next. Drain sends, from a
// thread pinned to each CPU, one frame of a local experimental EtherType
// (0x88b5: no IP hook, no ruleset judges it) into fw and waits until a
// capture on fw's interface sees it arrive (sent again every few
// milliseconds: a full backlog drops frames). A frame fw forwards, or
// answers, in taking in another is queued behind the markers already
// sent, so one round of markers covers one hop: Drain sends four rounds,
// from gen, sink, gen and sink. When it returns, every frame gen and sink
// had sent into fw before the call has been through fw, and so have the
// frames the kernel sent on in answer without a process in between, up to
// four hops (gen's frame, fw forwarding it, sink's kernel answering (an
// echo reply, a RST, an ICMP error), fw forwarding that back). Frames a
// process sends in answer (a server's reply), retransmissions and delayed
// ACKs are not covered.
func (topo *Topology) Drain() error {
	cpus, err := allowedCPUs()
	if err != nil {
		return err
	}
	links := [][2]Endpoint{{topo.Gen, topo.FwIn}, {topo.Sink, topo.FwOut}}
	// One capture per link for the whole call, open before the first
	// marker is sent (a round's markers are told apart by their sequence
	// numbers).
	var captures [2]*Capture
	for i, link := range links {
		c, err := StartCaptureFor(link[1].NS, link[1].Ifname, drainRounds*drainTimeout, isDrainMarker)
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		defer c.Stop()
		captures[i] = c
	}
	for round := 0; round < drainRounds; round++ {
		link, capture := links[round%len(links)], captures[round%len(links)]
		errs := make([]error, len(cpus))
		var wg sync.WaitGroup
		for i, cpu := range cpus {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = drainOne(link[0], link[1], capture, cpu)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// drainRounds is how many hops Drain covers.
const drainRounds = 4

// drainEtherType is IEEE 802's local experimental EtherType 1.
const drainEtherType = 0x88b5

// drainTimeout bounds the wait for one marker.
const drainTimeout = 30 * time.Second

// drainResend is how often a marker not seen yet is sent again.
const drainResend = 5 * time.Millisecond

// drainTag starts every marker's payload.
const drainTag = "xfw-drain"

var drainSeq atomic.Uint64

// isDrainMarker keeps the markers a capture receives.
func isDrainMarker(c Captured) bool {
	return !c.Outgoing && len(c.Raw) >= 14+len(drainTag) &&
		binary.BigEndian.Uint16(c.Raw[12:14]) == drainEtherType &&
		string(c.Raw[14:14+len(drainTag)]) == drainTag
}

// drainOne sends markers from `from` on cpu until capture, on `to`, sees
// one.
func drainOne(from, to Endpoint, capture *Capture, cpu int) error {
	payload := make([]byte, 46) // the Ethernet minimum
	copy(payload, drainTag)
	binary.BigEndian.PutUint64(payload[16:], drainSeq.Add(1))
	frame := append(append(append([]byte(nil), to.MAC...), from.MAC...), drainEtherType>>8, drainEtherType&0xff)
	frame = append(frame, payload...)
	isMarker := func(c Captured) bool { return bytes.Equal(c.Raw, frame) }
	seen := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- InNamespace(from.NS, func() error {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("pin to CPU %d: %w", cpu, err)
			}
			fd, err := packetSocket(0)
			if err != nil {
				return err
			}
			defer closeFD(fd)
			sa := &unix.SockaddrLinklayer{Ifindex: from.Ifindex, Protocol: htons(drainEtherType), Halen: 6}
			copy(sa.Addr[:], to.MAC)
			resend := time.NewTicker(drainResend)
			defer resend.Stop()
			for end := time.Now().Add(drainTimeout); time.Now().Before(end); {
				if err := unix.Sendto(fd, frame, 0, sa); err != nil && err != unix.ENOBUFS {
					return fmt.Errorf("send: %w", err)
				}
				select {
				case <-seen:
					return nil
				case <-resend.C:
				}
			}
			return nil
		})
	}()
	_, ok := capture.WaitFor(isMarker, drainTimeout)
	close(seen)
	if err := <-done; err != nil {
		return fmt.Errorf("drain from %s on CPU %d: %w", from.NS, cpu, err)
	}
	if !ok {
		return fmt.Errorf("drain: no marker from %s (CPU %d) reached %s %s in %v", from.NS, cpu, to.NS, to.Ifname, drainTimeout)
	}
	return nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < runtime.NumCPU()*4 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
