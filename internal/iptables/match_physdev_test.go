package iptables

import (
	"fmt"
	"strings"
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
	replayTranscripts(t, "testdata/physdev_oracle_v4.txt", "testdata/physdev_oracle_v6.txt", physdevTranscript)
}

// physdevTranscript is tablesTranscript with the warnings iptables prints
// on success (a weird character in a port name) in the rc line, as
// recorded.
func physdevTranscript(fam ir.Family, line string) (string, error) {
	out, err := tablesTranscript(fam, line)
	if err != nil || strings.Contains(line, " ;; ") {
		return out, err
	}
	args, err := shellSplit(line)
	if err != nil {
		return "", fmt.Errorf("split %q: %w", line, err)
	}
	cmd, err := ParseCommand(fam, args)
	if err != nil || len(cmd.Notices) == 0 {
		return out, nil
	}
	head, rest, _ := strings.Cut(out, "\n  rc=0 \n")
	return head + "\n  rc=0 " + strings.Join(cmd.Notices, "|") + "\n" + rest, nil
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
