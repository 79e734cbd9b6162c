package dataplane

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A commit reads a dozen or more sysctls (the ICMP rate limits, rp_filter,
// the hop limits, br_netfilter, tracked connections), which tell no one of
// their changes, so they are read at every commit. Reading one through
// os.ReadFile (open, read, close: a path walk through /proc/sys each time)
// costs about 19 µs; a pread of a descriptor kept open, 0.7 µs, and a
// sysctl's read at offset 0 gives its value at that moment, as an open
// and read would. In a session of a process that keeps its state between
// sessions (the agent) the descriptors stay open from one session to the
// next while one of the last two used them; a read that fails (a device
// removed: its sysctls are gone) or fills the buffer reads the file
// afresh, so the value and the error are the ones os.ReadFile gives.
var sysctlFiles struct {
	mu   sync.Mutex
	open map[string]*keptFile
	// sessions counts the sessions ended.
	sessions uint64
}

// keptFile is a sysctl file kept open.
type keptFile struct {
	f *os.File
	// used is sysctlFiles.sessions when it was last read.
	used uint64
}

// sysctlReadSize is the most a kept sysctl file's read returns: longer
// values are read afresh (none of those xfw reads comes near it).
const sysctlReadSize = 256

// readSysctlFile returns the contents of path, a file under /proc/sys:
// through a kept descriptor in a kept session, else os.ReadFile. A
// sysctl's handler formats its whole value into a read's buffer when it
// fits (proc_sys_call_handler), so one pread shorter than the buffer is
// the whole value: os.File.ReadAt's second pread, which only finds the
// end, is left out (a commit reads some twenty sysctls).
func readSysctlFile(path string) ([]byte, error) {
	return readKept(path, sysctlReadSize, true)
}

// procNetReadSize is the most a kept /proc/net file's read returns (the
// groups joined: about 100 bytes a group); longer contents are read
// afresh.
const procNetReadSize = 16 << 10

// readKeptFile returns the contents of path, a file under /proc whose read
// at offset 0 gives its contents at that moment (a sysctl, a seq_file of
// /proc/net): through a descriptor kept open in a kept session, else
// os.ReadFile. A read that fails or fills size bytes reads the file afresh.
func readKeptFile(path string, size int) ([]byte, error) {
	return readKept(path, size, false)
}

// readKept is readKeptFile; with once, a single pread that returns less
// than size bytes is taken as the whole contents (readSysctlFile).
func readKept(path string, size int, once bool) ([]byte, error) {
	if !procFilesKept.Load() && !keptSessionActive() {
		return os.ReadFile(path)
	}
	sysctlFiles.mu.Lock()
	defer sysctlFiles.mu.Unlock()
	kf := sysctlFiles.open[path]
	if kf == nil {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if sysctlFiles.open == nil {
			sysctlFiles.open = map[string]*keptFile{}
		}
		kf = &keptFile{f: f}
		sysctlFiles.open[path] = kf
	}
	kf.used = sysctlFiles.sessions
	buf := make([]byte, size)
	var n int
	var err error
	if once {
		n, err = preadOnce(kf.f, buf)
	} else {
		n, err = kf.f.ReadAt(buf, 0)
	}
	if (err != nil && !errors.Is(err, io.EOF)) || n == len(buf) {
		kf.f.Close()
		delete(sysctlFiles.open, path)
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// procFilesKept: the process reads the same /proc files at intervals
// outside its sessions too (KeepProcFiles).
var procFilesKept atomic.Bool

// KeepProcFiles makes this process keep the /proc files it reads open
// outside sessions too, as a kept session does: the agent reads the input
// sysctls of every device and the multicast source filters every second
// (a pread each, instead of an open, a read and a close through Go's
// poller: nine calls). A file whose read fails (its device removed or
// renamed) is read afresh and its descriptor closed, as in a session; a
// path no longer read (a device removed) is closed at the end of the next
// session or the one after (endSessionSysctls), such as the one of the
// agent's mirror of the input sysctls, whose digest names every device.
func KeepProcFiles() { procFilesKept.Store(true) }

// ReadProcFile returns the contents of path, a /proc/net seq_file read
// whole at offset 0 (readKeptFile), kept open under KeepProcFiles.
func ReadProcFile(path string) ([]byte, error) {
	return readKeptFile(path, procNetReadSize)
}

// keptSessionActive reports whether a session of a process that keeps its
// state between sessions is active.
func keptSessionActive() bool {
	session.mu.Lock()
	defer session.mu.Unlock()
	return session.active && session.keep
}

// endSessionSysctls closes, at a session's end, the sysctl files kept
// open: all of them, or with keep those neither this session nor the one
// before read (a device removed, or not read any more).
func endSessionSysctls(keep bool) {
	sysctlFiles.mu.Lock()
	defer sysctlFiles.mu.Unlock()
	ended := sysctlFiles.sessions
	sysctlFiles.sessions++
	for path, kf := range sysctlFiles.open {
		if !keep || kf.used+1 < ended {
			kf.f.Close()
			delete(sysctlFiles.open, path)
		}
	}
}

// preadOnce reads f at offset 0 into buf with one pread (retried on
// EINTR only).
func preadOnce(f *os.File, buf []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Pread(int(fd), buf, 0)
			if rerr != unix.EINTR {
				return true
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: f.Name(), Err: err}
	}
	return n, nil
}
