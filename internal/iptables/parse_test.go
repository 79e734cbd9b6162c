package iptables

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// mustParseRule parses a rule for chain or fails the test.
func mustParseRule(t *testing.T, fam ir.Family, chain, spec string) []*ir.Rule {
	t.Helper()
	args, err := shellSplit(spec)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRule(fam, chain, args)
	if err != nil {
		t.Fatalf("ParseRule(%q): %v", spec, err)
	}
	return rules
}

// TestParsePrintRoundTrip checks that rules print back as iptables-save
// prints them (values recorded from iptables 1.8.9).
func TestParsePrintRoundTrip(t *testing.T) {
	tests := []struct {
		fam       ir.Family
		chain, in string
		want      string // "=" means the input itself
	}{
		{ir.IPv4, "INPUT", "-s 10.0.0.0/8 ! -i eth+ -p tcp -m tcp --dport 22:25 -j ACCEPT", "="},
		{ir.IPv4, "INPUT", "-p tcp --dport 22 -j ACCEPT", "-p tcp -m tcp --dport 22 -j ACCEPT"},
		{ir.IPv4, "INPUT", "-s 10.11.12.13/255.0.255.0", "-s 10.0.12.0/255.0.255.0"},
		{ir.IPv4, "INPUT", "! -s 0.0.0.0", "! -s 0.0.0.0/32"},
		{ir.IPv4, "INPUT", "-s 1.2.3.4/0", ""},
		{ir.IPv4, "FORWARD", "--protocol=tcp --source=1.2.3.4 --destination=5.6.7.8/32 --in-interface=eth0 --out-interface=eth1 --jump=ACCEPT",
			"-s 1.2.3.4/32 -d 5.6.7.8/32 -i eth0 -o eth1 -p tcp -j ACCEPT"},
		{ir.IPv4, "FORWARD", "-ptcp -s1.2.3.4 -d5.6.7.8/32 -ieth0 -oeth1 -jACCEPT",
			"-s 1.2.3.4/32 -d 5.6.7.8/32 -i eth0 -o eth1 -p tcp -j ACCEPT"},
		{ir.IPv4, "INPUT", "-p tcp --syn", "-p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN"},
		{ir.IPv4, "INPUT", "-p tcp --sport ssh:http --tcp-option 5", "-p tcp -m tcp --sport 22:80 --tcp-option 5"},
		{ir.IPv4, "INPUT", "-p tcp ! --sport :", "-p tcp -m tcp ! --sport 0:65535"},
		{ir.IPv4, "INPUT", "-p udp --dport 53:", "-p udp -m udp --dport 53:65535"},
		{ir.IPv4, "INPUT", "-m comment --comment x -p tcp --dport 22", "-p tcp -m comment --comment x -m tcp --dport 22"},
		{ir.IPv4, "INPUT", "-p tcp -m multiport ! --destination-ports 1:2,3", "-p tcp -m multiport ! --dports 1:2,3"},
		{ir.IPv4, "INPUT", "-p icmp --icmp-type echo-request", "-p icmp -m icmp --icmp-type 8"},
		{ir.IPv4, "INPUT", "-p icmp -m icmp --icmp-type host-redirect", "-p icmp -m icmp --icmp-type 5/1"},
		{ir.IPv4, "INPUT", "-p icmp -m icmp --icmp-type 255/255", "-p icmp -m icmp --icmp-type 255/255"},
		{ir.IPv4, "INPUT", "-p icmp -m icmp --icmp-type 255", "-p icmp -m icmp --icmp-type any"},
		{ir.IPv6, "INPUT", "-p icmpv6 --icmpv6-type no-route", "-p ipv6-icmp -m icmp6 --icmpv6-type 1/0"},
		{ir.IPv6, "INPUT", "-p ipv6-icmp -m icmp6 --icmpv6-type mld-listener-reduction", "-p ipv6-icmp -m icmp6 --icmpv6-type 132"},
		{ir.IPv4, "INPUT", "-m iprange ! --dst-range 1.1.1.1-1.1.1.10 --src-range 010.1.1-10.1.1.9", "-m iprange --src-range 8.1.1.0-10.1.1.9 ! --dst-range 1.1.1.1-1.1.1.10"},
		{ir.IPv4, "INPUT", `-m comment --comment "a \"b\" c"`, `-m comment --comment "a \"b\" c"`},
		{ir.IPv4, "INPUT", "-m length ! --length :100", "-m length ! --length 0:100"},
		{ir.IPv4, "INPUT", "-m ttl ! --ttl-eq 5", "="},
		{ir.IPv6, "INPUT", "-m hl --hl 5", "-m hl --hl-eq 5"},
		{ir.IPv4, "FORWARD", "-m mac --mac-source AA:b:C:d:E:f", "-m mac --mac-source aa:0b:0c:0d:0e:0f"},
		{ir.IPv4, "INPUT", "-j REJECT", "-j REJECT --reject-with icmp-port-unreachable"},
		{ir.IPv4, "INPUT", "-p tcp -j REJECT --reject-with tcp-rst", "-p tcp -j REJECT --reject-with tcp-reset"},
		{ir.IPv6, "INPUT", "-j REJECT --reject-with adm", "-j REJECT --reject-with icmp6-adm-prohibited"},
		{ir.IPv4, "INPUT", "-j LOG --log-level warning --log-prefix 'x y' --log-uid", `-j LOG --log-prefix "x y" --log-uid`},
		{ir.IPv4, "INPUT", "-j LOG --log-level alert", "-j LOG --log-level 1"},
		{ir.IPv4, "INPUT", "-f -c 5 6 -j DROP", "-f -j DROP"},
		{ir.IPv4, "INPUT", "! -f -p 47", "-p gre ! -f"},
		{ir.IPv4, "FORWARD", "! -i +", "="},
		{ir.IPv4, "FORWARD", "-i + -p tcp", "-p tcp"},
		{ir.IPv6, "INPUT", "-s 2001:db8::1/64 -d ::ffff:0:0/96", "-s 2001:db8::/64 -d ::ffff:0.0.0.0/96"},
		{ir.IPv6, "INPUT", "-s 2001:db8::/ffff:0:ffff::", "-s 2001::/ffff:0:ffff::"},
		{ir.IPv4, "mychain", "-g other", "="},
	}
	for _, tt := range tests {
		want := tt.want
		if want == "=" {
			want = tt.in
		}
		rules := mustParseRule(t, tt.fam, tt.chain, tt.in)
		if len(rules) != 1 {
			t.Errorf("%q: %d rules", tt.in, len(rules))
			continue
		}
		if got := FormatRuleSpec(tt.fam, rules[0]); got != want {
			t.Errorf("%s %q:\n got %q\nwant %q", tt.fam, tt.in, got, want)
		}
		// What is printed parses back to the same rule.
		again := mustParseRule(t, tt.fam, tt.chain, want)
		if !RulesEqual(tt.fam, rules[0], again[0]) {
			t.Errorf("%q does not parse back to the same rule", want)
		}
	}
}

