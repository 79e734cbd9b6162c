package dataplane

import (
	"bytes"
	"encoding/binary"
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

// TestFamilyCfgUnpadded checks that struct xfw_family_cfg's Go layout has
// no padding: the map library then writes a *bpfFamilyCfg's memory as it
// is (swapIn), which equals the field-by-field encoding it would use for
// a padded one, and both fill the map's whole value.
func TestFamilyCfgUnpadded(t *testing.T) {
	var fc bpfFamilyCfg
	if got, want := binary.Size(&fc), int(unsafe.Sizeof(fc)); got != want {
		t.Fatalf("bpfFamilyCfg encodes to %d bytes, its memory is %d", got, want)
	}
	fc.Enabled, fc.NCounters, fc.Fields[3], fc.MaxIters = 1, 20006, 7, 9
	enc, err := binary.Append(nil, binary.NativeEndian, &fc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, unsafe.Slice((*byte)(unsafe.Pointer(&fc)), unsafe.Sizeof(fc))) {
		t.Fatal("bpfFamilyCfg's memory differs from its encoding")
	}
}
