package dataplane

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// clearMap deletes every key of the hash map m, whose keys are K and
// values V (a table of the idle bank, or one no packet reads any more).
func clearMap[K, V any](m *ebpf.Map) error {
	// An empty map (the idle bank's hashed classes, which most
	// generations have none of) is told by one lookup of its first key,
	// without the batches' buffers.
	var first K
	if err := m.NextKey(nil, &first); errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	// Batches of deletes (BPF_MAP_LOOKUP_AND_DELETE_BATCH): two
	// syscalls per entry make a million-entry set table take seconds.
	err := eachBatch(m, true, func([]K, []V) {})
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	var keys []K
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the keys: %w", err)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete a key: %w", err)
		}
	}
	return nil
}

// hashBatch is the number of entries a batch operation on a hash map moves.
const hashBatch = 4096

// eachBatch reads every entry of hash map m (and deletes it, with del) in
// batches, calling fn on each batch; ebpf.ErrNotSupported when the kernel
// has no batch operations for the map.
func eachBatch[K, V any](m *ebpf.Map, del bool, fn func(keys []K, vals []V)) error {
	keys := make([]K, hashBatch)
	vals := make([]V, hashBatch)
	var cursor ebpf.MapBatchCursor
	for {
		var n int
		var err error
		if del {
			n, err = m.BatchLookupAndDelete(&cursor, keys, vals, nil)
		} else {
			n, err = m.BatchLookup(&cursor, keys, vals, nil)
		}
		if n > 0 {
			fn(keys[:n], vals[:n])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch over %s: %w", m, err)
		}
	}
}

// putChunks writes the chunks into the mapped chunk array with one copy.
func putChunks(m *ebpf.Map, chunks []compiler.Chunk) error {
	if len(chunks) == 0 {
		return nil
	}
	mem, size, stride, err := mappedArray[bpfChunk](m, len(chunks))
	if err != nil {
		return err
	} else if size != stride || size != int(unsafe.Sizeof(chunks[0])) {
		return fmt.Errorf("map %s: chunk layout %d/%d/%d", m.String(), size, stride, unsafe.Sizeof(chunks[0]))
	}
	b := chunkBytes(chunks)
	if len(b) > len(mem) {
		return fmt.Errorf("map %s: write %d chunks of %d", m, len(chunks), len(mem)/stride)
	}
	if !sameMemory(b, mem) { // else read in place (RunningGeneration)
		copy(mem, b)
	}
	return nil
}

// batchSize is how many array elements one BPF_MAP_UPDATE_BATCH carries.
const batchSize = 8192

// putArray writes n elements of an array map, val(i) being element i. A
// generation's arrays are BPF_F_MMAPABLE: the elements are encoded into
// the mapped map (at the kernel's stride: the value size rounded up to 8
// bytes). Other arrays are written in batches of one
// BPF_MAP_UPDATE_BATCH call each.
func putArray[T any](m *ebpf.Map, n int, val func(i int) T) error {
	if n == 0 {
		return nil
	}
	if m.Flags()&unix.BPF_F_MMAPABLE != 0 {
		mem, _, stride, err := mappedArray[T](m, n)
		if err != nil {
			return err
		}
		if n*stride > len(mem) {
			return fmt.Errorf("map %s: write %d elements of %d", m, n, len(mem)/stride)
		}
		// Each element stored in place (the mapping is page-aligned, the
		// stride a multiple of 8: aligned for any T of plain data, which
		// every map value is), not built and then copied.
		p := unsafe.Pointer(&mem[0])
		for i := 0; i < n; i++ {
			*(*T)(unsafe.Add(p, i*stride)) = val(i)
		}
		return nil
	}
	for start := 0; start < n; start += batchSize {
		end := start + batchSize
		if end > n {
			end = n
		}
		keys := make([]uint32, end-start)
		vals := make([]T, end-start)
		for i := range keys {
			keys[i] = uint32(start + i)
			vals[i] = val(start + i)
		}
		if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("map %s[%d:%d]: %w", m.String(), start, end, err)
		}
	}
	return nil
}

// zeroArray zeroes the first n elements of an array map whose values are
// T: a clear of the mapped memory for a BPF_F_MMAPABLE one (putArray
// encodes a zero value per element).
func zeroArray[T any](m *ebpf.Map, n int) error {
	if n == 0 || m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return putArray(m, n, func(int) (v T) { return v })
	}
	mem, _, stride, err := mappedArray[T](m, n)
	if err != nil {
		return err
	}
	if n*stride > len(mem) {
		return fmt.Errorf("map %s: zero %d elements of %d", m, n, len(mem)/stride)
	}
	clear(mem[:n*stride])
	return nil
}

// mappedArray returns the memory of the first n elements (all when n is
// 0) of a BPF_F_MMAPABLE array map whose values are T (mapped), the size
// of T and the kernel's stride between elements (the value size rounded up
// to 8 bytes).
func mappedArray[T any](m *ebpf.Map, n int) (mem []byte, size, stride int, err error) {
	var zero T
	size = int(unsafe.Sizeof(zero))
	if size != int(m.ValueSize()) {
		return nil, 0, 0, fmt.Errorf("map %s: value size %d, Go layout %d", m.String(), m.ValueSize(), size)
	}
	stride = (size + 7) &^ 7
	if mem, err = mapped(m, n*stride); err != nil {
		return nil, 0, 0, err
	}
	return mem, size, stride, nil
}
