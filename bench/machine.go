package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// machineInfo describes the machine a run measured.
type machineInfo struct {
	CPU      string            `json:"cpu"`
	Cores    int               `json:"cores"`
	Kernel   string            `json:"kernel"`
	Memory   string            `json:"memory"`
	Virtual  string            `json:"virtualization,omitempty"`
	Versions map[string]string `json:"versions"`
	LoadAvg  string            `json:"load_average_at_start"`
}

// describeMachine reads the CPU model, cores, kernel, memory and the
// versions of the firewalls' tools.
func describeMachine(xfwBin string) (machineInfo, error) {
	m := machineInfo{Cores: runtime.NumCPU(), Versions: map[string]string{}}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return m, fmt.Errorf("uname: %w", err)
	}
	m.Kernel = unix.ByteSliceToString(u.Release[:])
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if k == "model name" && m.CPU == "" {
				m.CPU = v
			}
			if k == "flags" && strings.Contains(" "+v+" ", " hypervisor ") {
				m.Virtual = "virtual machine"
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && fs[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(fs[1], 64); err == nil {
					const kbPerGiB = 1 << 20
					m.Memory = fmt.Sprintf("%.1f GiB", kb/kbPerGiB)
				}
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	ver := func(name string, argv ...string) {
		res, err := runIn(context.Background(), 0, "", nil, argv...)
		if err == nil {
			m.Versions[name] = strings.TrimSpace(strings.SplitN(res.Stdout+res.Stderr, "\n", 2)[0])
		}
	}
	ver("xfw", xfwBin, "version")
	ver("iptables-legacy", "iptables-legacy", "--version")
	ver("iptables-nft", "iptables-nft", "--version")
	ver("nft", "nft", "--version")
	ver("ipset", "ipset", "--version")
	m.Versions["go"] = runtime.Version()
	if res, err := runIn(context.Background(), 0, "", nil, "git", "rev-parse", "--short", "HEAD"); err == nil {
		m.Versions["xfw commit"] = strings.TrimSpace(res.Stdout)
		// The binary is built from the working tree, which may differ.
		if st, err := runIn(context.Background(), 0, "", nil, "git", "status", "--porcelain", "--", "bpf", "internal", "cmd", "go.mod"); err == nil && strings.TrimSpace(st.Stdout) != "" {
			m.Versions["xfw commit"] += " with uncommitted changes in the working tree"
		}
	}
	return m, nil
}
