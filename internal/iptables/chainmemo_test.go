package iptables

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRestoreChainMemoFollowsChainChanges: the chains a restore's rule
// commands remember (chainMemo) are forgotten when chains are created,
// deleted or renamed, by commands or by chain lines, so a rule goes into
// the chain of its name at its line.
func TestRestoreChainMemoFollowsChainChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string
		want    []string // the rule lines of SaveTable; nil: the restore fails
		wantErr string
	}{
		{"deleted and created again", []string{":foo - [0:0]", "-A foo -j ACCEPT", "-A INPUT -j foo", "-D INPUT -j foo", "-F foo", "-X foo", "-N foo", "-A foo -j DROP"},
			[]string{"-A foo -j DROP"}, ""},
		{"renamed", []string{":a - [0:0]", "-A INPUT -j a", "-A a -j ACCEPT", "-E a b", "-A b -j DROP", "-A a -j DROP"},
			nil, "line 7 failed"},
		{"renamed, jump to the new name", []string{":a - [0:0]", "-A INPUT -j a", "-E a b", "-A INPUT -j b"},
			[]string{"-A INPUT -j b", "-A INPUT -j b"}, ""},
		{"target missing, then declared", []string{"-A INPUT -j ACCEPT", ":c - [0:0]", "-A INPUT -j c", "-A c -j RETURN"},
			[]string{"-A INPUT -j ACCEPT", "-A INPUT -j c", "-A c -j RETURN"}, ""},
		{"chain flushed by a chain line", []string{":d - [0:0]", "-A d -j ACCEPT", "-A d -j DROP"},
			[]string{"-A d -j ACCEPT", "-A d -j DROP"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := "*filter\n" + strings.Join(tc.lines, "\n") + "\nCOMMIT\n"
			for _, parsers := range []int{0, 2} {
				rs, err := restoreWith(ir.IPv4, strings.NewReader(input), func(func(string) bool) (*ir.Ruleset, error) { return nil, nil }, RestoreOptions{}, parsers)
				if tc.want == nil {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("parsers %d: error %v, want %q", parsers, err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("parsers %d: %v", parsers, err)
				}
				var got []string
				for _, l := range strings.Split(SaveTable(rs, false), "\n") {
					if strings.HasPrefix(l, "-A ") {
						got = append(got, l)
					}
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("parsers %d: rules\n%s\nwant\n%s", parsers, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			}
		})
	}
}
