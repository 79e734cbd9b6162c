package iptables

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestSetTargetOracle replays the transcripts recorded from
// iptables-legacy 1.8.9 and ipset (testdata/settarget_oracle_record.sh
// records them again from the cases): --add-set, --del-set, --exist and
// --timeout with their bounds and order, the sets' existence and family,
// the directions, "!" ignored as libxt_SET ignores it, and every error
// with iptables' message and status. --map-set with a flag, which the
// kernel refuses for a set without skbinfo (EINVAL), is refused by xfw
// before that (TestSetTargetMapSetRefused).
func TestSetTargetOracle(t *testing.T) {
	replayTranscripts(t, "testdata/settarget_oracle_v4.txt", "testdata/settarget_oracle_v6.txt", setTranscript)
}

// TestSetTargetMapSetRefused checks that --map-set, once iptables' own
// checks pass, is refused as not supported by xfw, with status 2.
func TestSetTargetMapSetRefused(t *testing.T) {
	for _, line := range []string{
		"-j SET --map-set bl src --map-mark",
		"-j SET --add-set bl src --map-set bl dst --map-prio --map-queue",
	} {
		got, err := setTranscript(ir.IPv4, line)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "rc=2 iptables v1.8.9 (legacy): SET: --map-set is not supported by xfw") {
			t.Errorf("%s:\n%s", line, got)
		}
	}
}

// TestSetTargetListing checks iptables -L's form of the SET target
// (set_target_print_v3), as iptables-legacy printed these rules.
func TestSetTargetListing(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"--add-set bl src,dst", " add-set bl src,dst"},
		{"--add-set bl src --exist --timeout 60", " add-set bl src exist timeout 60"},
		{"--del-set bl src --add-set nets dst", " add-set nets dst del-set bl src"},
		{"--add-set bl src --timeout 0", " add-set bl src timeout 0"},
	} {
		cmd, err := ParseCommandWith(ir.IPv4, append([]string{"-A", "INPUT", "-j", "SET"}, strings.Fields(c.in)...), ParseOptions{Sets: fakeLookup})
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		rules, f := cmd.resolveTargets(nil)
		if f != nil {
			t.Fatalf("%s: %v", c.in, f.render("iptables", 0))
		}
		if got := setTargetText(rules[0].Target.Set, ""); got != c.want {
			t.Errorf("%s: -L prints %q, want %q", c.in, got, c.want)
		}
	}
}
