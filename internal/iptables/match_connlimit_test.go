package iptables

import "testing"

// TestConnlimitMatchOracle replays the transcripts recorded from
// iptables-legacy 1.8.9: --connlimit-upto/--connlimit-above and their
// inversions (each the other's inverse in -S), masks as prefix lengths or
// netmasks (a netmask that is no prefix, or an IPv4 number beyond 32 read
// as one, stands for the full mask), saddr/daddr, and every message.
func TestConnlimitMatchOracle(t *testing.T) {
	replayTranscripts(t, "testdata/connlimit_oracle_v4.txt", "testdata/connlimit_oracle_v6.txt", limitTranscript)
}

// TestCPUMatchOracle replays the cpu match's transcripts recorded from
// iptables-legacy 1.8.9 (the mandatory --cpu, its range and inversion).
func TestCPUMatchOracle(t *testing.T) {
	replayTranscripts(t, "testdata/cpu_oracle_v4.txt", "testdata/cpu_oracle_v6.txt", limitTranscript)
}
