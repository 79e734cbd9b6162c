package iptables

import (
	"strings"
	"testing"
	"unsafe"
)

// TestKeptTextSharesNoLine checks that keptText copies a text out of the
// string it was cut from (a line read ahead), keeps equal consecutive texts
// as one copy, and that a kept text never changes as more are kept.
func TestKeptTextSharesNoLine(t *testing.T) {
	var k keptText
	line := "-A KUBE-SEP-X -m comment --comment ns1/svc1:p80 -j KUBE-MARK-MASQ"
	i := strings.Index(line, "ns1/")
	word := line[i : i+len("ns1/svc1:p80")]
	kept := k.keep(word)
	if kept != word {
		t.Fatalf("kept %q, want %q", kept, word)
	}
	lineStart := uintptr(unsafe.Pointer(unsafe.StringData(line)))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(kept))); p >= lineStart && p < lineStart+uintptr(len(line)) {
		t.Fatalf("kept text shares the line's memory")
	}
	again := k.keep(strings.Clone(word))
	if unsafe.StringData(again) != unsafe.StringData(kept) {
		t.Errorf("an equal consecutive text was copied again")
	}
	var all []string
	var want []string
	for n := 0; n < 3*keptTextBlock/8; n++ {
		s := strings.Repeat(string(rune('a'+n%26)), 1+n%13)
		all = append(all, k.keep(s))
		want = append(want, s)
	}
	long := strings.Repeat("x", keptTextBlock)
	all = append(all, k.keep(long))
	want = append(want, long)
	all = append(all, k.keep(""))
	want = append(want, "")
	for n := range all {
		if all[n] != want[n] {
			t.Fatalf("text %d is %q, want %q", n, all[n], want[n])
		}
	}
	if kept != word {
		t.Errorf("the first kept text changed to %q", kept)
	}
}
