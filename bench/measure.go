package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// clockTicks is USER_HZ, the unit of /proc/stat (100 on every Linux
// architecture the bench runs on).
const clockTicks = 100

// cpuTimes returns the busy and total time of one CPU from /proc/stat (all
// states but idle and iowait count as busy), in seconds.
func cpuTimes(cpu int) (busy, total float64, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read CPU times: %w", err)
	}
	defer f.Close()
	want := fmt.Sprintf("cpu%d", cpu)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[0] != want {
			continue
		}
		var vals []float64
		for _, s := range fields[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("parse /proc/stat: %w", err)
			}
			vals = append(vals, v)
		}
		// Fields: user nice system idle iowait irq softirq steal guest
		// guest_nice; guest time is already counted in user.
		const idle, iowait, guest = 3, 4, 8
		for i, v := range vals {
			if i >= guest {
				break
			}
			total += v
			if i != idle && i != iowait {
				busy += v
			}
		}
		return busy / clockTicks, total / clockTicks, nil
	}
	return 0, 0, fmt.Errorf("no %s line in /proc/stat", want)
}

// point is one throughput measurement.
type point struct {
	// PPS is the rate at which packets reached their destination (sink's
	// XDP counter, or fw's UDP socket).
	PPS float64 `json:"pps"`
	// FwNsPerPkt is the CPU time fw's packet path used per delivered
	// packet: its ingress NAPI thread (where XDP, the stack and netfilter
	// run) plus any local receiver. Unlike PPS it does not depend on how
	// much CPU other processes left to the firewall.
	FwNsPerPkt float64 `json:"fw_ns_per_pkt"`
	// FwBusy is the fraction of one CPU fw's packet path used.
	FwBusy float64 `json:"fw_busy"`
	// OtherBusy is the fraction of fwCPU used by anything else (other
	// processes on the machine): high values mean a disturbed measurement.
	OtherBusy float64 `json:"other_busy"`
	// GenPPS is the rate the generator offered.
	GenPPS float64 `json:"gen_pps"`
	// GenNsPerFrame is the generator's CPU time per offered frame.
	GenNsPerFrame float64 `json:"gen_ns_per_frame"`
	// Failed counts a TCP client's failed attempts (connection rates).
	Failed uint64 `json:"failed,omitempty"`
}

// counterFunc returns a monotonically increasing count of delivered packets.
type counterFunc func() (uint64, error)

// timing says how long traffic runs before the window opens, and how long
// the window is.
type timing struct {
	Warm, Window time.Duration
}

// pathCPU returns the CPU time used so far by fw's NAPI threads and pids.
func pathCPU(t *topology, pids []int) (time.Duration, error) {
	napi, err := napiThreads(t.FwIn)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, pid := range append(napi, pids...) {
		c, err := threadCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// measure runs the generator at full speed and returns the delivery rate
// seen by count over the window, with CPU accounting (pids: local receivers
// whose CPU time is part of fw's path).
func measure(t *topology, g *generator, count counterFunc, tm timing, pids []int) (point, error) {
	if err := t.pinNAPI(); err != nil {
		return point{}, err
	}
	stop := make(chan struct{})
	type result struct {
		rep genReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The generator stops by itself after twice the planned time.
		rep, err := g.run(stop, 2*(tm.Warm+tm.Window)+time.Second)
		done <- result{rep, err}
	}()
	fail := func(err error) (point, error) {
		close(stop)
		<-done
		return point{}, err
	}
	time.Sleep(tm.Warm)
	type snap struct {
		n    uint64
		busy float64
		path time.Duration
		at   time.Time
	}
	take := func() (snap, error) {
		var s snap
		var err error
		if s.n, err = count(); err != nil {
			return s, err
		}
		if s.busy, _, err = cpuTimes(fwCPU); err != nil {
			return s, err
		}
		if s.path, err = pathCPU(t, pids); err != nil {
			return s, err
		}
		s.at = time.Now()
		return s, nil
	}
	s0, err := take()
	if err != nil {
		return fail(err)
	}
	time.Sleep(tm.Window)
	s1, err := take()
	if err != nil {
		return fail(err)
	}
	close(stop)
	r := <-done
	if r.err != nil {
		return point{}, r.err
	}
	el := s1.at.Sub(s0.at).Seconds()
	path := (s1.path - s0.path).Seconds()
	p := point{PPS: float64(s1.n-s0.n) / el, FwBusy: path / el}
	p.OtherBusy = max(0, (s1.busy-s0.busy)/el-p.FwBusy)
	if s1.n > s0.n {
		p.FwNsPerPkt = path * 1e9 / float64(s1.n-s0.n)
	}
	if r.rep.Elapsed > 0 && r.rep.Frames > 0 {
		p.GenPPS = float64(r.rep.Frames) / r.rep.Elapsed.Seconds()
		p.GenNsPerFrame = float64(r.rep.CPU.Nanoseconds()) / float64(r.rep.Frames)
	}
	return p, nil
}

// udpDelivered returns a counter of UDP datagrams delivered to sockets in
// ns (Udp InDatagrams of /proc/net/snmp, read from inside the namespace:
// /proc/thread-self, since /proc/self/net follows the main thread's).
func udpDelivered(ns string) counterFunc {
	return func() (uint64, error) {
		var v uint64
		err := nettest.InNamespace(ns, func() error {
			b, err := os.ReadFile("/proc/thread-self/net/snmp")
			if err != nil {
				return fmt.Errorf("read snmp counters: %w", err)
			}
			var header []string
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || f[0] != "Udp:" {
					continue
				}
				if header == nil {
					header = f
					continue
				}
				for i, name := range header {
					if name == "InDatagrams" && i < len(f) {
						v, err = strconv.ParseUint(f[i], 10, 64)
						return err
					}
				}
			}
			return fmt.Errorf("no Udp InDatagrams in %s's snmp counters", ns)
		})
		return v, err
	}
}

// threadCPU returns the CPU time a process has used, all its threads
// included (a kernel thread is a process of one thread), from
// /proc/<pid>/task/*/schedstat (nanoseconds on CPU).
func threadCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("list threads of %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse schedstat of %d: %w", pid, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
