package iptables

import (
	"errors"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The messages for modules xfw does not have. The expected texts are
// iptables-legacy 1.8.9's, observed with its extension libraries removed
// (XTABLES_LIBDIR pointing at a copy without them), in a namespace:
//
//	iptables -A INPUT -m foo     → exit 2, "iptables v1.8.9 (legacy): Couldn't
//	  load match `foo':No such file or directory", an empty line, "Try `iptables
//	  -h' or 'iptables --help' for more information."
//	iptables -A INPUT -j TEE → the same with "Couldn't load target `TEE'"
//	iptables-restore, line 3 "-A INPUT -m foo" → "iptables-restore v1.8.9
//	  (legacy): Couldn't load match `foo':No such file or directory", an empty
//	  line, "Error occurred at line: 3", "Try `iptables-restore -h' …"
//
// A module iptables 1.8.9 has and xfw does not says "not supported by xfw"
// instead of "No such file or directory", and a rule naming one fails on
// the module even where iptables without the library would have reported
// its first option as unknown ("-j TEE --gateway 1.2.3.4": unknown option
// "--gateway").

// missingHint is the end of every parameter problem's message.
func missingHint(prog string) string {
	return "Try `" + prog + " -h' or '" + prog + " --help' for more information."
}

func TestMissingModuleMessages(t *testing.T) {
	couldnt := func(prog, what string) string {
		return prog + " v1.8.9 (legacy): Couldn't load " + what + "\n\n" + missingHint(prog)
	}
	cases := []struct {
		fam  ir.Family
		args string
		msg  string
	}{
		{ir.IPv4, "-A INPUT -m foo", couldnt("iptables", "match `foo':No such file or directory")},
		{ir.IPv6, "-A INPUT -m foo", couldnt("ip6tables", "match `foo':No such file or directory")},
		{ir.IPv4, "-A INPUT -m connbytes --connbytes 2", couldnt("iptables", "match `connbytes': not supported by xfw")},
		{ir.IPv6, "-A INPUT -m cgroup --path x", couldnt("ip6tables", "match `cgroup': not supported by xfw")},
		// ip6tables has no ttl module (hl is its twin), iptables no hl.
		{ir.IPv6, "-A INPUT -m ttl --ttl-eq 1", couldnt("ip6tables", "match `ttl':No such file or directory")},
		{ir.IPv4, "-A INPUT -m rt", couldnt("iptables", "match `rt':No such file or directory")},
		{ir.IPv4, "-A INPUT -m helper --helper ftp", couldnt("iptables",
			"match `helper': connection tracking helpers (FTP, SIP, ...) are not supported by xfw")},
		{ir.IPv4, "-A INPUT -m rpfilter --invert", couldnt("iptables",
			"match `rpfilter': reverse path filtering is not supported by xfw (BPF route lookups need forwarding on)")},
		{ir.IPv6, "-A INPUT -m rpfilter", couldnt("ip6tables",
			"match `rpfilter': reverse path filtering is not supported by xfw (BPF route lookups need forwarding on)")},
		{ir.IPv4, "-A INPUT -j TEE", couldnt("iptables", "target `TEE': not supported by xfw")},
		{ir.IPv4, "-A INPUT -j TEE --gateway 1.2.3.4", couldnt("iptables", "target `TEE': not supported by xfw")},
		{ir.IPv4, "-A INPUT -j SYNPROXY", couldnt("iptables", "target `SYNPROXY': not supported by xfw")},
		{ir.IPv6, "-A OUTPUT -j AUDIT --type drop", couldnt("ip6tables", "target `AUDIT': not supported by xfw")},
		{ir.IPv4, "-A INPUT -j QUEUE", couldnt("iptables", "target `QUEUE': not supported by xfw")},
		{ir.IPv4, "-t raw -A PREROUTING -j CT --zone 1", couldnt("iptables",
			"target `CT': only -j CT --notrack is supported by xfw (zones, helpers, timeouts and event masks are not)")},
		// TTL is an IPv4 target only: ip6tables takes the name for a chain.
		{ir.IPv6, "-I INPUT -j TTL", couldnt("ip6tables", "target `TTL':No such file or directory")},
		{ir.IPv4, "-C INPUT -j FOO", couldnt("iptables", "target `FOO':No such file or directory")},
		{ir.IPv4, "-A INPUT -j FOO --bar 1", "iptables v1.8.9 (legacy): unknown option \"--bar\"\n" + missingHint("iptables")},
		{ir.IPv6, "-A OUTPUT -m cgroup --cgroup 1", couldnt("ip6tables", "match `cgroup': not supported by xfw")},
		{ir.IPv4, "-A INPUT -p gre --dport 5", "iptables v1.8.9 (legacy): unknown option \"--dport\"\n" + missingHint("iptables")},
	}
	for _, c := range cases {
		t.Run(c.fam.String()+" "+c.args, func(t *testing.T) {
			rs := ir.NewRuleset(c.fam)
			cmd, err := ParseCommand(c.fam, strings.Fields(c.args))
			if err == nil {
				_, err = cmd.Apply(rs)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want exit 2 with %q", err, c.msg)
			}
			if e.Status != StatusParameter || e.Msg != c.msg {
				t.Errorf("got exit %d\n%s\nwant exit 2\n%s", e.Status, e.Msg, c.msg)
			}
		})
	}
}

func TestMissingModuleRestoreMessages(t *testing.T) {
	at := func(prog, what string, line string) string {
		return prog + " v1.8.9 (legacy): " + what + "Error occurred at line: " + line + "\n" + missingHint(prog)
	}
	cases := []struct {
		fam  ir.Family
		rule string
		msg  string
	}{
		{ir.IPv4, "-A INPUT -m foo", at("iptables-restore", "Couldn't load match `foo':No such file or directory\n\n", "3")},
		{ir.IPv4, "-A INPUT -j FOO", at("iptables-restore", "Couldn't load target `FOO':No such file or directory\n\n", "3")},
		{ir.IPv4, "-A INPUT -m cgroup --path x", at("iptables-restore", "Couldn't load match `cgroup': not supported by xfw\n\n", "3")},
		{ir.IPv6, "-A INPUT -j TEE --gateway ::1", at("ip6tables-restore", "Couldn't load target `TEE': not supported by xfw\n\n", "3")},
		{ir.IPv6, "-A INPUT -j TEE", at("ip6tables-restore", "Couldn't load target `TEE': not supported by xfw\n\n", "3")},
	}
	for _, c := range cases {
		t.Run(c.fam.String()+" "+c.rule, func(t *testing.T) {
			text := "*filter\n:INPUT ACCEPT [0:0]\n" + c.rule + "\nCOMMIT\n"
			_, err := Restore(c.fam, strings.NewReader(text), ir.NewRuleset(c.fam), RestoreOptions{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want exit 2 with %q", err, c.msg)
			}
			if e.Status != StatusParameter || e.Msg != c.msg {
				t.Errorf("got exit %d\n%s\nwant exit 2\n%s", e.Status, e.Msg, c.msg)
			}
		})
	}
	// A chain may bear a target module's name in a restore: -j jumps to it.
	text := "*filter\n:INPUT ACCEPT [0:0]\n:NOTRACK - [0:0]\n-A INPUT -j NOTRACK\nCOMMIT\n"
	if _, err := Restore(ir.IPv4, strings.NewReader(text), ir.NewRuleset(ir.IPv4), RestoreOptions{}); err != nil {
		t.Errorf("jump to a chain named NOTRACK: %v", err)
	}
}
