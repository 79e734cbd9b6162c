package iptables

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// fakeSets are the sets the recorded transcripts (testdata/set_oracle_*.txt)
// were made with.
var fakeSets = map[string]SetInfo{
	"bl":       {Family: ir.IPv4, Dims: 1, Type: "hash:ip"},
	"foo":      {Family: ir.IPv4, Dims: 1, Type: "hash:ip"},
	"bl6":      {Family: ir.IPv6, Dims: 1, Type: "hash:ip"},
	"ipport":   {Family: ir.IPv4, Dims: 2, Type: "hash:ip,port"},
	"ipportip": {Family: ir.IPv4, Dims: 3, Type: "hash:ip,port,ip"},
	"ls":       {Family: 0, Dims: 0, Type: "list:set"},
	"nets":     {Family: ir.IPv4, Dims: 1, Type: "hash:net"},
}

// fakeLookup is a SetLookup over fakeSets.
func fakeLookup(name string) (SetInfo, bool) {
	info, ok := fakeSets[name]
	return info, ok
}

// setTranscript runs "-A INPUT ARGS" with the fake sets and renders the
// outcome as the transcripts do: the arguments, "  rc=N STDERR" (newlines
// as "|") and, on success, "  S: " and the rule as iptables -S prints it.
func setTranscript(fam ir.Family, line string) (string, error) {
	args, err := shellSplit(line)
	if err != nil {
		return "", fmt.Errorf("split %q: %w", line, err)
	}
	cmd, err := ParseCommandWith(fam, append([]string{"-A", "INPUT"}, args...), ParseOptions{Sets: fakeLookup})
	var rules []*ir.Rule
	if err == nil {
		var f *failure
		if rules, f = cmd.resolveTargets(nil); f != nil {
			err = f.render(ProgramName(fam), 0)
		}
	}
	rc, stderr := 0, ""
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			return "", fmt.Errorf("%q: %w", line, err)
		}
		rc, stderr = e.Status, e.Msg+"\n"
	} else if len(cmd.Notices) > 0 {
		stderr = strings.Join(cmd.Notices, "\n") + "\n"
	}
	out := fmt.Sprintf("%s\n  rc=%d %s\n", line, rc, strings.ReplaceAll(stderr, "\n", "|"))
	if rc == 0 {
		out += "  S: " + FormatRule(fam, "INPUT", rules[0], false) + "\n"
	}
	return out, nil
}

// TestSetMatchOracle replays the transcripts recorded from iptables-legacy
// 1.8.9: every accepted form prints back as iptables -S does, every error
// has iptables' message and exit status.
func TestSetMatchOracle(t *testing.T) {
	replayTranscripts(t, "testdata/set_oracle_v4.txt", "testdata/set_oracle_v6.txt", setTranscript)
}

// replayTranscripts renders every case of the IPv4 and the IPv6
// transcript with render (given the family and the case's arguments) and
// requires the recorded text.
func replayTranscripts(t *testing.T, v4, v6 string, render func(ir.Family, string) (string, error)) {
	t.Helper()
	for fam, file := range map[ir.Family]string{ir.IPv4: v4, ir.IPv6: v6} {
		for _, want := range transcriptCases(t, file) {
			args, _, _ := strings.Cut(want, "\n")
			got, err := render(fam, args)
			if err != nil {
				t.Error(err)
				continue
			}
			if got != want {
				t.Errorf("%s:\n got: %q\nwant: %q", file, got, want)
			}
		}
	}
}

// transcriptCases reads a recorded transcript: its cases, each its
// unindented first line and the indented lines after it, newline-terminated
// ("#" lines and blank ones left out).
func transcriptCases(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#") || line == "":
		case strings.HasPrefix(line, "  "):
			cases[len(cases)-1] += line + "\n"
		default:
			cases = append(cases, line+"\n")
		}
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", file)
	}
	return cases
}

