package cli

import (
	"encoding/binary"
	"slices"
	"testing"
)

func TestCmdRequestRoundTrip(t *testing.T) {
	tests := []cmdRequest{
		{build: "abc/def", args: []string{"iptables", "-w", "-A", "INPUT", "-j", "ACCEPT"}, env: []string{"XFW_XDP_MODE=generic"}},
		{build: "", args: []string{"iptables-save"}},
		{build: "x", args: []string{"ip6tables", "", "ü\x00"}, env: []string{"XFW_A=", "XFW_B=1"}},
	}
	for _, want := range tests {
		got, err := decodeRequest(want.encode())
		if err != nil {
			t.Fatalf("%v: %v", want.args, err)
		}
		if got.build != want.build || !slices.Equal(got.args, want.args) || !slices.Equal(got.env, want.env) {
			t.Errorf("round trip of %+v gave %+v", want, *got)
		}
	}
}

func TestDecodeRequestRefusesMalformed(t *testing.T) {
	whole := (&cmdRequest{build: "b", args: []string{"iptables", "-S"}}).encode()
	tests := map[string][]byte{
		"empty":          nil,
		"truncated":      whole[:len(whole)-2],
		"trailing bytes": append(slices.Clone(whole), 0),
		"no command":     (&cmdRequest{build: "b"}).encode(),
		"huge length":    binary.AppendUvarint(nil, 1<<40),
	}
	for name, msg := range tests {
		if _, err := decodeRequest(msg); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestCommandEnv(t *testing.T) {
	got := commandEnv([]string{"PATH=/bin", "XFW_XDP_MODE=native", "XFW_CMDSERVER=only", "XFW_BPFFS=/x", "GOGC=50"})
	want := []string{"XFW_BPFFS=/x", "XFW_XDP_MODE=native"}
	if !slices.Equal(got, want) {
		t.Errorf("commandEnv = %q, want %q", got, want)
	}
}

func TestFindGoBuildID(t *testing.T) {
	note := func(namesz, typ uint32, owner, desc string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, namesz)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
		b = binary.LittleEndian.AppendUint32(b, typ)
		return append(append(b, owner...), desc...)
	}
	tests := []struct {
		name string
		head []byte
		want string
	}{
		{"note", append([]byte("\x7fELF padding"), note(4, 4, "Go\x00\x00", "id/one/two")...), "id/one/two"},
		{"other type first", append(note(4, 1, "Go\x00\x00", "abi"), note(4, 4, "Go\x00\x00", "the-id")...), "the-id"},
		{"truncated", note(4, 4, "Go\x00\x00", "the-id")[:18], ""},
		{"none", []byte("no note here"), ""},
	}
	for _, tt := range tests {
		if got := findGoBuildID(tt.head); got != tt.want {
			t.Errorf("%s: findGoBuildID = %q, want %q", tt.name, got, tt.want)
		}
	}
	if buildID() == "" {
		t.Error("the test binary's own build id was not found")
	}
}

func TestServable(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"iptables", "-A", "INPUT", "-j", "ACCEPT"}, true},
		{[]string{"ip6tables-save", "-c"}, true},
		{[]string{"iptables-restore", "-w", "5", "--noflush"}, true},
		{[]string{"iptables-restore", "-T", "filter", "-W", "100", "-"}, true},
		{[]string{"iptables-restore", "rules.v4"}, false},
		{[]string{"iptables-restore", "-w", "/etc/rules"}, false},
		{[]string{"ip6tables-restore", "--noflush", "-c", "rules.v6"}, false},
		{[]string{"ipset", "list"}, true},
		{[]string{"ipset", "add", "f2b-sshd", "192.0.2.1", "timeout", "600", "-exist"}, true},
		{[]string{"ipset", "save", "-file", "sets"}, false},
		{[]string{"ipset", "restore", "--file", "/etc/sets"}, false},
		{[]string{"ipset", "-f", "sets", "restore"}, false},
		{[]string{"stop"}, false},
	}
	for _, tt := range tests {
		if got := servable(tt.args[0], tt.args[1:]); got != tt.want {
			t.Errorf("servable(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
	// Sets in a file named by a relative path: the agent's working
	// directory is not the caller's.
	t.Setenv("XFW_IPSET_FILE", "sets.state")
	if servable("ipset", []string{"list"}) {
		t.Error("ipset with a relative $XFW_IPSET_FILE is servable")
	}
	t.Setenv("XFW_IPSET_FILE", "/var/lib/sets.state")
	if !servable("ipset", []string{"list"}) {
		t.Error("ipset with an absolute $XFW_IPSET_FILE is not servable")
	}
}
