package iptables

import "strings"

// Splitting iptables-save lines into words as iptables-restore does
// (xshared.c's add_param_to_argv and tokenize_rule_counters).

// Limits of iptables-restore's line parser.
const (
	// maxParamLen is the size of add_param's buffer: a word may have at
	// most maxParamLen-1 bytes.
	maxParamLen = 1024
	// maxArgc is MAX_ARGC: the argument vector (with the program name and
	// the injected "-t TABLE") holds fewer than maxArgc words.
	maxArgc = 255
)

// Tokenize splits one iptables-save rule line (without a "[p:b]" counter
// prefix) into words the way iptables-restore does: words are separated by
// spaces, tabs and newlines; a double quote starts a quoted part in which
// spaces are kept and a backslash escapes the next character; the closing
// quote ends the word (so `"a"b` is two words and `""` an empty word);
// outside quotes backslashes and single quotes are ordinary characters.
func Tokenize(line string) ([]string, error) {
	words, f := tokenize(nil, line)
	if f != nil {
		return nil, f.render("iptables-restore", 0)
	}
	return words, nil
}

// tokenizeWordsHint is the room tokenize makes for a line's words when
// argv has none left (kube-proxy's rules have 10 to 20; a restore sizes
// argv by the line's spaces instead).
const tokenizeWordsHint = 24

// tokenize implements Tokenize: it appends line's words to argv, the
// words already in the argument vector (for the MAX_ARGC limit), and
// returns the vector.
func tokenize(argv []string, line string) ([]string, *failure) {
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
	// quoted is where a word that is one quoted part without escapes
	// starts in line (its text is that part of line), -1 for others.
	quoted := -1
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
		} else if quoted >= 0 {
			words = append(words, line[quoted:quoted+len(param)])
		} else {
			words = append(words, string(param))
		}
		param, plain, quoted = param[:0], true, -1
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
				escaped, quoted = true, -1
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
			quoted = -1
			if len(param) == 0 {
				quoted = i + 1
			}
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
				// A word's unquoted run is taken whole: it is the
				// line's text, to copy only if a quote follows.
				j := plainRunEnd(line, i)
				if j-i >= maxParamLen {
					return nil, paramErr("Parameter too long!")
				}
				if j < len(line) && line[j] == '"' {
					start = i
					param = append(param, line[i:j]...)
					i = j - 1
					continue
				}
				if len(words)+1 >= maxArgc {
					return nil, paramErr("Parser cannot handle more arguments")
				}
				w, ok := internWord(line[i:j])
				if !ok {
					w = line[i:j]
				}
				words = append(words, w)
				i = j - 1
				continue
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

// plainRunEnd returns the end of the run of line starting at i that is
// neither a separator nor a quote.
func plainRunEnd(line string, i int) int {
	for ; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t', '\n', '"':
			return i
		}
	}
	return i
}

// internWord returns the interned copy of word (internedWords), ok false
// when it has none. The words are found by a small hash of their length
// and three of their bytes, compared with the one or two words of its
// bucket: a map lookup per word cost more than the copy it saves.
func internWord[W string | []byte](word W) (string, bool) {
	if len(word) == 0 || len(word) >= internMaxLen {
		return "", false
	}
	for _, w := range internBuckets[internHash(word)] {
		if w == string(word) {
			return w, true
		}
	}
	return "", false
}

// internMaxLen bounds the length of the interned words (internBuckets).
const internMaxLen = 24

// internBucketCount is the number of internBuckets, a power of two.
const internBucketCount = 1024

// internHash is the bucket of a word of 1 to internMaxLen-1 bytes.
func internHash[W string | []byte](w W) int {
	n := len(w)
	h := uint32(n)*0x9e3779b1 ^ uint32(w[0])*0x85ebca6b ^ uint32(w[n-1])*0xc2b2ae35 ^ uint32(w[n/2])*0x27d4eb2f
	return int(h>>16) & (internBucketCount - 1)
}

// internBuckets holds internedWords by internHash.
var internBuckets = func() *[internBucketCount][]string {
	var b [internBucketCount][]string
	for w := range internedWords {
		if len(w) == 0 || len(w) >= internMaxLen {
			panic("interned word of bad length: " + w)
		}
		h := internHash(w)
		b[h] = append(b[h], w)
	}
	return &b
}()

