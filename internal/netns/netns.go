// Package netns names the current network namespace: its cookie
// (SO_NETNS_COOKIE), which, unlike the namespace's inode, is never reused
// while the machine runs, so that files and pins named after it cannot be
// mistaken for a later namespace's; and says whether the caller's user
// namespace owns it (InOwningUserNS).
//
// It imports only x/sys; ipset, dataplane and iptables import it.
package netns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Cookie returns the current network namespace's cookie (kernel >= 5.14).
func Cookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("SO_NETNS_COOKIE (kernel >= 5.14): %w", err)
	}
	return c, nil
}

// nsGetUserNS is the NS_GET_USERNS ioctl (linux/nsfs.h, _IO(0xb7, 0x1)):
// given a namespace's file, a file of the user namespace that owns it.
const nsGetUserNS = 0xb701

// InOwningUserNS reports whether the calling thread's user namespace is
// the one that owns its network namespace, as xt_owner's checkentry
// requires of the writer of a --uid-owner or --gid-owner rule
// (current_user_ns() == net->user_ns). A network namespace owned by a
// user namespace out of the caller's reach (EPERM) is not the caller's.
func InOwningUserNS() (bool, error) {
	nfd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open network namespace: %w", err)
	}
	defer unix.Close(nfd)
	ufd, err := unix.IoctlRetInt(nfd, nsGetUserNS)
	if err == unix.EPERM {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("NS_GET_USERNS: %w", err)
	}
	defer unix.Close(ufd)
	var owner, own unix.Stat_t
	if err := unix.Fstat(ufd, &owner); err != nil {
		return false, fmt.Errorf("stat the owning user namespace: %w", err)
	}
	if err := unix.Stat("/proc/thread-self/ns/user", &own); err != nil {
		return false, fmt.Errorf("stat the user namespace: %w", err)
	}
	return owner.Dev == own.Dev && owner.Ino == own.Ino, nil
}