// TestParseRuleIR checks the IR a rule produces.
func TestParseRuleIR(t *testing.T) {
	r := mustParseRule(t, ir.IPv4, "INPUT", "-s 10.1.2.3/8 ! -i eth+ -p TCP -m tcp ! --dport 22:25 --syn -m comment --comment hi -c 7 8 -j LOG --log-level 2")[0]
	want := &ir.Rule{
		Src:     ir.AddrMatch{Set: true, Addr: netip.MustParseAddr("10.0.0.0"), Mask: netip.MustParseAddr("255.0.0.0")},
		InIface: ir.IfaceMatch{Set: true, Invert: true, Name: "eth+"},
		Proto:   ir.ProtoMatch{Set: true, Num: 6, Spelling: "tcp"},
		Matches: []ir.Match{
			&ir.TCPMatch{
				SrcPort: ir.PortMatch{Range: ir.PortRange{First: 0, Last: 65535}},
				DstPort: ir.PortMatch{Set: true, Invert: true, Range: ir.PortRange{First: 22, Last: 25}},
				Flags:   ir.TCPFlagsMatch{Set: true, Mask: 0x17, Comp: ir.TCPFlagSYN},
			},
			&ir.CommentMatch{Text: "hi"},
		},
		Target:   ir.Target{Kind: ir.TargetLog, Log: &ir.LogOptions{Level: 2, LevelSet: true}},
		Counters: ir.Counters{Packets: 7, Bytes: 8},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}

	r = mustParseRule(t, ir.IPv6, "FORWARD", "-p 58 -m icmp6 --icmpv6-type 1/3:4 -j mychain")[0]
	if m, ok := r.Matches[0].(*ir.ICMPMatch); !ok || !m.V6 || m.Type != 1 || m.CodeMin != 3 || m.CodeMax != 4 || m.Any {
		t.Errorf("icmp6 match: %+v", r.Matches[0])
	}
	if r.Target.Kind != ir.TargetJump || r.Target.Chain != "mychain" {
		t.Errorf("target: %+v", r.Target)
	}

	r = mustParseRule(t, ir.IPv4, "INPUT", "-p icmp -m icmp --icmp-type any")[0]
	if m := r.Matches[0].(*ir.ICMPMatch); !m.Any || m.Type != 255 {
		t.Errorf("any: %+v", m)
	}

	r = mustParseRule(t, ir.IPv6, "INPUT", "-p all")[0]
	if !r.Proto.Set || r.Proto.Num != 0 {
		t.Errorf("ip6 -p all must stay recorded (it sets IP6T_F_PROTO): %+v", r.Proto)
	}
}

