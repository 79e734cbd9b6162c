package iptables

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

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

// TestOwnerForeignUserNS: a writer outside the user namespace that owns
// the network namespace (owner_check: current_user_ns() != net->user_ns)
// gets EINVAL for --uid-owner and --gid-owner, as iptables-legacy does
// (tests/e2e TestOwnerUserNSAgainstKernel compares it with the kernel);
// --socket-exists alone loads.
func TestOwnerForeignUserNS(t *testing.T) {
	saved := ownerUserNSOK
	t.Cleanup(func() { ownerUserNSOK = saved })
	ownerUserNSOK = func() bool { return false }
	for _, tt := range []struct {
		rule, err string
	}{
		{"-A OUTPUT -m owner --uid-owner 0 -j ACCEPT", "iptables-restore: line 6 failed"},
		{"-A OUTPUT -m owner ! --gid-owner 5-7 -j ACCEPT", "iptables-restore: line 6 failed"},
		{"-A OUTPUT -m owner --socket-exists -j ACCEPT", ""},
	} {
		in := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + tt.rule + "\nCOMMIT\n"
		_, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.err {
			t.Errorf("%s: error %q, want %q", tt.rule, got, tt.err)
		}
	}
}
