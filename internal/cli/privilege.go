package cli

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ipset"
)

// Capabilities xfw's state needs: reading and changing BPF programs and
// maps (CAP_BPF, or CAP_SYS_ADMIN before it existed) and the network
// configuration (CAP_NET_ADMIN).
const (
	capNetAdmin = 12 // CAP_NET_ADMIN, linux/capability.h
	capSysAdmin = 21 // CAP_SYS_ADMIN
	capBPF      = 39 // CAP_BPF (Linux 5.8)
)

// privileged reports whether the process holds the capabilities xfw's
// state needs (root has them all).
func privileged() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return unix.Geteuid() == 0
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(capNetAdmin) && (has(capBPF) || has(capSysAdmin))
}

// unprivilegedOK are the commands that read no state.
var unprivilegedOK = map[string]bool{"version": true, "difftest": true}

// onlyInfo reports whether args ask only for help or the version, which
// need no privilege.
func onlyInfo(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		switch a {
		case "-h", "--help", "-V", "--version", "help", "version":
		default:
			return false
		}
	}
	return true
}

// refuseUnprivileged prints, as the command the name stands for prints
// it, that it needs root, and returns that command's exit status.
func refuseUnprivileged(name string, env Env) int {
	switch {
	case name == "ipset":
		fmt.Fprintf(env.Stderr, "ipset v%s: Kernel error received: Operation not permitted\n", ipset.Version)
		return exitOther
	case name == "conntrack":
		fmt.Fprintln(env.Stderr, "conntrack v1.4.7 (conntrack-tools): Operation failed: sorry, you must be root or get CAP_NET_ADMIN capability to do this")
		return exitOther
	case strings.HasPrefix(name, "iptables") || strings.HasPrefix(name, "ip6tables"):
		// iptables-nft's words and status for a failed read of the
		// ruleset (RESOURCE_PROBLEM).
		fmt.Fprintf(env.Stderr, "%s v1.8.9 (xfw): Could not read xfw's state: Permission denied (you must be root)\n", name)
		return exitResource
	}
	fmt.Fprintf(env.Stderr, "xfw %s: Permission denied (you must be root, or have CAP_NET_ADMIN and CAP_BPF)\n", name)
	return exitOther
}
