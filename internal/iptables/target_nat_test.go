package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// tablesTranscript runs the commands of one case (separated by " ;; ")
// on an empty ruleset and renders the outcome as
// testdata/nat_oracle_*.txt do: "  rc=N STDERR" of the last command
// (newlines as "|"), its output ("  O: "), and on success its table's
// -S ("  S: ") and -L -n ("  L: ") lines.
func tablesTranscript(fam ir.Family, line string) (string, error) {
	rs := ir.NewRuleset(fam)
	rc, stderr, stdout, table := 0, "", "", ""
	for _, step := range strings.Split(line, " ;; ") {
		args, err := shellSplit(step)
		if err != nil {
			return "", fmt.Errorf("split %q: %w", step, err)
		}
		cmd, err := ParseCommand(fam, args)
		rc, stderr, stdout, table = 0, "", "", ""
		if err == nil {
			table = cmd.Table
			if cmd.Kind == CmdList {
				t := rs.TableByName(cmd.Table)
				if t == nil {
					t = ir.NewTable(fam, cmd.Table)
				}
				stdout, err = FormatList(t, cmd.Chain, ListOptions{})
			} else {
				stdout, err = cmd.Apply(rs)
			}
		}
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				return "", fmt.Errorf("%q: %w", step, err)
			}
			rc, stderr = e.Status, e.Msg
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n  rc=%d %s\n", line, rc, strings.ReplaceAll(strings.TrimRight(stderr, "\n"), "\n", "|"))
	prefixLines(&b, "  O: ", stdout)
	if rc == 0 {
		t := rs.TableByName(table)
		if t == nil {
			t = ir.NewTable(fam, table)
		}
		s, err := ListRules(t, "", 0, false)
		if err != nil {
			return "", err
		}
		prefixLines(&b, "  S: ", s)
		l, err := FormatList(t, "", ListOptions{Numeric: true})
		if err != nil {
			return "", err
		}
		prefixLines(&b, "  L: ", l)
	}
	return b.String(), nil
}

// prefixLines writes each line of text (without its final newline) after
// prefix.
func prefixLines(b *strings.Builder, prefix, text string) {
	if text = strings.TrimRight(text, "\n"); text == "" {
		return
	}
	for _, l := range strings.Split(text, "\n") {
		b.WriteString(prefix + l + "\n")
	}
}

// TestTablesOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again): the nat,
// mangle, raw and security tables' chains, the NAT targets' options as
// iptables -S and -L print them, and every error (iptables' option
// parsing, the kernel's table and hook checks) with iptables' message and
// status.
func TestTablesOracle(t *testing.T) {
	replayTranscripts(t, "testdata/nat_oracle_v4.txt", "testdata/nat_oracle_v6.txt", tablesTranscript)
}
