package iptables

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestMangleOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): TCPMSS, DSCP, TOS, TTL (IPv4), HL
// (IPv6), CT --notrack and NOTRACK in their tables and hooks, as iptables
// -S and -L print them, deletion and checks by specification, and every
// error with iptables' message and status (the kernel's checks: TCPMSS's
// -p tcp and SYN match, clamping only from FORWARD, OUTPUT and
// POSTROUTING, DSCP/TOS/TTL/HL only in mangle, CT and NOTRACK only in
// raw).
func TestMangleOracle(t *testing.T) {
	replayTranscripts(t, "testdata/mangle_oracle_v4.txt", "testdata/mangle_oracle_v6.txt", tablesTranscript)
}

// TestCTOtherOptionsRefused checks that the CT target's uses besides
// --notrack, which iptables accepts, are refused by name (exit 2).
func TestCTOtherOptionsRefused(t *testing.T) {
	for _, rule := range []string{
		"-j CT", "-j CT --zone 1", "-j CT --notrack --zone 1", "-j CT --helper ftp",
		"-j CT --ctevents new", "-j CT --expevents new", "-j CT --timeout x",
		"-j CT --zone-orig 1", "-j CT --zone-reply 1",
	} {
		for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
			args := append([]string{"-t", "raw", "-A", "PREROUTING"}, strings.Fields(rule)...)
			_, err := ParseCommandWith(fam, args, ParseOptions{})
			if err == nil {
				t.Errorf("%s %q: accepted, want refused", fam, rule)
				continue
			}
			e, ok := err.(*Error)
			if !ok || e.Status != StatusParameter || !strings.Contains(err.Error(), "only -j CT --notrack is supported by xfw") {
				t.Errorf("%s %q: got %v, want the CT refusal with status 2", fam, rule, err)
			}
		}
	}
}
