package iptables

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRestoreLeavesBase checks that a restore shares the base's rules
// without changing them: commands that change rules in place (-Z, -E)
// work on copies, chain commands (-N, -F, -X, -P) change the copy's chains
// only, and the base is as it was whether the restore commits or fails.
func TestRestoreLeavesBase(t *testing.T) {
	tests := []struct {
		name  string
		input string
		fails bool
	}{
		{name: "zero counters", input: "*filter\n-Z\nCOMMIT\n"},
		{name: "zero one chain", input: "*filter\n-Z old\n-A old -j DROP\nCOMMIT\n"},
		{name: "rename the jumped-to chain", input: "*filter\n-E old renamed\nCOMMIT\n"},
		{name: "append and insert", input: "*filter\n-A old -j DROP\n-I INPUT -j old\nCOMMIT\n"},
		{name: "chain commands", input: "*filter\n-N extra\n-A extra -j DROP\n-P INPUT DROP\n-F old\n-F INPUT\n-X old\n-X extra2\nCOMMIT\n", fails: true},
		{name: "flush, delete, new, policy", input: "*filter\n:old - [0:0]\n-F INPUT\n-X old\n-N old\n-P FORWARD DROP\n-A old -s 10.0.0.2 -j ACCEPT\nCOMMIT\n"},
		{name: "kube-proxy's chain declaration and -X", input: "*filter\n:old - [0:0]\n:INPUT ACCEPT [0:0]\n-A INPUT -j old\n-X old2\nCOMMIT\n", fails: true},
		{name: "failing block after a zero", input: "*filter\n-Z\n-A nochain -j DROP\nCOMMIT\n", fails: true},
		{name: "second table fails", input: "*filter\n-Z\nCOMMIT\n*nat\n-A nochain -j ACCEPT\nCOMMIT\n", fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := ir.NewRuleset(ir.IPv4)
			if err := run(t, base, "-N old", "-A INPUT -j old", "-A old -s 10.0.0.1 -j ACCEPT"); err != nil {
				t.Fatal(err)
			}
			for _, c := range base.Chains {
				for _, r := range c.Rules {
					r.Counters = ir.Counters{Packets: 7, Bytes: 700}
				}
			}
			want := base.Clone()
			_, err := Restore(ir.IPv4, strings.NewReader(tt.input), base, RestoreOptions{NoFlush: true})
			if (err != nil) != tt.fails {
				t.Fatalf("err = %v, want failure %v", err, tt.fails)
			}
			// Compared as deep copies (which write an empty rule list as
			// nil, as the chain commands' copies need not).
			if !reflect.DeepEqual(base.Clone(), want) {
				t.Errorf("base changed:\n%s\nwant\n%s", SaveTable(base, true), SaveTable(want, true))
			}
		})
	}
}

// oneByteReader returns at most one byte per Read, as a pipe written
// slowly does.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// TestReadChunk checks readChunk against fgets with iptables-restore's
// buffer: lines up to and including the newline, longer ones cut into
// pieces of restoreBufLen-1 bytes, a last line without a newline, and
// input arriving in small reads.
func TestReadChunk(t *testing.T) {
	long := strings.Repeat("x", restoreBufLen+5)
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{name: "lines", input: "a\nbc\n\nd", want: []string{"a\n", "bc\n", "\n", "d"}},
		{name: "long line", input: long + "\nz\n", want: []string{long[:restoreBufLen-1], long[restoreBufLen-1:] + "\n", "z\n"}},
		{name: "exactly the buffer", input: long[:restoreBufLen-1] + "\n", want: []string{long[:restoreBufLen-1], "\n"}},
		{name: "empty", input: "", want: nil},
	}
	for _, tt := range tests {
		for _, slow := range []bool{false, true} {
			var in io.Reader = strings.NewReader(tt.input)
			if slow {
				in = oneByteReader{in}
			}
			br := newRestoreReader(in)
			var got []string
			for {
				chunk, err := readChunk(br)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				got = append(got, chunk)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s (slow %v): got %d chunks %q…, want %d", tt.name, slow, len(got), got, len(tt.want))
			}
		}
	}
}

// TestReadChunkWaitsForNoMore checks that a line is returned as soon as it
// is complete, without waiting for more input (an input kept open).
func TestReadChunkWaitsForNoMore(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	br := newRestoreReader(pr)
	go func() { _, _ = pw.Write([]byte("*filter\n")) }()
	chunk, err := readChunk(br)
	if err != nil || chunk != "*filter\n" {
		t.Fatalf("readChunk = %q, %v", chunk, err)
	}
}

// TestRestoreChainCommandsShareRules: chain commands (-N, -F, -X, -P) in a
// restore leave the other chains' rules shared with the base (a kube-proxy
// partial sync deletes endpoint chains; copying the table's rules for it
// made every rule new to the saved form's reuse).
func TestRestoreChainCommandsShareRules(t *testing.T) {
	base := ir.NewRuleset(ir.IPv4)
	if err := run(t, base, "-N old", "-N gone", "-N flushed", "-A INPUT -j old", "-A old -s 10.0.0.1 -j ACCEPT", "-A flushed -j DROP"); err != nil {
		t.Fatal(err)
	}
	input := "*filter\n-N new\n-F flushed\n-X gone\n-P FORWARD DROP\nCOMMIT\n"
	rs, err := Restore(ir.IPv4, strings.NewReader(input), base, RestoreOptions{NoFlush: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"INPUT", "old"} {
		if got, want := rs.Chain(name).Rules[0], base.Chain(name).Rules[0]; got != want {
			t.Errorf("chain %s: its rule was copied", name)
		}
	}
	if rs.Chain("gone") != nil || rs.Chain("new") == nil || len(rs.Chain("flushed").Rules) != 0 || rs.Chain("FORWARD").Policy != ir.VerdictDrop {
		t.Errorf("the chain commands did not take effect:\n%s", SaveTable(rs, false))
	}
}
