package iptables

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// flushFirstBase is the running ruleset the flushFirst tests restore
// onto: user chains with rules in filter, nat and mangle.
const flushFirstBase = "*filter\n:f1 - [0:0]\n:f2 - [0:0]\n-A INPUT -j f1\n-A f1 -p tcp -j ACCEPT\n-A f1 -j f2\n-A f2 -p udp -j DROP\nCOMMIT\n" +
	"*nat\n:svc - [0:0]\n:sep - [0:0]\n:keep - [0:0]\n-A PREROUTING -j svc\n-A svc -j sep\n-A sep -p tcp -j DNAT --to-destination 10.0.0.1\n-A svc -j keep\n-A keep -j RETURN\nCOMMIT\n" +
	"*mangle\n:m1 - [0:0]\n-A PREROUTING -j m1\n-A m1 -j MARK --set-mark 1\nCOMMIT\n"

// TestRestoreSkippingFlushedChains checks what RestoreSkipping tells its
// base of a --noflush restore: the user chains the ":CHAIN" lines opening
// a table's first block declare (not a built-in chain, not one declared
// after another line, not one of a later block, none of a table outside
// -T, none without --noflush, with --test or without parsing ahead), and
// that a restore onto a base without those chains' rules gives the same
// ruleset and outcome as one onto the full base.
func TestRestoreSkippingFlushedChains(t *testing.T) {
	full, err := Restore(ir.IPv4, strings.NewReader(flushFirstBase), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noflush := RestoreOptions{NoFlush: true}
	cases := []struct {
		name    string
		input   string
		opts    RestoreOptions
		parsers int
		want    string // table:chain …, as asked in filter, nat, mangle order
	}{
		{"kube-proxy", "*filter\n:f1 - [0:0]\n:INPUT ACCEPT [0:0]\n\n# comment\n:f2 - [0:0]\n-A f1 -j ACCEPT\nCOMMIT\n*nat\n:svc - [0:0]\n:sep - [0:0]\n:new - [0:0]\n-A svc -j sep\n-A sep -j DNAT --to-destination 10.0.0.2\nCOMMIT\n", noflush, 2, "filter:f1 filter:f2 nat:sep nat:svc"},
		{"declared after a command", "*nat\n:svc - [0:0]\n-D keep -j RETURN\n:keep - [0:0]\n-A svc -j keep\nCOMMIT\n", noflush, 2, "nat:svc"},
		{"zeroed before", "*filter\n-Z f1\n:f1 - [0:0]\nCOMMIT\n", noflush, 2, ""},
		{"later block", "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n*filter\n:f2 - [0:0]\nCOMMIT\n*mangle\n:m1 - [0:0]\nCOMMIT\n", noflush, 2, "mangle:m1"},
		{"empty block", "*mangle\nCOMMIT\n*mangle\n:m1 - [0:0]\nCOMMIT\n", noflush, 2, ""},
		{"table option", "*filter\n:f1 - [0:0]\nCOMMIT\n*nat\n:sep - [0:0]\nCOMMIT\n", RestoreOptions{NoFlush: true, Table: "nat"}, 2, "nat:sep"},
		{"flushing", "*mangle\n:m1 - [0:0]\nCOMMIT\n*filter\n:f1 - [0:0]\nCOMMIT\n", RestoreOptions{}, 2, ""},
		{"test", "*mangle\n:m1 - [0:0]\nCOMMIT\n", RestoreOptions{NoFlush: true, Test: true}, 2, ""},
		{"no parsing ahead", "*mangle\n:m1 - [0:0]\nCOMMIT\n", noflush, 0, ""},
		{"failing", "*nat\n:sep - [0:0]\n-A nosuch -j ACCEPT\nCOMMIT\n", noflush, 2, "nat:sep"},
		{"no newline at the end", "*filter\n:f2 - [0:0]\nCOMMIT", noflush, 2, "filter:f2"},
	}
	for _, c := range cases {
		var got []string
		base := func(skip ir.Skip) (*ir.Ruleset, error) {
			rs := full.CloneChains()
			for _, table := range []string{ir.TableFilter, ir.TableNat, ir.TableMangle} {
				if skip.Tables(table) {
					for _, ch := range rs.TableByName(table).Chains {
						ch.Rules = nil
					}
					continue
				}
				flushed := skip.Rules(table)
				if flushed == nil {
					continue
				}
				for _, ch := range rs.TableByName(table).Chains {
					if flushed(ch.Name) {
						got = append(got, table+":"+ch.Name)
						ch.Rules = nil
					}
				}
			}
			return rs, nil
		}
		rs, err := restoreSkip(ir.IPv4, strings.NewReader(c.input), base, c.opts, c.parsers)
		slices.Sort(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: flushed %q, want %q", c.name, got, c.want)
		}
		want, wantErr := restoreWith(ir.IPv4, strings.NewReader(c.input), func(func(string) bool) (*ir.Ruleset, error) { return full, nil }, c.opts, c.parsers)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, want %v", c.name, err, wantErr)
			continue
		}
		if err == nil {
			if a, b := saveNoStamp(rs), saveNoStamp(want); a != b {
				t.Errorf("%s: saved\n%s\nwant\n%s", c.name, a, b)
			}
		}
	}
}

