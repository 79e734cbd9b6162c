package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// limitTranscript runs "-A INPUT ARGS" on an empty filter table and
// renders the outcome as testdata/limit_oracle_*.txt do: the arguments,
// "  rc=N STDERR" (newlines as "|") and, on success, "  S: " with the rule
// as iptables -S prints it and "  L: " with its line of iptables -L -n.
func limitTranscript(fam ir.Family, line string) (string, error) {
	args, err := shellSplit(line)
	if err != nil {
		return "", fmt.Errorf("split %q: %w", line, err)
	}
	rs := ir.NewRuleset(fam)
	cmd, err := ParseCommand(fam, append([]string{"-A", "INPUT"}, args...))
	if err == nil {
		_, err = cmd.Apply(rs)
	}
	rc, stderr := 0, ""
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			return "", fmt.Errorf("%q: %w", line, err)
		}
		rc, stderr = e.Status, e.Msg+"\n"
	}
	out := fmt.Sprintf("%s\n  rc=%d %s\n", line, rc, strings.ReplaceAll(stderr, "\n", "|"))
	if rc == 0 {
		out += "  S: " + FormatRule(fam, "INPUT", rs.Chain("INPUT").Rules[0], false) + "\n"
		list, err := FormatList(rs, "INPUT", ListOptions{Numeric: true})
		if err != nil {
			return "", err
		}
		out += "  L: " + strings.Split(list, "\n")[2] + "\n"
	}
	return out, nil
}

// TestLimitMatchOracle replays the transcripts recorded from
// iptables-legacy 1.8.9 (CONFIG_HZ=250, the kernel's ERANGE depends on
// it): rates and bursts print back as iptables -S and -L print them (with
// print_rate's rounding), every error has iptables' message and status.
func TestLimitMatchOracle(t *testing.T) {
	defer func(f func() uint32) { KernelHZ = f }(KernelHZ)
	KernelHZ = func() uint32 { return 250 }
	replayTranscripts(t, "testdata/limit_oracle_v4.txt", "testdata/limit_oracle_v6.txt", limitTranscript)
}

// TestLimitRateString checks print_rate's choice of unit against periods
// whose unit iptables 1.8.9 printed (recorded with iptables-legacy).
func TestLimitRateString(t *testing.T) {
	for _, c := range []struct {
		rate string
		want string
	}{
		{"3/hour", "3/hour"}, {"1000/hour", "1000/hour"}, {"61/min", "61/min"},
		{"86401/day", "1/sec"}, {"6666/s", "10000/sec"}, {"3.7/m", "3/min"},
		{"4294967297/s", "1/sec"}, {"-4294967295/s", "1/sec"},
	} {
		avg, ok := parseLimitRate(c.rate)
		if !ok {
			t.Errorf("%s: not parsed", c.rate)
			continue
		}
		if got := limitRateString(avg); got != c.want {
			t.Errorf("%s: %s, want %s", c.rate, got, c.want)
		}
	}
}
