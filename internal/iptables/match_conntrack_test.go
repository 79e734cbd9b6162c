package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestInetAton4 checks the numeric IPv4 forms getaddrinfo accepts for
// --ctorigsrc and friends (glibc's inet_aton_exact).
func TestInetAton4(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" when refused
	}{
		{"1.2.3.4", "1.2.3.4"},
		{"10.1", "10.0.0.1"},
		{"10.1.2", "10.1.0.2"},
		{"1", "0.0.0.1"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"010.1.1.1", "8.1.1.1"},
		{"0x10.1.1.1", "16.1.1.1"},
		{"0X10.0xff.1.1", "16.255.1.1"},
		{"08.1.1.1", ""},
		{"256.1.1.1", ""},
		{"1.256.1", ""},
		{"1.2.65535", "1.2.255.255"},
		{"1.2.65536", ""},
		{"0xffffffff", "255.255.255.255"},
		{"0x100000000", ""},
		{"0x", ""},
		{"0x.1", ""},
		{"0", "0.0.0.0"},
		{"1.2.3.256", ""},
		{"1.2.3.4.", ""},
		{"1.2.3.4.5", ""},
		{"1.2.3.4 ", ""},
		{" 1.2.3.4", ""},
		{"", ""},
		{".1", ""},
		{"1..2", ""},
		{"-1", ""},
		{"a", ""},
	}
	for _, tt := range tests {
		got, ok := inetAton4(tt.in)
		switch {
		case tt.want == "" && ok:
			t.Errorf("inetAton4(%q) = %v, want refusal", tt.in, netip.AddrFrom4(got))
		case tt.want != "" && (!ok || netip.AddrFrom4(got).String() != tt.want):
			t.Errorf("inetAton4(%q) = %v, %v; want %s", tt.in, netip.AddrFrom4(got), ok, tt.want)
		}
	}
}

// TestCtLists checks the state and status lists: prefixes of the names in
// any case, and the element the error messages quote from.
func TestCtLists(t *testing.T) {
	tests := []struct {
		names   []ctName
		what    string
		in      string
		want    uint16
		wantErr string
	}{
		{ctStateNames, "ctstate", "NEW", ir.CtStateNew, ""},
		{ctStateNames, "ctstate", "e,R,inv,u,s,d", ir.CtStateEstablished | ir.CtStateRelated | ir.CtStateInvalid | ir.CtStateUntracked | ir.CtStateSNAT | ir.CtStateDNAT, ""},
		{ctStateNames, "ctstate", "NEWX", 0, `Bad ctstate "NEWX"`},
		{ctStateNames, "ctstate", "NEW,foo,BAR", 0, `Bad ctstate "foo,BAR"`},
		{ctStateNames, "ctstate", "NEW,", 0, `Bad ctstate ""`},
		{ctStateNames, "ctstate", ",NEW", 0, `Bad ctstate ",NEW"`},
		{ctStatusNames, "ctstatus", "none", 0, ""},
		{ctStatusNames, "ctstatus", "NONE,ASSURED", ir.CtStatusAssured, ""},
		{ctStatusNames, "ctstatus", "e,s,a,c", ir.CtStatusExpected | ir.CtStatusSeenReply | ir.CtStatusAssured | ir.CtStatusConfirmed, ""},
		{ctStatusNames, "ctstatus", ",", 0, `Bad ctstatus ","`},
	}
	for _, tt := range tests {
		got, f := parseCtList(tt.names, tt.what, tt.in)
		switch {
		case tt.wantErr != "" && (f == nil || f.msg != tt.wantErr):
			t.Errorf("%s %q: got %#x %v, want error %q", tt.what, tt.in, got, f, tt.wantErr)
		case tt.wantErr == "" && (f != nil || got != tt.want):
			t.Errorf("%s %q: got %#x %v, want %#x", tt.what, tt.in, got, f, tt.want)
		}
	}
}

// TestConntrackPrint checks -S and -L (with and without -n) of parsed
// conntrack and state matches; the recorded oracle covers far more, this
// pins the formats in one place.
func TestConntrackPrint(t *testing.T) {
	tests := []struct {
		fam               ir.Family
		args              string
		save, list, listN string
	}{
		{ir.IPv4, "-m state ! --state established,new",
			"-m state ! --state NEW,ESTABLISHED", "! state NEW,ESTABLISHED", "! state NEW,ESTABLISHED"},
		{ir.IPv4, "-m conntrack --ctstatus NONE --ctexpire 7:7 --ctorigsrc 127.0.0.1/0x10 --ctorigdst 0.0.0.0/0 --ctdir reply",
			"-m conntrack --ctorigsrc 127.0.0.1/16 --ctorigdst 0.0.0.0/0 --ctstatus NONE --ctexpire 7 --ctdir REPLY",
			"ctorigsrc localhost/16 ctorigdst anywhere ctstatus NONE ctexpire 7 ctdir REPLY",
			"ctorigsrc 127.0.0.1/16 ctorigdst 0.0.0.0/0 ctstatus NONE ctexpire 7 ctdir REPLY"},
		{ir.IPv4, "-m conntrack ! --ctrepldstport 5:6 --ctreplsrcport : ! --ctproto udp --ctreplsrc 10.1.2.3/255.0.255.0",
			"-m conntrack ! --ctproto 17 --ctreplsrc 10.1.2.3 --ctreplsrcport 0:65535 ! --ctrepldstport 5:6",
			"! ctproto 17 ctreplsrc 10.1.2.3 ctreplsrcport 0:65535 ! ctrepldstport 5:6",
			"! ctproto 17 ctreplsrc 10.1.2.3 ctreplsrcport 0:65535 ! ctrepldstport 5:6"},
		{ir.IPv6, "-m conntrack ! --ctorigsrc 2001:db8::1/ffff:ffff:: --ctrepldst ::",
			"-m conntrack ! --ctorigsrc 2001:db8::1/32 --ctrepldst ::",
			"! ctorigsrc 2001:db8::1/32 ctrepldst anywhere",
			"! ctorigsrc 2001:db8::1/32 ctrepldst ::"},
	}
	for _, tt := range tests {
		words, err := Tokenize("-A INPUT " + tt.args)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := ParseCommand(tt.fam, words)
		if err != nil {
			t.Errorf("%s: %v", tt.args, err)
			continue
		}
		rs := ir.NewRuleset(tt.fam)
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		r := rs.Chain("INPUT").Rules[0]
		if got := FormatRule(tt.fam, "INPUT", r, false); got != "-A INPUT "+tt.save {
			t.Errorf("%s: -S\n got %s\nwant -A INPUT %s", tt.args, got, tt.save)
		}
		for _, numeric := range []bool{false, true} {
			want := tt.list
			if numeric {
				want = tt.listN
			}
			out, err := FormatList(rs, "INPUT", ListOptions{Numeric: numeric})
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.Split(out, "\n"); len(lines) < 3 || !strings.HasSuffix(lines[2], " "+want) {
				t.Errorf("%s: -L (numeric %v)\n got %q\nwant suffix %q", tt.args, numeric, lines[2], want)
			}
		}
	}
}
