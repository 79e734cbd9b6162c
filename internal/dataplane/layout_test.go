package dataplane

import (
	"testing"
	"unsafe"
)

// TestByteStrides checks the strides RunningGeneration decodes struct
// xfw_bound and struct xfw_entry with against the Go mirrors of the data
// plane's layouts.
func TestByteStrides(t *testing.T) {
	if got := unsafe.Sizeof(bpfBound{}); got != boundStride {
		t.Errorf("struct xfw_bound is %d bytes, boundStride %d", got, boundStride)
	}
	if got := (unsafe.Sizeof(bpfEntry{}) + 7) &^ 7; got != entryStride {
		t.Errorf("struct xfw_entry takes %d bytes, entryStride %d", got, entryStride)
	}
}