// TestParseRuleAddressLists checks the expansion of -s/-d lists.
func TestParseRuleAddressLists(t *testing.T) {
	rules := mustParseRule(t, ir.IPv4, "INPUT", "-s 1.2.3.4/24,5.6.7.8/16 -d 9.9.9.9,8.8.8.8 -j ACCEPT")
	want := []string{
		"-s 1.2.3.0/24 -d 9.9.9.9/32 -j ACCEPT",
		"-s 1.2.3.0/24 -d 8.8.8.8/32 -j ACCEPT",
		"-s 5.6.0.0/16 -d 9.9.9.9/32 -j ACCEPT",
		"-s 5.6.0.0/16 -d 8.8.8.8/32 -j ACCEPT",
	}
	var got []string
	for _, r := range rules {
		got = append(got, FormatRuleSpec(ir.IPv4, r))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestParseErrors checks messages and exit statuses (from iptables 1.8.9).
func TestParseErrors(t *testing.T) {
	const try4 = "\nTry `iptables -h' or 'iptables --help' for more information."
	tests := []struct {
		fam    ir.Family
		chain  string
		in     string
		status int
		msg    string
	}{
		{ir.IPv4, "INPUT", "--foo", 2, `iptables v1.8.9 (legacy): unknown option "--foo"` + try4},
		{ir.IPv4, "INPUT", "-m foo", 2, "iptables v1.8.9 (legacy): Couldn't load match `foo':No such file or directory\n" + try4},
		{ir.IPv4, "INPUT", "-p tcp --dport 21 -m helper --helper ftp", 2, "iptables v1.8.9 (legacy): Couldn't load match `helper': connection tracking helpers (FTP, SIP, ...) are not supported by xfw\n" + try4},
		{ir.IPv4, "INPUT", "-j CT --helper ftp", 2, "iptables v1.8.9 (legacy): Couldn't load target `CT': only -j CT --notrack is supported by xfw (zones, helpers, timeouts and event masks are not)\n" + try4},
		{ir.IPv4, "INPUT", "-s foo.example", 2, "iptables v1.8.9 (legacy): host/network `foo.example' not found" + try4},
		{ir.IPv4, "INPUT", "-s localhost", 2, "iptables v1.8.9 (legacy): host/network `localhost' not found" + try4},
		{ir.IPv4, "INPUT", "-p tcp --dport 65536", 2, "iptables v1.8.9 (legacy): invalid port/service `65536' specified" + try4},
		{ir.IPv4, "INPUT", "-p tcp --dport 4:3", 2, "iptables v1.8.9 (legacy): invalid portrange (min > max)" + try4},
		{ir.IPv4, "INPUT", "-p udp --dport 4:3", 2, "iptables v1.8.9 (legacy): Port range 4-3 is negative.\n" + try4},
		{ir.IPv4, "INPUT", "-s ! 1.2.3.4", 2, "Bad argument `1.2.3.4'" + try4},
		{ir.IPv4, "INPUT", "-o eth0", 2, "iptables v1.8.9 (legacy): Can't use -o with INPUT\n" + try4},
		{ir.IPv4, "INPUT", "-i 0123456789abcdef", 2, "iptables v1.8.9 (legacy): interface name `0123456789abcdef' must be shorter than IFNAMSIZ (15)" + try4},
		{ir.IPv4, "INPUT", "! -p all", 2, "iptables v1.8.9 (legacy): rule would never match protocol" + try4},
		{ir.IPv4, "INPUT", "-m tcp --dport 1", 1, "iptables: Invalid argument. Run `dmesg' for more information."},
		{ir.IPv4, "OUTPUT", "-m mac --mac-source 00:01:02:03:04:05", 1, "iptables: Invalid argument. Run `dmesg' for more information."},
		{ir.IPv4, "INPUT", "-j REJECT --reject-with tcp-reset", 1, "iptables: Invalid argument. Run `dmesg' for more information."},
		{ir.IPv4, "INPUT", "-j REJECT --reject-with echo-reply", 2, "--reject-with echo-reply no longer supported\niptables v1.8.9 (legacy): unknown reject type \"echo-reply\"" + try4},
		{ir.IPv4, "INPUT", "-p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", 2, "iptables v1.8.9 (legacy): too many ports specified" + try4},
		{ir.IPv4, "INPUT", "-m multiport --dports 1", 2, "iptables v1.8.9 (legacy): multiport needs `-p tcp', `-p udp', `-p udplite', `-p sctp' or `-p dccp'" + try4},
		{ir.IPv4, "INPUT", "-m comment --comment a --comment b", 2, "iptables v1.8.9 (legacy): comment: option \"--comment\" can only be used once.\n" + try4},
		{ir.IPv4, "INPUT", "-j LOG --log-level 8", 2, "iptables v1.8.9 (legacy): log level \"8\" unknown\n" + try4},
		{ir.IPv4, "INPUT", "-p icmp -m icmp --icmp-type echo", 2, "iptables v1.8.9 (legacy): Ambiguous ICMP type `echo': `echo-reply' or `echo-request'?" + try4},
		{ir.IPv6, "INPUT", "-f", 2, "ip6tables v1.8.9 (legacy): `-f' is not supported in IPv6, use -m frag instead\nTry `ip6tables -h' or 'ip6tables --help' for more information."},
		{ir.IPv6, "INPUT", "-m ttl --ttl-eq 1", 2, "ip6tables v1.8.9 (legacy): Couldn't load match `ttl':No such file or directory\n\nTry `ip6tables -h' or 'ip6tables --help' for more information."},
		{ir.IPv6, "OUTPUT", "-m cgroup --cgroup 1", 2, "ip6tables v1.8.9 (legacy): Couldn't load match `cgroup': not supported by xfw\n\nTry `ip6tables -h' or 'ip6tables --help' for more information."},
		{ir.IPv4, "INPUT", "-t foo -j ACCEPT", 3, "iptables v1.8.9 (legacy): can't initialize iptables table `foo': Table does not exist (do you need to insmod?)\nPerhaps iptables or your kernel needs to be upgraded."},
	}
	for _, tt := range tests {
		args, err := shellSplit(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseRule(tt.fam, tt.chain, args)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: got %v, want *Error", tt.in, err)
			continue
		}
		if e.Status != tt.status || e.Msg != tt.msg {
			t.Errorf("%q:\n got (%d) %q\nwant (%d) %q", tt.in, e.Status, e.Msg, tt.status, tt.msg)
		}
	}
}

// TestParseCommand checks the non-rule commands.
func TestParseCommand(t *testing.T) {
	tests := []struct {
		in   string
		want Command
	}{
		{"-N foo", Command{Kind: CmdNewChain, Chain: "foo"}},
		{"-X", Command{Kind: CmdDeleteChain}},
		{"--delete-chain=foo", Command{Kind: CmdDeleteChain, Chain: "foo"}},
		{"-E a b", Command{Kind: CmdRenameChain, Chain: "a", NewName: "b"}},
		{"-P INPUT DROP", Command{Kind: CmdSetPolicy, Chain: "INPUT", Policy: "DROP"}},
		{"-F", Command{Kind: CmdFlush}},
		{"-Z INPUT 3", Command{Kind: CmdZeroNum, Chain: "INPUT", RuleNum: 3}},
		{"-S INPUT 2 -v", Command{Kind: CmdListRules, Chain: "INPUT", RuleNum: 2, Verbose: 1}},
		{"-L -Z -n", Command{Kind: CmdList, Zero: true, Numeric: true}},
		{"-D INPUT 4", Command{Kind: CmdDeleteNum, Chain: "INPUT", RuleNum: 4}},
	}
	for _, tt := range tests {
		args, _ := shellSplit(tt.in)
		c, err := ParseCommand(ir.IPv4, args)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		got := Command{Kind: c.Kind, Chain: c.Chain, NewName: c.NewName, Policy: c.Policy,
			RuleNum: c.RuleNum, Verbose: c.Verbose, Zero: c.Zero, Numeric: c.Numeric}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
