package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// runArgv runs Main with argv and no input, returning its status and output.
func runArgv(argv []string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = Main(argv, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return status, out.String(), errOut.String()
}

// TestMultiCallNames runs the binary under every name it answers to (as a
// link would, with and without a directory) and checks that it acts as
// the right command and names itself as iptables does: the -xfw names of
// the update-alternatives groups print "iptables", "iptables-save", …,
// never their own name. None of these commands touches the data plane.
func TestMultiCallNames(t *testing.T) {
	version := func(prog string) string { return fmt.Sprintf("%s v1.8.9 (xfw %s)\n", prog, Version) }
	tests := []struct {
		argv       []string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{argv: []string{"iptables", "--version"}, wantOut: version("iptables")},
		{argv: []string{"/usr/sbin/iptables-xfw", "--version"}, wantOut: version("iptables")},
		{argv: []string{"iptables-xfw", "-A", "INPUT", "--bogus"}, wantStatus: 2,
			wantErr: "iptables v1.8.9 (legacy): unknown option \"--bogus\"\n" +
				"Try `iptables -h' or 'iptables --help' for more information.\n"},
		{argv: []string{"ip6tables", "-V"}, wantOut: version("ip6tables")},
		{argv: []string{"/usr/sbin/ip6tables-xfw", "-V"}, wantOut: version("ip6tables")},
		{argv: []string{"ip6tables-xfw", "-A", "INPUT", "-s", "10.0.0.1"}, wantStatus: 2,
			wantErr: "ip6tables v1.8.9 (legacy): host/network `10.0.0.1' not found\n" +
				"Try `ip6tables -h' or 'ip6tables --help' for more information.\n"},
		{argv: []string{"iptables-restore", "--version"}, wantOut: version("iptables-restore")},
		{argv: []string{"/usr/sbin/iptables-xfw-restore", "--version"}, wantOut: version("iptables-restore")},
		{argv: []string{"iptables-xfw-restore", "--bogus"}, wantStatus: 2,
			wantErr: "iptables-restore: unrecognized option '--bogus'\n"},
		{argv: []string{"ip6tables-restore", "-V"}, wantOut: version("ip6tables-restore")},
		{argv: []string{"ip6tables-xfw-restore", "-h"},
			wantOut: "Usage: ip6tables-restore [-c] [-v] [-V] [-t] [-h] [-n] [-w secs] [-W usecs] [-T table] [-M command] [file]\n"},
		{argv: []string{"iptables-save", "--version"}, wantOut: version("iptables-save")},
		{argv: []string{"/usr/sbin/iptables-xfw-save", "--version"}, wantOut: version("iptables-save")},
		{argv: []string{"iptables-xfw-save", "--bogus"}, wantStatus: 2,
			wantErr: "iptables-save: unrecognized option '--bogus'\n"},
		{argv: []string{"ip6tables-save", "-V"}, wantOut: version("ip6tables-save")},
		{argv: []string{"/usr/sbin/ip6tables-xfw-save", "-V"}, wantOut: version("ip6tables-save")},
		{argv: []string{"ip6tables-xfw-save", "-t", "foo"}, wantStatus: 1,
			wantErr: "ip6tables-save v1.8.9 (legacy): Cannot initialize: Table does not exist (do you need to insmod?)\n"},
		{argv: []string{"/usr/sbin/ipset", "version"}, wantOut: "ipset v7.17, protocol version: 7\n"},
		{argv: []string{"xfw", "iptables", "--version"}, wantOut: version("iptables")},
		{argv: []string{"xfw", "version"}, wantOut: "xfw " + Version + "\n"},
		// The -xfw names are names of the binary, not xfw commands.
		{argv: []string{"xfw", "iptables-xfw", "--version"}, wantStatus: 2,
			wantErr: "xfw: unknown command \"iptables-xfw\"\n"},
	}
	for _, tt := range tests {
		status, out, errOut := runArgv(tt.argv)
		if tt.wantStatus == exitParameter && strings.HasPrefix(tt.wantErr, "xfw: unknown command") {
			// The usage text follows the message.
			errOut, _, _ = strings.Cut(errOut, "usage:")
		}
		if status != tt.wantStatus || out != tt.wantOut || errOut != tt.wantErr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q",
				tt.argv, status, out, errOut, tt.wantStatus, tt.wantOut, tt.wantErr)
		}
	}
}

// TestAlternativeNamesActAsTheirCommand checks every -xfw name against the
// command it stands for: the same arguments give the same status and
// output whichever name runs them.
func TestAlternativeNamesActAsTheirCommand(t *testing.T) {
	for alt, canonical := range alternativeNames {
		if _, ok := frontEnds[canonical]; !ok {
			t.Errorf("%s stands for %s, which is not a front end", alt, canonical)
			continue
		}
		for _, args := range [][]string{{"--version"}, {"-h"}, {"--bogus"}} {
			gotStatus, gotOut, gotErr := runArgv(append([]string{"/usr/sbin/" + alt}, args...))
			wantStatus, wantOut, wantErr := runArgv(append([]string{"xfw", canonical}, args...))
			if gotStatus != wantStatus || gotOut != wantOut || gotErr != wantErr {
				t.Errorf("%s %q: status %d, stdout %q, stderr %q; xfw %s gives %d, %q, %q",
					alt, args, gotStatus, gotOut, gotErr, canonical, wantStatus, wantOut, wantErr)
			}
		}
	}
}
