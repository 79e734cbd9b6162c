package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The bench re-executes itself for the programs that must live in another
// namespace on a given CPU: a UDP sink and a TCP server in fw, a TCP client
// in gen. Each stops by itself after -max, or on SIGTERM.

// helper is a running helper process.
type helper struct {
	cmd  *exec.Cmd
	out  *os.File
	name string
}

// helperGrace is how long a helper gets to exit after SIGTERM.
const helperGrace = 5 * time.Second

// startHelper runs this binary's subcommand args inside ns, pinned to cpu
// (taskset), with its stdout captured.
func startHelper(ns string, cpu int, args ...string) (*helper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	out, err := os.CreateTemp("", "xbench-helper-*.out")
	if err != nil {
		return nil, fmt.Errorf("helper output: %w", err)
	}
	argv := append([]string{"netns", "exec", ns, "taskset", "-c", strconv.Itoa(cpu), self}, args...)
	cmd := exec.Command("ip", argv...)
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	// A single-threaded Go scheduler keeps the helper on its CPU's share.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := cmd.Start(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return nil, fmt.Errorf("start %v: %w", args, err)
	}
	h := &helper{cmd: cmd, out: out, name: args[0]}
	helpers.Lock()
	helpers.m[h] = true
	helpers.Unlock()
	return h, nil
}

// helpers lists running helpers, to stop them on exit or signal.
var helpers = struct {
	sync.Mutex
	m map[*helper]bool
}{m: map[*helper]bool{}}

// stopAllHelpers stops every running helper (signal handler, exit).
func stopAllHelpers() {
	helpers.Lock()
	hs := make([]*helper, 0, len(helpers.m))
	for h := range helpers.m {
		hs = append(hs, h)
	}
	helpers.Unlock()
	for _, h := range hs {
		h.stop()
	}
}

// pid returns the helper's process id (ip netns exec and taskset exec the
// helper in place, so it is the helper's own).
func (h *helper) pid() int { return h.cmd.Process.Pid }

// stop sends SIGTERM, waits, kills by pid if needed, and returns what the
// helper printed.
func (h *helper) stop() []byte {
	helpers.Lock()
	if !helpers.m[h] {
		helpers.Unlock()
		return nil
	}
	delete(helpers.m, h)
	helpers.Unlock()
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = h.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(helperGrace):
		_ = h.cmd.Process.Kill()
		<-done
	}
	b, _ := os.ReadFile(h.out.Name())
	h.out.Close()
	os.Remove(h.out.Name())
	return b
}

// helperContext returns a channel closed on SIGTERM/SIGINT or after max.
func helperContext(max time.Duration) <-chan struct{} {
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-sig:
		case <-time.After(max):
		}
		close(stop)
	}()
	return stop
}

// Helper sizes.
const (
	udpBatch     = 64      // datagrams per recvmmsg
	udpRcvBuf    = 4 << 20 // socket receive buffer
	udpSlot      = 2048    // bytes per datagram buffer
	reqSize      = 64      // TCP request and response sizes
	dialTimeout  = time.Second
	ioTimeout    = 2 * time.Second
	pollInterval = 200 * time.Millisecond
)

// runUDPSink drains UDP datagrams on a port with recvmmsg until stopped.
func runUDPSink(args []string) error {
	fs := flag.NewFlagSet("udpsink", flag.ContinueOnError)
	port := fs.Int("port", inputPort, "UDP port")
	maxDur := fs.Duration("max", 10*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := helperContext(*maxDur)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return fmt.Errorf("udp socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpRcvBuf); err != nil {
		return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
	}
	tv := unix.NsecToTimeval(pollInterval.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("SO_RCVTIMEO: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: *port}); err != nil {
		return fmt.Errorf("bind udp %d: %w", *port, err)
	}
	bufs := make([]byte, udpBatch*udpSlot)
	iovs := make([]unix.Iovec, udpBatch)
	msgs := make([]unix.Mmsghdr, udpBatch)
	for i := range msgs {
		iovs[i].Base = &bufs[i*udpSlot]
		iovs[i].SetLen(udpSlot)
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	var total uint64
	for {
		select {
		case <-stop:
			fmt.Printf("{\"received\": %d}\n", total)
			return nil
		default:
		}
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), udpBatch, 0, 0, 0)
		if errno == unix.EAGAIN || errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("recvmmsg: %w", errno)
		}
		total += uint64(n)
	}
}

// runTCPServer answers each connection's reqSize-byte request with a
// reqSize-byte response and closes it.
func runTCPServer(args []string) error {
	fs := flag.NewFlagSet("tcpserver", flag.ContinueOnError)
	addr := fs.String("listen", ":80", "listen address")
	maxDur := fs.Duration("max", 10*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := helperContext(*maxDur)
	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	go func() {
		<-stop
		ln.Close()
	}()
	resp := make([]byte, reqSize)
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-stop:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		go func(c net.Conn) {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(ioTimeout))
			buf := make([]byte, reqSize)
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			_, _ = c.Write(resp)
		}(c)
	}
}

// clientReport is what the TCP client prints.
type clientReport struct {
	Completed uint64  `json:"completed"`
	Failed    uint64  `json:"failed"`
	Seconds   float64 `json:"seconds"`
}

