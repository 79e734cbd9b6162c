package iptables

import "testing"

// TestMarkStatisticOracle replays the transcripts recorded from
// iptables-legacy 1.8.9 (testdata/nat_oracle_record.sh records them again
// from the cases, the transcript's unindented lines): -m statistic, -m
// mark and -j MARK in every table, their options as iptables -S and -L
// print them, deletion and checks by specification, and every error with
// iptables' message and status.
func TestMarkStatisticOracle(t *testing.T) {
	replayTranscripts(t, "testdata/mark_oracle_v4.txt", "testdata/mark_oracle_v6.txt", tablesTranscript)
}
