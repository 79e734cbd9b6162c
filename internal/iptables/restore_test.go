package iptables

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRestore checks iptables-restore semantics (expected values from
// iptables-legacy-restore 1.8.9).
func TestRestore(t *testing.T) {
	base := ir.NewRuleset(ir.IPv4)
	if err := run(t, base, "-P FORWARD DROP", "-N old", "-A INPUT -j old", "-A old -j ACCEPT"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		opts   RestoreOptions
		input  string
		status int
		msg    string
		want   string // SaveTable(…, false) of the result
	}{
		{
			name:  "flush by default, policies kept",
			input: "*filter\n:new - [0:0]\n-A INPUT -s 1.2.3.4,5.6.7.8 -j new\nCOMMIT\n",
			want:  "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:new - [0:0]\n-A INPUT -s 1.2.3.4/32 -j new\n-A INPUT -s 5.6.7.8/32 -j new\nCOMMIT\n",
		},
		{
			name:  "noflush keeps chains, declaring one flushes it",
			opts:  RestoreOptions{NoFlush: true},
			input: "*filter\n:old - [0:0]\n-A old -j DROP\n-I INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n",
			want:  "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:old - [0:0]\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n-A INPUT -j old\n-A old -j DROP\nCOMMIT\n",
		},
		{
			name:  "counters",
			opts:  RestoreOptions{Counters: true},
			input: "*filter\n:INPUT DROP [1:2]\n[3:4] -A INPUT -j ACCEPT\nCOMMIT\n",
			want:  "*filter\n:INPUT DROP [1:2]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n",
		},
		{
			name:   "unknown option",
			input:  "# c\n*filter\n-A INPUT --foo\nCOMMIT\n",
			status: 2,
			msg:    "iptables-restore v1.8.9 (legacy): unknown option \"--foo\"\nError occurred at line: 3\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.",
		},
		{
			name:   "missing chain",
			input:  "*filter\n-A nope -j ACCEPT\nCOMMIT\n",
			status: 1,
			msg:    "iptables-restore: line 2 failed",
		},
		{
			name:   "jump to undeclared chain",
			input:  "*filter\n-A INPUT -j later\n:later - [0:0]\nCOMMIT\n",
			status: 2,
			msg:    "iptables-restore v1.8.9 (legacy): Couldn't load target `later':No such file or directory\n\nError occurred at line: 2\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.",
		},
		{
			name:   "kernel check at COMMIT",
			input:  "*filter\n-A INPUT -p udp -m tcp --dport 1\nCOMMIT\n",
			status: 1,
			msg:    "iptables-restore: line 3 failed",
		},
		{
			name:   "policy on a user chain",
			input:  "*filter\n:mine ACCEPT [0:0]\nCOMMIT\n",
			status: 1,
			msg:    "iptables-restore v1.8.9 (legacy): Can't set policy `ACCEPT' on `mine' line 2: Bad built-in chain name",
		},
		{
			name:   "missing COMMIT",
			input:  "*filter\n-A INPUT -j ACCEPT\n",
			status: 1,
			msg:    "iptables-restore: COMMIT expected at line 3",
		},
		{
			name:   "unknown table",
			input:  "# x\n*foo\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n",
			status: 2,
			msg:    "iptables-restore v1.8.9 (legacy): iptables-restore: unable to initialize table 'foo'\nError occurred at line: 2\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.",
		},
		{
			name:  "other tables skipped with Table",
			opts:  RestoreOptions{Table: "filter"},
			input: "*nat\n-A PREROUTING -j whatever\nCOMMIT\n*filter\n:INPUT DROP [0:0]\nCOMMIT\n",
			want:  "*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n",
		},
		{
			name:  "test mode commits nothing",
			opts:  RestoreOptions{Test: true},
			input: "*filter\n:INPUT DROP [0:0]\nCOMMIT\n",
			want:  SaveTable(base, false),
		},
	}
	for _, tt := range tests {
		rs, err := Restore(ir.IPv4, strings.NewReader(tt.input), base, tt.opts)
		var e *Error
		switch {
		case tt.status == 0 && err != nil:
			t.Errorf("%s: %v", tt.name, err)
			continue
		case tt.status != 0 && !errors.As(err, &e):
			t.Errorf("%s: got %v, want an error", tt.name, err)
			continue
		case tt.status != 0 && (e.Status != tt.status || e.Msg != tt.msg):
			t.Errorf("%s:\n got (%d) %q\nwant (%d) %q", tt.name, e.Status, e.Msg, tt.status, tt.msg)
		}
		if tt.status != 0 {
			tt.want = SaveTable(base, false)
		}
		if got := SaveTable(rs, false); got != tt.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
	if got := SaveTable(base, false); !strings.Contains(got, ":old - [0:0]") {
		t.Errorf("Restore modified its base:\n%s", got)
	}
}

// TestRestorePartialCommit checks that a failure keeps what earlier COMMITs
// applied, as the kernel does.
func TestRestorePartialCommit(t *testing.T) {
	in := "*filter\n:INPUT DROP [0:0]\nCOMMIT\n*filter\n-A INPUT --bogus\nCOMMIT\n"
	rs, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{})
	if err == nil {
		t.Fatal("restore succeeded")
	}
	if rs.Chain("INPUT").Policy != ir.VerdictDrop {
		t.Errorf("first COMMIT lost: %s", SaveTable(rs, false))
	}
}

// TestRestoreOutput checks that -S lines print to Output.
func TestRestoreOutput(t *testing.T) {
	var out bytes.Buffer
	in := "*filter\n-A INPUT -s 1.2.3.4 -j ACCEPT\n-S INPUT\nCOMMIT\n"
	if _, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{Output: &out}); err != nil {
		t.Fatal(err)
	}
	if want := "-P INPUT ACCEPT\n-A INPUT -s 1.2.3.4/32 -j ACCEPT\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// errReader fails after its data.
type errReader struct{ data string }

func (r *errReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, errors.New("disk on fire")
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestRestoreReadError checks that input errors are wrapped, not reported
// as iptables errors.
func TestRestoreReadError(t *testing.T) {
	_, err := Restore(ir.IPv4, &errReader{data: "*filter\n"}, nil, RestoreOptions{})
	var e *Error
	if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("got %v", err)
	}
}