// internedWords are the words iptables-save lines repeat on every line
// (options, modules, targets, kube-proxy's keywords): tokenize hands out
// these strings instead of a copy per occurrence. Read only.
var internedWords = func() map[string]string {
	words := []string{
		"-A", "-I", "-D", "-R", "-N", "-X", "-F", "-Z", "-P", "-E",
		"-t", "-j", "-g", "-m", "-p", "-s", "-d", "-i", "-o", "-f", "!",
		"--append", "--insert", "--delete", "--jump", "--goto", "--match",
		"--protocol", "--source", "--destination", "--in-interface", "--out-interface",
		"tcp", "udp", "icmp", "sctp", "all", "--dport", "--sport", "--dports", "--sports",
		"--tcp-flags", "--syn", "multiport", "comment", "--comment",
		"conntrack", "--ctstate", "state", "--state", "mark", "--mark", "set", "--match-set",
		"statistic", "--mode", "random", "--probability", "nth", "--every", "--packet",
		"addrtype", "--src-type", "--dst-type", "LOCAL", "--limit-iface-in",
		"physdev", "recent", "limit", "--limit", "--limit-burst",
		"ACCEPT", "DROP", "RETURN", "REJECT", "LOG", "MARK", "CONNMARK",
		"DNAT", "SNAT", "MASQUERADE", "REDIRECT", "--reject-with",
		"--to-destination", "--to-source", "--to-ports", "--set-xmark", "--xor-mark",
		"--or-mark", "--random-fully", "--random",
		"NEW", "ESTABLISHED", "RELATED", "INVALID", "RELATED,ESTABLISHED",
		"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING",
	}
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = w
	}
	return m
}()

// cstr returns the C string at the start of b (up to the first NUL).
func cstr(b []byte) string {
	return string(cstrBytes(b))
}

// cstrBytes returns the C string at the start of b (up to the first NUL)
// without copying it.
func cstrBytes(b []byte) []byte {
	if i := indexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// indexByte is bytes.IndexByte.
func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// strtok emulates C's strtok on buf: start is the position to scan from
// (-1 continues after the previous token, kept in *save). It writes NULs
// into buf and returns the token's start, or -1 when there is none.
func strtok(buf []byte, start int, delim string, save *int) int {
	if start < 0 {
		start = *save
	}
	n := len(buf)
	if start < n {
		if i := indexByte(buf[start:], 0); i >= 0 {
			n = start + i
		}
	}
	for start < n && strings.IndexByte(delim, buf[start]) >= 0 {
		start++
	}
	if start >= n {
		*save = n
		return -1
	}
	end := start
	for end < n && strings.IndexByte(delim, buf[end]) < 0 {
		end++
	}
	if end < n {
		buf[end] = 0
		*save = end + 1
	} else {
		*save = n
	}
	return start
}

// ruleCounters is tokenize_rule_counters: a line starting with "[" carries
// "[packets:bytes]" before the command. It returns the counter words (ok
// false when there is no prefix) and the rest of the line.
func ruleCounters(line string, lineNo int) (pcnt, bcnt, rest string, ok bool, f *failure) {
	if !strings.HasPrefix(line, "[") {
		return "", "", line, false, nil
	}
	buf := []byte(line)
	end := indexByte(buf, ']')
	if end < 0 {
		return "", "", "", false, paramErr("Bad line %d: need ]", lineNo)
	}
	var save int
	p := strtok(buf, 1, ":", &save)
	if p < 0 {
		return "", "", "", false, paramErr("Bad line %d: need :", lineNo)
	}
	b := strtok(buf, -1, "]", &save)
	if b < 0 {
		return "", "", "", false, paramErr("Bad line %d: need ]", lineNo)
	}
	return cstr(buf[p:]), cstr(buf[b:]), cstr(buf[end+1:]), true, nil
}

// parseCounters is parse_counters: sscanf(s, "[%llu:%llu]") == 2.
func parseCounters(s string) (c [2]uint64, ok bool) {
	if !strings.HasPrefix(s, "[") {
		return c, false
	}
	s = s[1:]
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	v, n, _ := cStrtoul(s[i:], 10)
	if n == 0 {
		return c, false
	}
	s = s[i+n:]
	if !strings.HasPrefix(s, ":") {
		return c, false
	}
	w, ok := scanULL(s[1:])
	if !ok {
		return c, false
	}
	return [2]uint64{v, w}, true
}
