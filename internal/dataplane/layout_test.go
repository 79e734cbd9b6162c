package dataplane

import (
	"testing"
	"unsafe"
)

// TestByteStrides checks the strides RunningGeneration decodes struct
// xfw_bnode and struct xfw_entry with against the Go mirrors of the data
// plane's layouts.
func TestByteStrides(t *testing.T) {
	if got := int(unsafe.Sizeof(bpfBNode{})); got != boundNodeStride {
		t.Errorf("struct xfw_bnode is %d bytes, boundNodeStride %d", got, boundNodeStride)
	}
	if got := (unsafe.Sizeof(bpfEntry{}) + 7) &^ 7; got != entryStride {
		t.Errorf("struct xfw_entry takes %d bytes, entryStride %d", got, entryStride)
	}
}
