package iptables

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// tokenizeBytewise is tokenize as it was before unquoted runs were taken
// whole: every byte of a word appended to the word's buffer. The
// reference TestTokenizeSameAsBytewise compares tokenize with.
func tokenizeBytewise(argv []string, line string) ([]string, *failure) {
	// One buffer for every word; a word without quotes is the part of
	// line it was read from, others are copied once into their string,
	// and the words of internedWords are neither: a kube-proxy restore
	// tokenizes millions of words.
	words := argv
	if cap(words) == len(words) {
		words = make([]string, len(argv), len(argv)+tokenizeWordsHint)
		copy(words, argv)
	}
	var space [maxParamLen]byte
	param := space[:0]
	quoteOpen, escaped := false, false
	// plain says param is line[start:start+len(param)]: no quote was
	// part of the word.
	plain, start := true, 0
	add := func(c byte) *failure {
		param = append(param, c)
		if len(param) >= maxParamLen {
			return paramErr("Parameter too long!")
		}
		return nil
	}
	emit := func() *failure {
		if len(words)+1 >= maxArgc {
			return paramErr("Parser cannot handle more arguments")
		}
		if w, ok := internWord(param); ok {
			words = append(words, w)
		} else if plain {
			words = append(words, line[start:start+len(param)])
		} else {
			words = append(words, string(param))
		}
		param, plain = param[:0], true
		return nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		if quoteOpen {
			switch {
			case escaped:
				escaped = false
				if f := add(c); f != nil {
					return nil, f
				}
				continue
			case c == '\\':
				escaped = true
				continue
			case c == '"':
				quoteOpen = false
			default:
				if f := add(c); f != nil {
					return nil, f
				}
				continue
			}
		} else if c == '"' {
			quoteOpen, plain = true, false
			continue
		}
		switch c {
		case '"':
		case ' ', '\t', '\n':
			if len(param) == 0 {
				continue
			}
		default:
			if len(param) == 0 {
				start = i
			}
			if f := add(c); f != nil {
				return nil, f
			}
			continue
		}
		if f := emit(); f != nil {
			return nil, f
		}
	}
	if len(param) > 0 {
		if f := emit(); f != nil {
			return nil, f
		}
	}
	return words, nil
}

// TestTokenizeSameAsBytewise checks that tokenize splits lines into the
// same words, with the same failures, as the byte-wise tokenizer: edge
// cases, then random lines of separators, quotes, backslashes and long
// runs, with argument vectors already part full.
func TestTokenizeSameAsBytewise(t *testing.T) {
	long := strings.Repeat("x", maxParamLen)
	cases := []string{
		"", " ", "a", "a b", "  a  b  ", "a\tb\nc", `"a b" c`, `a"b c"d`, `"a"b`,
		`""`, `a""`, `""a`, `"a\"b"`, `a\b`, `'a b'`, `"unclosed`, `a "b`,
		long, long[:maxParamLen-1], long[:maxParamLen-1] + `"y"`, `"` + long + `"`,
		long[:maxParamLen-2] + `"yz"`, "-A KUBE-SEP-X -m comment --comment \"ns/svc:p80 cluster IP\" -j DNAT",
		strings.Repeat("a ", maxArgc), strings.Repeat("a ", maxArgc-4),
	}
	rnd := rand.New(rand.NewSource(19))
	alphabet := []string{" ", "\t", "\n", `"`, `\`, "a", "b", "-A", "--comment", "tcp", "!", "'", strings.Repeat("z", 300)}
	for range 20000 {
		var b strings.Builder
		for range rnd.Intn(40) {
			b.WriteString(alphabet[rnd.Intn(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, line := range cases {
		for _, pre := range [][]string{nil, {"iptables-restore", "-t", "filter"}, make([]string, maxArgc-3)} {
			want, wantF := tokenizeBytewise(append([]string(nil), pre...), line)
			got, gotF := tokenize(append([]string(nil), pre...), line)
			if !reflect.DeepEqual(gotF, wantF) || (wantF == nil && !reflect.DeepEqual(got, want)) {
				t.Fatalf("tokenize(%d words, %q) = %q, %v; byte-wise %q, %v", len(pre), line, got, gotF, want, wantF)
			}
		}
	}
}
