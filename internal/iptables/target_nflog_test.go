package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNFLogOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): NFLOG's options and their bounds,
// --nflog-range's warning and its exclusion with --nflog-size, prefix
// quoting and truncation, -D and -C comparing the options, NFLOG in the
// mangle and raw tables and in a user chain, as iptables -S and -L print
// them, and every error with iptables' message and status. The IPv6
// transcript leaves out one case: ip6tables-legacy -C finds a rule whose
// NFLOG copy-length flag differs (docs/differences.md).
func TestNFLogOracle(t *testing.T) {
	replayTranscripts(t, "testdata/nflog_oracle_v4.txt", "testdata/nflog_oracle_v6.txt", noticeTranscript)
}

// noticeTranscript is tablesTranscript with the warnings the last command
// printed while parsing (--nflog-range's, a weird character in a physdev
// name) at the head of its rc line's standard error, as recorded (errors
// of parsing carry them already).
func noticeTranscript(fam ir.Family, line string) (string, error) {
	out, err := tablesTranscript(fam, line)
	if err != nil {
		return out, err
	}
	steps := strings.Split(line, " ;; ")
	args, err := shellSplit(steps[len(steps)-1])
	if err != nil {
		return "", fmt.Errorf("split %q: %w", line, err)
	}
	cmd, err := ParseCommand(fam, args)
	if err != nil || len(cmd.Notices) == 0 {
		return out, nil
	}
	head, rest, _ := strings.Cut(out, "\n")
	const rcLead = "  rc=" // the rc line: "  rc=N MESSAGE"
	rcField, msg, _ := strings.Cut(rest[len(rcLead):], " ")
	rcField = rcLead + rcField
	notices := strings.Join(cmd.Notices, "|")
	if !strings.HasPrefix(msg, "\n") {
		notices += "|"
	}
	return head + "\n" + rcField + " " + notices + msg, nil
}

// TestNFLogOptionsText checks the options NFLOG prints for save and list,
// among them what the transcripts do not reach: a zero --nflog-size and
// a prefix iptables quotes.
func TestNFLogOptionsText(t *testing.T) {
	tests := []struct {
		o          *ir.NFLogOptions
		save, list string
	}{
		{nil, "", ""},
		{&ir.NFLogOptions{}, "", ""},
		{&ir.NFLogOptions{Size: true}, " --nflog-size 0", " nflog-size 0"},
		{&ir.NFLogOptions{Len: 9}, " --nflog-range 9", " nflog-range 9"},
		{&ir.NFLogOptions{Prefix: `a"b`, Group: 3, Threshold: 2},
			` --nflog-prefix "a\"b" --nflog-group 3 --nflog-threshold 2`,
			` nflog-prefix "a\"b" nflog-group 3 nflog-threshold 2`},
	}
	for _, tt := range tests {
		if got := nflogOptionsText(tt.o, "--"); got != tt.save {
			t.Errorf("save %+v = %q, want %q", tt.o, got, tt.save)
		}
		if got := nflogOptionsText(tt.o, ""); got != tt.list {
			t.Errorf("list %+v = %q, want %q", tt.o, got, tt.list)
		}
	}
}

// TestRestoreWarnings checks that iptables-restore writes the warnings of
// the lines it parses, as iptables-legacy-restore does on standard error
// (recorded: one --nflog-range warning per line using it).
func TestRestoreWarnings(t *testing.T) {
	in := "*filter\n-A INPUT -j NFLOG --nflog-range 5\n-A INPUT -j NFLOG --nflog-size 5\n" +
		"-A INPUT -j NFLOG --nflog-range 7 --nflog-group 2\nCOMMIT\n"
	var w strings.Builder
	if _, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{Warnings: &w}); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat(nflogRangeWarning+"\n", 2)
	if w.String() != want {
		t.Errorf("warnings %q, want %q", w.String(), want)
	}
}
