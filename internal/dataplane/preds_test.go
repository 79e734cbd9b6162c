package dataplane

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// horspoolFind is bpf/pred.h's string search over text[from:min(to,
// len)] with a rendered predicate: the Go twin of xfw_pred_string.
func horspoolFind(p bpfPred, text []byte) bool {
	end := min(int(p.To), len(text))
	n := int(p.N)
	if n == 0 || end < int(p.From) || end-int(p.From) < n {
		return false
	}
	for i := int(p.From) + n - 1; i < end; i += int(p.Shift[text[i]]) {
		j := 0
		for ; j < n; j++ {
			if p.Fold[text[i-j]] != p.Pattern[n-1-j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// naiveFind is skb_find_text by definition: the pattern, compared with the
// kernel's toupper under icase, wholly within the window.
func naiveFind(m *ir.StringMatch, text []byte) bool {
	end := min(int(m.To), len(text))
	fold := func(b []byte) []byte {
		out := make([]byte, len(b))
		for i, c := range b {
			out[i] = c
			if m.ICase {
				out[i] = kernelToUpper(c)
			}
		}
		return out
	}
	if end < int(m.From) {
		return false
	}
	return bytes.Contains(fold(text[m.From:end]), fold(m.Pattern))
}

// TestStringPredSearch checks the rendered pattern and shift table: the
// data plane's search finds exactly what a naive search finds, with and
// without --icase (Latin-1 letters included), windows and short texts.
func TestStringPredSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte("abAB\xe9\xc9\xdf\xbf\xff\xf7\x00")
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return b
	}
	for i := 0; i < 20000; i++ {
		m := &ir.StringMatch{Algo: "bm", Pattern: word(1 + rng.Intn(6)), To: ir.StringNoTo, ICase: rng.Intn(2) == 0}
		if rng.Intn(3) == 0 {
			m.From, m.To = uint16(rng.Intn(8)), uint16(rng.Intn(40))
			if m.From > m.To {
				m.From, m.To = m.To, m.From
			}
		}
		text := word(rng.Intn(40))
		if got, want := horspoolFind(stringPred(m), text), naiveFind(m, text); got != want {
			t.Fatalf("pattern %q icase %v window [%d,%d) text %q: found %v, want %v", m.Pattern, m.ICase, m.From, m.To, text, got, want)
		}
	}
}

// TestKernelToUpper checks the kernel's case folding on its Latin-1 table
// (lib/ctype.c): lower case letters, 0xdf and 0xff included, 0xf7 not.
func TestKernelToUpper(t *testing.T) {
	for c, want := range map[byte]byte{'a': 'A', 'z': 'Z', 'A': 'A', '{': '{', 0xe9: 0xc9, 0xdf: 0xbf, 0xff: 0xdf, 0xf7: 0xf7, 0xc9: 0xc9, 0xb5: 0xb5} {
		if got := kernelToUpper(c); got != want {
			t.Errorf("toupper(%#x) = %#x, want %#x", c, got, want)
		}
	}
}
