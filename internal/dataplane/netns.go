package dataplane

import (
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
)

// homeNetnsVar is the BPF object's constant naming the namespace xfw's
// programs judge (bpf/netns.h): a device that moves to another namespace
// keeps its programs, which then pass its packets.
const homeNetnsVar = "xfw_home_netns"

// setHomeNetns sets spec's home namespace to the calling thread's (the
// proc inode number of its network namespace).
func setHomeNetns(spec *ebpf.CollectionSpec) error {
	v, ok := spec.Variables[homeNetnsVar]
	if !ok {
		return fmt.Errorf("BPF object lacks %s", homeNetnsVar)
	}
	st, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("network namespace: no inode number")
	}
	if err := v.Set(uint32(sys.Ino)); err != nil {
		return fmt.Errorf("set %s: %w", homeNetnsVar, err)
	}
	return nil
}
