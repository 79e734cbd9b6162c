package iptables

import "testing"

// TestConnmarkOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): -m connmark and -j CONNMARK in every
// table, every spelling of the target (masks, shifts), as iptables -S and
// -L print them, deletion and checks by specification, and every error
// with iptables' message and status. The IPv6 transcript leaves out one
// case: ip6tables-legacy -C finds a rule whose CONNMARK (or MARK) values
// differ (docs/differences.md).
func TestConnmarkOracle(t *testing.T) {
	replayTranscripts(t, "testdata/connmark_oracle_v4.txt", "testdata/connmark_oracle_v6.txt", tablesTranscript)
}
