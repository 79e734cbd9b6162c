package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestIpsetCommand runs `xfw ipset …` and the multi-call name `ipset`
// against a file store in a temporary directory.
func TestIpsetCommand(t *testing.T) {
	t.Setenv("XFW_IPSET_FILE", filepath.Join(t.TempDir(), "ipset.state"))
	steps := []struct {
		argv       []string
		stdin      string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{argv: []string{"xfw", "ipset", "create", "s", "hash:net"}},
		{argv: []string{"ipset", "add", "s", "10.0.0.0/8"}},
		{argv: []string{"/usr/sbin/ipset", "restore"}, stdin: "add s 192.0.2.0/24\n"},
		{argv: []string{"xfw", "ipset", "add", "s", "10.0.0.0/8"}, wantStatus: 1,
			wantErr: "ipset v7.17: Element cannot be added to the set: it's already added\n"},
		{argv: []string{"ipset", "list", "-n"}, wantOut: "s\n"},
		{argv: []string{"ipset", "save"}, wantOut: "add s 10.0.0.0/8\nadd s 192.0.2.0/24\n"},
		{argv: []string{"ipset", "bogus"}, wantStatus: 2,
			wantErr: "ipset v7.17: No command specified: unknown argument bogus\nTry `ipset help' for more information.\n"},
	}
	for _, st := range steps {
		var out, errOut bytes.Buffer
		status := Main(st.argv, Env{Stdin: strings.NewReader(st.stdin), Stdout: &out, Stderr: &errOut})
		got := out.String()
		if st.argv[len(st.argv)-1] == "save" {
			// Drop the create line (its initval is random).
			_, got, _ = strings.Cut(got, "\n")
		}
		if status != st.wantStatus || got != st.wantOut || errOut.String() != st.wantErr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q",
				st.argv, status, got, errOut.String(), st.wantStatus, st.wantOut, st.wantErr)
		}
	}
}
