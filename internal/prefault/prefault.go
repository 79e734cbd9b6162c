package prefault

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minBytes is the smallest slice worth a system call.
const minBytes = 64 << 10

// Slice maps the pages of s's elements that are not mapped yet. Their
// contents do not change: a fresh allocation stays zero.
func Slice[T any](s []T) {
	if len(s) == 0 {
		return
	}
	n := uintptr(len(s)) * unsafe.Sizeof(s[0])
	if n < minBytes {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	// madvise wants page-aligned ranges: the whole pages inside s (the
	// partial ones at its ends are faulted in as usual).
	first := (start + page - 1) &^ (page - 1)
	end := (start + n) &^ (page - 1)
	if end <= first {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)
	_ = unix.Madvise(b[first-start:end-start], unix.MADV_POPULATE_WRITE)
}
