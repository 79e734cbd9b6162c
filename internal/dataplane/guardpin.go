package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/netns"
)

// GuardPinEnv names the bpffs under which the guard is pinned (default
// /sys/fs/bpf, where systemd mounts one). `ip netns exec` remounts /sys,
// hiding it: a bpffs mounted elsewhere (e.g. under /run) stays visible.
const GuardPinEnv = "XFW_BPFFS"

// defaultBPFFS is where systemd mounts the BPF file system.
const defaultBPFFS = "/sys/fs/bpf"

// bpffsMagic is BPF_FS_MAGIC (linux/magic.h).
const bpffsMagic = 0xcafe4a11

// Names of the guard's pins in its directory.
const (
	guardIfsPin   = "interfaces"
	guardDropsPin = "drops"
)

// guardPinDir returns the current namespace's guard directory under the
// bpffs, or "" when no bpffs is mounted there (the guard is not pinned).
func guardPinDir() (string, error) {
	root := os.Getenv(GuardPinEnv)
	if root == "" {
		root = defaultBPFFS
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != bpffsMagic {
		return "", nil
	}
	c, err := netns.Cookie()
	if err != nil {
		return "", fmt.Errorf("guard: %w", err)
	}
	return filepath.Join(root, "xfw", fmt.Sprintf("guard-netns-%d", c)), nil
}

// pin pins the guard's maps and links in dir.
func (g *Guard) pin(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("guard: create %s: %w", dir, err)
	}
	g.pinDir = dir
	if err := g.ifs.Pin(filepath.Join(dir, guardIfsPin)); err != nil {
		return fmt.Errorf("guard: pin its interfaces: %w", err)
	}
	if err := g.drops.Pin(filepath.Join(dir, guardDropsPin)); err != nil {
		return fmt.Errorf("guard: pin its counts: %w", err)
	}
	for i, h := range guardLinks {
		if err := g.links[i].Pin(filepath.Join(dir, h.name)); err != nil {
			return fmt.Errorf("guard: pin its %s link: %w", h.name, err)
		}
	}
	return nil
}

// openPinnedGuard opens the guard pinned in dir (os.ErrNotExist when there
// is none); a partial pin directory is removed and reported missing.
func openPinnedGuard(dir string) (*Guard, error) {
	ifs, err := ebpf.LoadPinnedMap(filepath.Join(dir, guardIfsPin), nil)
	if err != nil {
		return nil, notPinned(dir, err)
	}
	g := &Guard{ifs: ifs, known: map[uint32]guardIf{}, pinDir: dir, Reused: true}
	if g.drops, err = ebpf.LoadPinnedMap(filepath.Join(dir, guardDropsPin), nil); err != nil {
		g.Close()
		return nil, notPinned(dir, err)
	}
	for _, h := range guardLinks {
		l, err := link.LoadPinnedLink(filepath.Join(dir, h.name), nil)
		if err != nil {
			g.Close()
			return nil, notPinned(dir, err)
		}
		g.links = append(g.links, l)
	}
	var k uint32
	var v guardIf
	it := g.ifs.Iterate()
	for it.Next(&k, &v) {
		g.known[k] = v
	}
	if err := it.Err(); err != nil {
		g.Close()
		return nil, fmt.Errorf("guard: read its interfaces: %w", err)
	}
	return g, nil
}

// notPinned removes an incomplete pin directory and reports the guard
// missing, or returns err when it is another failure.
func notPinned(dir string, err error) error {
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("guard: open its pins in %s: %w", dir, err)
	}
	if _, serr := os.Stat(dir); serr == nil {
		os.RemoveAll(dir)
	}
	return os.ErrNotExist
}

// RemovePinnedGuard removes the namespace's pinned guard, if any (xfw
// stop: nothing is left to guard).
func RemovePinnedGuard() error {
	dir, err := guardPinDir()
	if err != nil || dir == "" {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("guard: remove %s: %w", dir, err)
	}
	return nil
}
