package iptables

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRecentMatchOracle replays the transcripts recorded from
// iptables-legacy 1.8.9 on Linux 6.18 (testdata/recent_oracle_record.sh):
// every option, spelling and abbreviation prints back as iptables -S and
// -L print it, every refusal (libxtables', recent_check's and the
// kernel's EINVAL of recent_mt_check) has iptables' message and status.
func TestRecentMatchOracle(t *testing.T) {
	replayTranscripts(t, "testdata/recent_oracle_v4.txt", "testdata/recent_oracle_v6.txt", limitTranscript)
}

// TestRecentCodecRoundTrip checks that the binary form keeps every field
// of a recent match.
func TestRecentCodecRoundTrip(t *testing.T) {
	for _, m := range []ir.RecentMatch{
		{Flags: ir.RecentSet, Name: "DEFAULT", Mask: [16]byte{255, 255, 255, 255}},
		{Flags: ir.RecentUpdate | ir.RecentTTL | ir.RecentReap, Invert: true, Seconds: 4294967295, HitCount: 65535, Name: "a b", Dest: true,
			Mask: [16]byte{0xff, 0xff, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
	} {
		rs := ir.NewRuleset(ir.IPv4)
		rs.Chain("INPUT").Rules = append(rs.Chain("INPUT").Rules, &ir.Rule{Matches: []ir.Match{m.CloneMatch()}})
		data, err := rs.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ir.UnmarshalRuleset(data)
		if err != nil {
			t.Fatal(err)
		}
		got := back.Chain("INPUT").Rules[0].Matches[0].(*ir.RecentMatch)
		if *got != m {
			t.Errorf("round trip: %+v, want %+v", *got, m)
		}
	}
}

// TestRecentStampsMask checks the ring sizes recent_mt_check gives a
// list (ip_pkt_list_tot 0): 32 stamps by default, else the hit count
// rounded up to a power of two.
func TestRecentStampsMask(t *testing.T) {
	for _, c := range []struct{ hits, want uint32 }{{0, 31}, {1, 0}, {2, 1}, {6, 7}, {8, 7}, {9, 15}, {33, 63}, {65535, 65535}} {
		m := ir.RecentMatch{HitCount: c.hits}
		if got := m.StampsMask(); got != c.want {
			t.Errorf("hitcount %d: mask %d, want %d", c.hits, got, c.want)
		}
	}
}
