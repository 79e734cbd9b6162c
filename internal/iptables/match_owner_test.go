package iptables

import "testing"

// TestOwnerOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): -m owner's options, user and group
// names, ranges, the kernel's refusals (a reversed range, hooks other than
// OUTPUT and POSTROUTING, also through a user chain), as iptables -S and
// -L print them, and every error with iptables' message and status. The
// IPv6 transcript leaves out one case: ip6tables-legacy -C finds a rule
// whose owner values differ (docs/differences.md).
func TestOwnerOracle(t *testing.T) {
	replayTranscripts(t, "testdata/owner_oracle_v4.txt", "testdata/owner_oracle_v6.txt", tablesTranscript)
}
