package iptables

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestLocalChangeValidatesAsWhole: a command that only adds rules to, or
// deletes one from, a built-in chain checks the rules it added (checkLocal)
// instead of the whole table; it fails or succeeds, with the same
// message, as when the whole table is validated (validate); so does -N.
// The commands include rules the kernel refuses in that chain's hook, with the wrong
// protocol, jumps (validated whole) and deletions.
func TestLocalChangeValidatesAsWhole(t *testing.T) {
	setup := []string{
		"-N USER",
		"-A USER -p tcp -m tcp --dport 80 -j ACCEPT",
		"-A INPUT -j USER",
		"-A INPUT -p udp -m udp --dport 53 -j ACCEPT",
		"-A OUTPUT -p tcp -m tcp --sport 22 -j ACCEPT",
	}
	cmds := []string{
		"-A OUTPUT -m mac --mac-source 00:11:22:33:44:55 -j ACCEPT",
		"-A INPUT -m mac --mac-source 00:11:22:33:44:55 -j ACCEPT",
		"-I FORWARD -m mac --mac-source 00:11:22:33:44:55 -j DROP",
		"-I OUTPUT 2 -m mac --mac-source 00:11:22:33:44:55 -j DROP",
		"-A INPUT -m tcp --dport 22 -j ACCEPT",
		"-A FORWARD -s 10.0.0.1,10.0.0.2 -j REJECT",
		"-A OUTPUT -j REJECT --reject-with tcp-reset",
		"-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset",
		"-A FORWARD -j USER",
		"-I OUTPUT -j USER",
		"-D INPUT 1",
		"-D INPUT 2",
		"-D INPUT -j USER",
		"-D OUTPUT -p tcp -m tcp --sport 22 -j ACCEPT",
		"-D OUTPUT -p tcp -m tcp --sport 23 -j ACCEPT",
		"-N NEW",
		"-N USER",
		"-N INPUT",
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		base := ir.NewRuleset(fam)
		if err := run(t, base, setup...); err != nil {
			t.Fatalf("setup: %v", err)
		}
		for _, line := range cmds {
			args, err := shellSplit(line)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseCommand(fam, args)
			if err != nil {
				if fam == ir.IPv4 {
					t.Fatalf("%s: %v", line, err)
				}
				continue // IPv4 addresses
			}
			got := base.Clone()
			_, gotErr := c.Apply(got)
			// The same command applied, then the whole table validated.
			c, _ = ParseCommand(fam, args)
			want := base.Clone()
			var wantErr error
			if _, f := c.apply(want); f != nil {
				wantErr = f.render(ProgramName(fam), 0)
			} else if f := validate(want); f != nil {
				wantErr = f.render(ProgramName(fam), 0)
			}
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Errorf("%v %s: %v, validated whole: %v", fam, line, gotErr, wantErr)
			}
		}
	}
}
