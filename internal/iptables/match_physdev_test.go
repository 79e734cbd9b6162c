package iptables

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestPhysdevOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): -m physdev's options, inverted and
// combined, wildcards and odd names, the kernel's OUTPUT check (also
// through a user chain, and in mangle), as iptables -S and -L print them,
// and every error with iptables' message and status.
func TestPhysdevOracle(t *testing.T) {
	replayTranscripts(t, "testdata/physdev_oracle_v4.txt", "testdata/physdev_oracle_v6.txt", noticeTranscript)
}

// TestPhysdevNameMatches checks the name comparison of --physdev-in and
// --physdev-out (a trailing "+" a prefix, "" everything).
func TestPhysdevNameMatches(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"veth0", "veth0", true},
		{"veth0", "veth01", false},
		{"veth+", "veth01", true},
		{"veth+", "vet", false},
		{"+", "eth0", true},
		{"", "eth0", true},
		{"a+b", "a+b", true},
		{"a+b", "axb", false},
	}
	for _, tt := range tests {
		if got := ir.PhysdevNameMatches(tt.pattern, tt.name); got != tt.want {
			t.Errorf("PhysdevNameMatches(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}
