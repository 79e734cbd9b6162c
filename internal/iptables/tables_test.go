package iptables

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestSaveAllTables restores blocks of several tables and checks what
// iptables-save prints: the other tables newest first, then filter (the
// kernel's list order), each with its built-in chains, and -t TABLE alone.
func TestSaveAllTables(t *testing.T) {
	in := "*nat\n:POSTROUTING ACCEPT [0:0]\n:FOO - [0:0]\n-A POSTROUTING -j FOO\n-A FOO -s 10.0.0.0/24 -j MASQUERADE\nCOMMIT\n" +
		"*raw\n:OUTPUT DROP [0:0]\nCOMMIT\n*filter\n:INPUT DROP [0:0]\nCOMMIT\n"
	rs, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT DROP [0:0]\nCOMMIT\n" +
		"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:FOO - [0:0]\n" +
		"-A POSTROUTING -j FOO\n-A FOO -s 10.0.0.0/24 -j MASQUERADE\nCOMMIT\n" +
		"*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	if got := stripSaveComments(SaveAll(rs, "", false)); got != want {
		t.Errorf("save:\n%s\nwant:\n%s", got, want)
	}
	wantMangle := "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n"
	if got := stripSaveComments(SaveAll(rs, "mangle", false)); got != wantMangle {
		t.Errorf("save -t mangle:\n%s\nwant:\n%s", got, wantMangle)
	}
	// The saved text restores to the same tables, created in the saved
	// order: raw first, so nat is now the newest and printed first.
	back, err := Restore(ir.IPv4, strings.NewReader(SaveAll(rs, "", false)), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rawBlock, rest, _ := strings.Cut(want, "*nat\n")
	natBlock, filterBlock, _ := strings.Cut(rest, "*filter\n")
	want = "*nat\n" + natBlock + rawBlock + "*filter\n" + filterBlock
	if got := stripSaveComments(SaveAll(back, "", false)); got != want {
		t.Errorf("save after restore of save:\n%s\nwant:\n%s", got, want)
	}
}

// TestTableCommandCreatesTable checks that a command on a table creates it
// empty, as the kernel does when a table is first used, and leaves the
// ruleset untouched when it fails.
func TestTableCommandCreatesTable(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	run := func(line string) error {
		cmd, err := ParseCommand(ir.IPv4, strings.Fields(line))
		if err != nil {
			return err
		}
		_, err = cmd.Apply(rs)
		return err
	}
	if err := run("-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.1:80"); err == nil {
		t.Error("a port without -p tcp/udp accepted")
	}
	if rs.TableByName("nat") != nil {
		t.Error("a failed command created the nat table")
	}
	if err := run("-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := run("-t nat -A INPUT -j DNAT --to-destination 10.0.0.1"); err == nil {
		t.Error("DNAT in nat INPUT accepted")
	}
	if n := len(rs.TableByName("nat").Chain("INPUT").Rules); n != 0 {
		t.Errorf("failed command left %d rules in nat INPUT", n)
	}
	if rs.TableByName("mangle") != nil {
		t.Error("mangle exists before any command used it")
	}
}
