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
// work on copies, and the base is as it was whether the restore commits
// or fails.
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
			if !reflect.DeepEqual(base, want) {
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