// runTCPClient opens connections to -addr in a loop from -conns goroutines:
// connect, send a request, read the response, close (RST, so neither side
// keeps TIME_WAIT state). It counts completed requests. With -rate it
// starts at most that many connections per second (an attempt due while
// every goroutine is busy is skipped).
func runTCPClient(args []string) error {
	fs := flag.NewFlagSet("tcpclient", flag.ContinueOnError)
	addr := fs.String("addr", "10.1.1.1:80", "server address")
	conns := fs.Int("conns", 4, "concurrent connections")
	dur := fs.Duration("duration", 2*time.Second, "how long to run")
	rate := fs.Float64("rate", 0, "connections per second to start (0: as many as possible)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := helperContext(*dur)
	var tokens chan struct{}
	if *rate > 0 {
		tokens = make(chan struct{}, *conns)
		go func() {
			// Attempts are due at rate from the start (a ticker
			// drops ticks on a busy CPU, so count from the clock).
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			start, issued := time.Now(), 0.0
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				for due := *rate * time.Since(start).Seconds(); issued+1 <= due; issued++ {
					select {
					case tokens <- struct{}{}:
					default: // every goroutine busy: skipped
					}
				}
			}
		}()
	}
	var done, failed atomic.Uint64
	var wg sync.WaitGroup
	start := time.Now()
	req := make([]byte, reqSize)
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, reqSize)
			d := net.Dialer{Timeout: dialTimeout}
			for {
				if tokens != nil {
					select {
					case <-stop:
						return
					case <-tokens:
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				c, err := d.Dial("tcp4", *addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				_, err = c.Write(req)
				if err == nil {
					_, err = io.ReadFull(c, buf)
				}
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				c.Close()
				if err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	rep := clientReport{Completed: done.Load(), Failed: failed.Load(), Seconds: time.Since(start).Seconds()}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// peek returns what the helper has printed so far (its output file).
func (h *helper) peek() ([]byte, error) {
	b, err := os.ReadFile(h.out.Name())
	if err != nil {
		return nil, fmt.Errorf("read %s helper output: %w", h.name, err)
	}
	return b, nil
}

// streamChunk is the write size of the TCP stream client and the read size
// of its sink.
const streamChunk = 256 << 10

// runTCPSink accepts connections and discards what they send.
func runTCPSink(args []string) error {
	fs := flag.NewFlagSet("tcpsink", flag.ContinueOnError)
	addr := fs.String("listen", fmt.Sprintf(":%d", streamPort), "listen address")
	maxDur := fs.Duration("max", 10*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := helperContext(*maxDur)
	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	go func() {
		<-stop
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-stop:
				return nil
			default:
			}
			return fmt.Errorf("accept: %w", err)
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, streamChunk)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}(c)
	}
}

// streamSample is one line of the TCP stream client's output: bytes sent
// so far at a time (Unix nanoseconds); Error ends the stream.
type streamSample struct {
	T     int64  `json:"t"`
	Bytes uint64 `json:"bytes"`
	Error string `json:"error,omitempty"`
}

// Stream client settings.
const (
	streamSampleEvery = 50 * time.Millisecond
	// streamStall ends the stream when one write makes no progress for
	// this long: a connection whose packets the firewall drops stalls
	// (TCP would retry for many minutes).
	streamStall = 30 * time.Second
)

// runTCPStream opens one TCP connection to -addr and writes to it until
// stopped, as fast as it can or at -rate bits/s, printing a streamSample
// every streamSampleEvery. A write error or a stall of streamStall ends it
// with an error sample.
func runTCPStream(args []string) error {
	fs := flag.NewFlagSet("tcpstream", flag.ContinueOnError)
	addr := fs.String("addr", fmt.Sprintf("10.1.1.1:%d", streamPort), "server address")
	rate := fs.Float64("rate", 0, "target rate in bits/s (0: as fast as possible)")
	maxDur := fs.Duration("max", 10*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := helperContext(*maxDur)
	enc := json.NewEncoder(os.Stdout)
	c, err := net.DialTimeout("tcp4", *addr, dialTimeout)
	if err != nil {
		return fmt.Errorf("dial %s: %w", *addr, err)
	}
	defer c.Close()
	var sent atomic.Uint64
	failed := make(chan error, 1)
	go func() {
		buf := make([]byte, streamChunk)
		next := time.Now()
		for {
			if *rate > 0 {
				// Pace: one chunk per chunk time; after a stall, go
				// on at the rate instead of bursting to catch up.
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else if d < -100*time.Millisecond {
					next = time.Now()
				}
				next = next.Add(time.Duration(float64(streamChunk) * 8 / *rate * float64(time.Second)))
			}
			_ = c.SetWriteDeadline(time.Now().Add(streamStall))
			n, err := c.Write(buf)
			sent.Add(uint64(n))
			if err != nil {
				failed <- err
				return
			}
		}
	}()
	tick := time.NewTicker(streamSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return enc.Encode(streamSample{T: time.Now().UnixNano(), Bytes: sent.Load()})
		case err := <-failed:
			return enc.Encode(streamSample{T: time.Now().UnixNano(), Bytes: sent.Load(), Error: err.Error()})
		case now := <-tick.C:
			if err := enc.Encode(streamSample{T: now.UnixNano(), Bytes: sent.Load()}); err != nil {
				return fmt.Errorf("write sample: %w", err)
			}
		}
	}
}