// TestDeclaredChainAsChainLine checks that the reader reads a ":CHAIN"
// line's chain as chainLine does.
func TestDeclaredChainAsChainLine(t *testing.T) {
	for _, line := range []string{":a - [0:0]\n", ":  b\tACCEPT\n", ":c", ": \n", ":d-e_f.g -\n", ":" + strings.Repeat("x", 300) + " -\n"} {
		r := &restorer{fam: ir.IPv4, prog: restoreProgramName(ir.IPv4), base: func(ir.Skip) (*ir.Ruleset, error) { return nil, nil }, opts: RestoreOptions{NoFlush: true}}
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		r.work = r.committed.CloneChains()
		r.table = r.work.EnsureTable(ir.TableFilter)
		r.findChain = r.table.ChainFinder()
		before := len(r.table.Chains)
		err := r.chainLine(line)
		got := declaredChain(line)
		switch {
		case err == nil && len(r.table.Chains) == before+1:
			if name := r.table.Chains[before].Name; name != got {
				t.Errorf("%q: chainLine declared %q, the reader %q", line, name, got)
			}
		case err == nil:
			t.Errorf("%q: chainLine declared nothing", line)
		}
	}
}

// TestRestoreSkippingWaitsForReader checks that the base's question waits
// for the reader to pass the declarations even when they come in late
// (an input written in pieces), and that a reader stopped ahead (no room
// before the base is loaded) answers nil instead of waiting for ever.
func TestRestoreSkippingWaitsForReader(t *testing.T) {
	full, err := Restore(ir.IPv4, strings.NewReader(flushFirstBase), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		for _, l := range []string{"*nat\n", ":sep - [0:0]\n", ":svc - [0:0]\n", "-A svc -j sep\n", "COMMIT\n"} {
			pw.Write([]byte(l))
		}
		pw.Close()
	}()
	var got []string
	base := func(skip ir.Skip) (*ir.Ruleset, error) {
		if f := skip.Rules(ir.TableNat); f != nil {
			for _, ch := range []string{"svc", "sep", "keep"} {
				if f(ch) {
					got = append(got, ch)
				}
			}
		}
		return full, nil
	}
	if _, err := restoreSkip(ir.IPv4, pr, base, RestoreOptions{NoFlush: true}, 2); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "svc sep" {
		t.Errorf("flushed %q, want svc sep", got)
	}
	// More declarations than the reader may read ahead of the base.
	var b strings.Builder
	b.WriteString("*nat\n")
	for i := range (startAheadBatches + 2) * batchLines {
		fmt.Fprintf(&b, ":c%d - [0:0]\n", i)
	}
	b.WriteString(":sep - [0:0]\nCOMMIT\n")
	asked := false
	base = func(skip ir.Skip) (*ir.Ruleset, error) {
		asked = true
		if f := skip.Rules(ir.TableNat); f != nil {
			t.Errorf("an answer past the reader's room")
		}
		return full, nil
	}
	if _, err := restoreSkip(ir.IPv4, strings.NewReader(b.String()), base, RestoreOptions{NoFlush: true}, 2); err != nil {
		t.Fatal(err)
	}
	if !asked {
		t.Error("base not called")
	}
}

// TestRestoreSkippingInputPauses checks that an input that stops in the
// middle of a table's declarations until the base is loaded (a writer
// waiting for the restore) does not make the base's question wait for
// ever: it is answered nil (decode in full) and the restore goes on.
func TestRestoreSkippingInputPauses(t *testing.T) {
	full, err := Restore(ir.IPv4, strings.NewReader(flushFirstBase), nil, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	loaded := make(chan struct{})
	go func() {
		pw.Write([]byte("*nat\n:sep - [0:0]\n"))
		<-loaded
		pw.Write([]byte(":svc - [0:0]\n-A svc -j sep\nCOMMIT\n"))
		pw.Close()
	}()
	base := func(skip ir.Skip) (*ir.Ruleset, error) {
		defer close(loaded)
		if f := skip.Rules(ir.TableNat); f != nil {
			t.Errorf("an answer before the run's end")
		}
		return full, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := restoreSkip(ir.IPv4, pr, base, RestoreOptions{NoFlush: true}, 2)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the restore waits for its input and its input for the restore")
	}
}
