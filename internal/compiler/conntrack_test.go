package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestConntrackRefused checks that rules with a conntrack or state match
// are refused with a message naming the options (the data plane does not
// track connections yet), in either family and in any chain.
func TestConntrackRefused(t *testing.T) {
	tests := []struct {
		fam     ir.Family
		rule    string
		wantErr string
	}{
		{ir.IPv4, "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
			"chain INPUT rule 1: conntrack match: connection tracking (--ctstate) is not supported by xfw's data plane yet"},
		{ir.IPv4, "-A INPUT -m state --state NEW -j ACCEPT",
			"chain INPUT rule 1: state match: connection tracking (--state) is not supported by xfw's data plane yet"},
		{ir.IPv4, "-A FORWARD -p tcp --dport 22 -m conntrack ! --ctproto udp --ctorigsrc 10.0.0.0/8 --ctreplsrcport 80 --ctstatus ASSURED --ctexpire 1:9 --ctdir REPLY",
			"chain FORWARD rule 1: conntrack match: connection tracking (--ctproto, --ctorigsrc, --ctreplsrcport, --ctstatus, --ctexpire, --ctdir) is not supported by xfw's data plane yet"},
		{ir.IPv6, "-A OUTPUT -m conntrack --ctrepldst 2001:db8::/32 -j DROP",
			"chain OUTPUT rule 1: conntrack match: connection tracking (--ctrepldst) is not supported by xfw's data plane yet"},
	}
	for _, tt := range tests {
		words, err := iptables.Tokenize(tt.rule)
		if err != nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		cmd, err := iptables.ParseCommand(tt.fam, words)
		if err != nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		rs := ir.NewRuleset(tt.fam)
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		if _, err := Compile(rs, Options{}); err == nil || err.Error() != tt.wantErr {
			t.Errorf("%s:\n got %v\nwant %s", tt.rule, err, tt.wantErr)
		}
	}
}
