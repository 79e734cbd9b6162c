package iptables

import (
	"strings"
	"testing"
)

// TestTokenize checks iptables-restore's word splitting (behaviour of
// iptables-restore 1.8.9).
func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"-A INPUT -j ACCEPT\n", []string{"-A", "INPUT", "-j", "ACCEPT"}},
		{"  -A\tINPUT   -j X ", []string{"-A", "INPUT", "-j", "X"}},
		{`--comment "a b"`, []string{"--comment", "a b"}},
		{`--comment ""`, []string{"--comment", ""}},
		{`--comment x"a b"`, []string{"--comment", "xa b"}},
		{`--comment "a"b`, []string{"--comment", "a", "b"}},
		{`--comment "a\"b\\c\d"`, []string{"--comment", `a"b\cd`}},
		{`--comment a\"b c"`, []string{"--comment", "a\\b c"}},
		{`--comment a\ b`, []string{"--comment", `a\`, "b"}},
		{`--comment 'single'`, []string{"--comment", "'single'"}},
		{`--comment "unterminated`, []string{"--comment", "unterminated"}},
		{`ab"c d" e`, []string{"abc d", "e"}},
		{`"q" plain`, []string{"q", "plain"}},
		{`x"" y`, []string{"x", "y"}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := Tokenize(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
	if _, err := Tokenize(strings.Repeat("x", maxParamLen)); err == nil || !strings.Contains(err.Error(), "Parameter too long!") {
		t.Errorf("long word: %v", err)
	}
	if _, err := Tokenize(strings.Repeat("x ", maxArgc)); err == nil || !strings.Contains(err.Error(), "Parser cannot handle more arguments") {
		t.Errorf("many words: %v", err)
	}
}

// TestTokenizeArgvLimit checks that the words already in the argument
// vector (the program, "-t TABLE", "--set-counters P B") count towards
// MAX_ARGC, and that tokenize appends to them: the line's last word that
// fits and the first that does not.
func TestTokenizeArgvLimit(t *testing.T) {
	for _, tt := range []struct {
		prefix []string
		words  int
		ok     bool
	}{
		{[]string{"iptables-restore", "-t", "filter"}, maxArgc - 4, true},
		{[]string{"iptables-restore", "-t", "filter"}, maxArgc - 3, false},
		{[]string{"iptables-restore", "-t", "filter", "--set-counters", "1", "2"}, maxArgc - 7, true},
		{[]string{"iptables-restore", "-t", "filter", "--set-counters", "1", "2"}, maxArgc - 6, false},
	} {
		line := strings.TrimSpace(strings.Repeat("w ", tt.words))
		argv := append(make([]string, 0, len(tt.prefix)), tt.prefix...)
		got, f := tokenize(argv, line)
		if (f == nil) != tt.ok {
			t.Errorf("%d words after %d: got %v, want ok %v", tt.words, len(tt.prefix), f, tt.ok)
			continue
		}
		if f == nil && (len(got) != len(tt.prefix)+tt.words || got[0] != tt.prefix[0] || got[len(got)-1] != "w") {
			t.Errorf("%d words after %d: got %d words %q…", tt.words, len(tt.prefix), len(got), got[:len(tt.prefix)])
		}
	}
}

// TestRuleCounters checks the "[packets:bytes]" prefix of restore lines.
func TestRuleCounters(t *testing.T) {
	tests := []struct {
		in               string
		pcnt, bcnt, rest string
		has              bool
		err              string
	}{
		{"-A INPUT", "", "", "-A INPUT", false, ""},
		{"[1:2] -A INPUT", "1", "2", " -A INPUT", true, ""},
		{"[1:2]-A INPUT", "1", "2", "-A INPUT", true, ""},
		{"[1:] -A INPUT", "1", " -A INPUT", " -A INPUT", true, ""},
		{"[1 -A INPUT", "", "", "", false, "Bad line 7: need ]"},
		{"[:2] -A INPUT", "", "", "", false, "Bad line 7: need ]"},
	}
	for _, tt := range tests {
		p, b, rest, has, f := ruleCounters(tt.in, 7)
		if tt.err != "" {
			if f == nil || f.msg != tt.err {
				t.Errorf("%q: got %v, want %q", tt.in, f, tt.err)
			}
			continue
		}
		if f != nil || p != tt.pcnt || b != tt.bcnt || rest != tt.rest || has != tt.has {
			t.Errorf("%q: got %q %q %q %v %v", tt.in, p, b, rest, has, f)
		}
	}
}

// TestInternWord: every word of internedWords is found, as the same
// string, and words that are not interned are not.
func TestInternWord(t *testing.T) {
	for w := range internedWords {
		got, ok := internWord([]byte(w))
		if !ok || got != w {
			t.Errorf("%q: got %q, %v", w, got, ok)
		}
		for _, other := range []string{w + "x", "x" + w, w[:len(w)-1], strings.ToLower(w) + "Z"} {
			if _, interned := internedWords[other]; interned {
				continue
			}
			if got, ok := internWord([]byte(other)); ok {
				t.Errorf("%q: interned as %q", other, got)
			}
		}
	}
}
