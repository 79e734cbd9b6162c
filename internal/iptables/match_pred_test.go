package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// predTranscript is limitTranscript with the warnings iptables prints on
// success (the time match's --localtz) in the rc line, as recorded.
func predTranscript(fam ir.Family, line string) (string, error) {
	args, err := shellSplit(line)
	if err != nil {
		return "", fmt.Errorf("split %q: %w", line, err)
	}
	cmd, err := ParseCommand(fam, append([]string{"-A", "INPUT"}, args...))
	if err != nil {
		return limitTranscript(fam, line)
	}
	out, err := limitTranscript(fam, line)
	if err != nil || len(cmd.Notices) == 0 {
		return out, err
	}
	head, rest, _ := strings.Cut(out, "\n  rc=0 \n")
	return head + "\n  rc=0 " + strings.Join(cmd.Notices, "|") + "|\n" + rest, nil
}

// TestPredicateMatchOracle replays the string, u32 and time transcripts
// recorded from iptables-legacy 1.8.9: every accepted rule prints back as
// iptables -S and -L print it, every error has iptables' message and
// status (the kernel's checks included).
func TestPredicateMatchOracle(t *testing.T) {
	for _, name := range []string{"string", "u32", "time"} {
		replayTranscripts(t, "testdata/"+name+"_oracle_v4.txt", "testdata/"+name+"_oracle_v6.txt", predTranscript)
	}
}
