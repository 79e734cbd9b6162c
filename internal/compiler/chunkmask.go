package compiler

// ChunkMaskBits is the number of chunks one word of a class's chunk mask
// covers (ChunkMasks).
const ChunkMaskBits = 32

// ChunkMaskWords is the number of mask words per class: enough for
// NumChunks chunks.
func (g *Generation) ChunkMaskWords() uint32 {
	return (g.NumChunks + ChunkMaskBits - 1) / ChunkMaskBits
}

// NumChunkMasks is the length of ChunkMasks.
func (g *Generation) NumChunkMasks() int {
	if g.NumChunks == 0 {
		return 0
	}
	return g.ClassChunks.Len() * int(g.ChunkMaskWords())
}

// ChunkMasks returns, per class, which of its chunks are not empty: word
// w of class c (at c*ChunkMaskWords()+w) has bit b set when chunk
// w*ChunkMaskBits+b of the class is (ClassChunks' id is not 0). The data
// plane keeps them after ClassChunks in the slot's clsch map: a walk that
// finds a chunk empty ANDs the active fields' masks and goes straight to
// the next chunk where every field has entries, instead of reading each
// chunk on the way (bpf/classify.h xfw_next_chunk).
func (g *Generation) ChunkMasks() []uint32 {
	if g.NumChunks == 0 {
		return nil
	}
	words := g.ChunkMaskWords()
	classes := uint32(g.ClassChunks.Len())
	masks := make([]uint32, g.NumChunkMasks())
	for c := uint32(0); c < classes; c++ {
		row := g.ClassChunks.Row(c)
		for k, id := range row {
			if id != 0 {
				masks[c*words+uint32(k)/ChunkMaskBits] |= 1 << (uint32(k) % ChunkMaskBits)
			}
		}
	}
	return masks
}

// WriteClassTable writes the class table's ids, then the classes' chunk
// masks (ChunkMasks), into dst, which holds NumIDs()+NumChunkMasks()
// words: what the data plane's clsch map holds. One pass over the
// classes makes each mask from the row it has just copied, where
// copying the table and then ChunkMasks read the 56 MB of ids of
// kube-proxy's 10K services twice from memory. Every mask word is
// written, so dst need not be zero.
func (g *Generation) WriteClassTable(dst []uint32) {
	t := &g.ClassChunks
	ids := dst[:t.NumIDs()]
	masks := dst[len(ids) : len(ids)+g.NumChunkMasks()]
	words := int(g.ChunkMaskWords())
	for c := 0; c < t.Len(); c++ {
		row := t.Row(uint32(c))
		copy(ids[c*t.Width:], row)
		m := masks[c*words : (c+1)*words]
		clear(m)
		for k, id := range row {
			if id != 0 {
				m[k/ChunkMaskBits] |= 1 << (uint(k) % ChunkMaskBits)
			}
		}
	}
}
