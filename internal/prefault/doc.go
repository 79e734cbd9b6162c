// Package prefault maps the pages of a large, fresh allocation in one
// system call before the caller fills it.
//
// A command of xfw is a short process: nearly every page its heap uses is
// new, and the kernel maps each one at its first write, a page fault of
// about 3 µs on a virtual machine (6,000 of them were a third of an
// append's time at 10,000 rules). madvise(MADV_POPULATE_WRITE) maps a
// range's missing pages at once, as writes would, without changing what
// the memory holds; on kernels without it (before 5.14) Slice does
// nothing.
//
// # Imports
//
// prefault imports nothing of xfw's. The ir codec, the compiler, the data
// plane and the CLI import it where they allocate large arrays.
package prefault