// TestSetMatchParse checks the IR the parser builds for the set match's
// options.
func TestSetMatchParse(t *testing.T) {
	tests := []struct {
		args string
		want ir.SetMatch
	}{
		{"-m set --match-set bl src", ir.SetMatch{Name: "bl", Dirs: ir.SetDirs{Dim: 1, Src: 1}}},
		{"-m set ! --match-set bl dst,src", ir.SetMatch{Invert: true, Name: "bl", Dirs: ir.SetDirs{Dim: 2, Src: 2}}},
		{"-m set --set ls dst,dst,dst,dst,dst,srcx", ir.SetMatch{Name: "ls", Dirs: ir.SetDirs{Dim: 6, Src: 32}}},
		{"-m set --match-set bl src --return-nomatch ! --update-counters --update-subcounters",
			ir.SetMatch{Name: "bl", Dirs: ir.SetDirs{Dim: 1, Src: 1}, ReturnNomatch: true, SkipCounterUpdate: true}},
		{"-m set --match-set bl src ! --update-subcounters ! --packets-eq 0x10 --bytes-gt 18446744073709551615",
			ir.SetMatch{Name: "bl", Dirs: ir.SetDirs{Dim: 1, Src: 1}, SkipSubcounterUpdate: true,
				Packets: ir.SetCounterMatch{Op: ir.SetCounterNe, Value: 16},
				Bytes:   ir.SetCounterMatch{Op: ir.SetCounterGt, Value: 1<<64 - 1}}},
		{"-m set --match-set bl src --packets-lt 3 --bytes-eq 4",
			ir.SetMatch{Name: "bl", Dirs: ir.SetDirs{Dim: 1, Src: 1},
				Packets: ir.SetCounterMatch{Op: ir.SetCounterLt, Value: 3},
				Bytes:   ir.SetCounterMatch{Op: ir.SetCounterEq, Value: 4}}},
	}
	for _, tt := range tests {
		args, err := shellSplit(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := ParseCommandWith(ir.IPv4, append([]string{"-A", "INPUT"}, args...), ParseOptions{Sets: fakeLookup})
		if err != nil {
			t.Errorf("%s: %v", tt.args, err)
			continue
		}
		m, ok := cmd.Rules[0].Matches[0].(*ir.SetMatch)
		if !ok || *m != tt.want {
			t.Errorf("%s: got %#v, want %#v", tt.args, cmd.Rules[0].Matches[0], tt.want)
		}
	}
}

// TestSetMatchNoLookup checks that without a set lookup every set is
// missing, as on a kernel without sets.
func TestSetMatchNoLookup(t *testing.T) {
	_, err := ParseCommand(ir.IPv4, []string{"-A", "INPUT", "-m", "set", "--match-set", "bl", "src"})
	want := "iptables v1.8.9 (legacy): Set bl doesn't exist.\n\nTry `iptables -h' or 'iptables --help' for more information."
	if e, ok := err.(*Error); !ok || e.Msg != want || e.Status != StatusParameter {
		t.Errorf("got %v, want %q (status 2)", err, want)
	}
}

// TestSetMatchRestore checks the set match in iptables-restore: the set
// lookup of RestoreOptions, the deprecated --set notice and the error
// report of a missing set (as iptables-legacy-restore 1.8.9 prints it).
func TestSetMatchRestore(t *testing.T) {
	tests := []struct {
		input   string
		wantErr string
		want    string
	}{
		{input: "*filter\n-A INPUT -m set --match-set nope src\nCOMMIT\n",
			wantErr: "iptables-restore v1.8.9 (legacy): Set nope doesn't exist.\n\nError occurred at line: 2\nTry `iptables-restore -h' or 'iptables-restore --help' for more information."},
		{input: "*filter\n-A INPUT -m set ! --match-set bl src,dst --return-nomatch ! --update-counters ! --update-subcounters ! --packets-eq 3 --bytes-gt 7 -j DROP\nCOMMIT\n",
			want: "-A INPUT -m set ! --match-set bl src,dst --return-nomatch ! --update-counters ! --update-subcounters ! --packets-eq 3 --bytes-gt 7 -j DROP"},
	}
	for _, tt := range tests {
		rs, err := Restore(ir.IPv4, strings.NewReader(tt.input), nil, RestoreOptions{Sets: fakeLookup})
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%q: got error %v, want %q", tt.input, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.input, err)
			continue
		}
		if got := FormatRule(ir.IPv4, "INPUT", rs.Chain("INPUT").Rules[0], false); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestSetMatchList checks iptables -L's rendering of the set match
// (set_print_v4), as recorded from iptables-legacy 1.8.9.
func TestSetMatchList(t *testing.T) {
	input := "*filter\n" +
		"-A INPUT -m set --match-set bl src,dst\n" +
		"-A INPUT -m set ! --match-set bl src --return-nomatch ! --update-counters ! --update-subcounters ! --packets-eq 3 --bytes-gt 7 -j DROP\n" +
		"-A INPUT -p tcp -m set --match-set ls dst -m tcp --dport 22\n" +
		"COMMIT\n"
	rs, err := Restore(ir.IPv4, strings.NewReader(input), nil, RestoreOptions{Sets: fakeLookup})
	if err != nil {
		t.Fatal(err)
	}
	got, err := FormatList(rs, "INPUT", ListOptions{Numeric: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "Chain INPUT (policy ACCEPT)\n" +
		"target     prot opt source               destination         \n" +
		"           0    --  0.0.0.0/0            0.0.0.0/0            match-set bl src,dst\n" +
		"DROP       0    --  0.0.0.0/0            0.0.0.0/0            ! match-set bl src return-nomatch ! update-counters ! update-subcounters ! packets-eq 3 bytes-gt 7\n" +
		"           6    --  0.0.0.0/0            0.0.0.0/0            match-set ls dst tcp dpt:22\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
