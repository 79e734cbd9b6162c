package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestConntrackCommandErrors runs `xfw conntrack` with input conntrack
// 1.4.7 refuses (its messages and statuses, observed) and with the
// commands that need no data plane.
func TestConntrackCommandErrors(t *testing.T) {
	const try = "Try `conntrack -h' or 'conntrack --help' for more information.\n"
	for _, tc := range []struct {
		args       []string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{[]string{"-L", "-p", "nosuch"}, 2, "", "conntrack v1.4.7 (conntrack-tools): `nosuch' unsupported protocol\n" + try},
		{[]string{"-L", "-s", "foo"}, 2, "", "conntrack v1.4.7 (conntrack-tools): Invalid IP address `foo'\n" + try},
		{[]string{"-L", "--bogus"}, 2, "", "conntrack v1.4.7 (conntrack-tools): unknown option `--bogus'\n" + try},
		{[]string{"-C", "-p", "tcp"}, 2, "", "conntrack v1.4.7 (conntrack-tools): Illegal option `--protonum' with this command\n" + try},
		{[]string{"-V"}, 0, "conntrack v1.4.7 (conntrack-tools)\n", ""},
	} {
		var out, errOut bytes.Buffer
		status := Main(append([]string{"xfw", "conntrack"}, tc.args...), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
		if status != tc.wantStatus || out.String() != tc.wantOut || errOut.String() != tc.wantErr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q",
				tc.args, status, out.String(), errOut.String(), tc.wantStatus, tc.wantOut, tc.wantErr)
		}
	}
	var out bytes.Buffer
	if status := Main([]string{"xfw", "conntrack"}, Env{Stdout: &out, Stderr: &out}); status != 0 || !strings.HasPrefix(out.String(), "Command line interface for the connection tracking system.") {
		t.Errorf("no arguments: status %d, output %q", status, out.String())
	}
}
