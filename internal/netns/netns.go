// Package netns names the current network namespace: its cookie
// (SO_NETNS_COOKIE), which, unlike the namespace's inode, is never reused
// while the machine runs, so that files and pins named after it cannot be
// mistaken for a later namespace's.
//
// It imports only x/sys; ipset and dataplane import it.
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
