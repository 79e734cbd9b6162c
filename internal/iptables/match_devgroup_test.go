package iptables

import "testing"

// TestDevGroupOracle replays the transcripts recorded from iptables-legacy
// 1.8.9 (testdata/nat_oracle_record.sh records them again from the cases,
// the transcript's unindented lines): -m devgroup's options, masks, names
// of /etc/iproute2/group, the kernel's hook checks (also through a user
// chain), as iptables -S and -L print them, and every error with
// iptables' message and status.
func TestDevGroupOracle(t *testing.T) {
	replayTranscripts(t, "testdata/devgroup_oracle_v4.txt", "testdata/devgroup_oracle_v6.txt", tablesTranscript)
}
