package iptables

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Round trips of real iptables-save dumps: restore the filter table, save
// it, and expect the same chain and rule lines.

// filterLines returns the chain and rule lines of the dump's filter block.
func filterLines(dump string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case l == "*filter":
			in = true
		case l == "COMMIT":
			in = false
		case in && (strings.HasPrefix(l, ":") || strings.HasPrefix(l, "-A") || strings.HasPrefix(l, "[")):
			out = append(out, l)
		}
	}
	return out
}

// dumpFamily guesses a dump's family from its name.
func dumpFamily(name string) ir.Family {
	if strings.Contains(name, "ip6") {
		return ir.IPv6
	}
	return ir.IPv4
}

// roundTrip restores dump (filter table only, with counters) and returns
// the chain and rule lines Save prints.
func roundTrip(fam ir.Family, dump string) ([]string, error) {
	rs, err := Restore(fam, strings.NewReader(dump), nil, RestoreOptions{Counters: true, Table: "filter"})
	if err != nil {
		return nil, err
	}
	return filterLines(SaveTable(rs, true)), nil
}

// withCounters gives rule lines without "[p:b]" the zero counters a
// restore with -c leaves them with.
func withCounters(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.HasPrefix(l, "-A") {
			l = "[0:0] " + l
		}
		out[i] = l
	}
	return out
}

// unsupportedModule finds rule lines using modules xfw does not support.
var unsupportedModule = regexp.MustCompile(`(-m|-j) (conntrack|state|limit|TCPMSS|CHECKSUM|CT)\b`)

// TestDumpRoundTrip restores and saves every dump; dumps using
// unsupported modules are skipped by name, then tested again without the
// lines using them.
func TestDumpRoundTrip(t *testing.T) {
	dir := filepath.Join(conformanceDir(t), "iptables", "dumps")
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dumps in %s: %v", dir, err)
	}
	tested, skipped := 0, 0
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, ".xml") {
			t.Logf("skipped %s: not iptables-save output (iptables-xml)", name)
			skipped++
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dump := string(data)
		fam := dumpFamily(name)
		want := withCounters(filterLines(dump))
		got, err := roundTrip(fam, dump)
		var e *Error
		switch {
		case err != nil && errors.As(err, &e) && unsupportedModule.MatchString(strings.Join(want, "\n")):
			t.Logf("skipped %s: uses modules xfw does not support (%s)", name, strings.Split(e.Msg, "\n")[0])
			skipped++
		case err != nil:
			t.Errorf("%s: restore failed: %v", name, err)
		case strings.Join(got, "\n") != strings.Join(want, "\n"):
			t.Errorf("%s: round trip differs\n got:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		default:
			tested++
		}

		// The same dump without the lines xfw cannot load.
		var kept []string
		dropped := 0
		for _, l := range strings.Split(dump, "\n") {
			if unsupportedModule.MatchString(l) {
				dropped++
				continue
			}
			kept = append(kept, l)
		}
		if dropped == 0 {
			continue
		}
		sub := strings.Join(kept, "\n")
		got, err = roundTrip(fam, sub)
		if err != nil {
			t.Errorf("%s without %d unsupported lines: restore failed: %v", name, dropped, err)
			continue
		}
		want = withCounters(filterLines(sub))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s without %d unsupported lines: round trip differs\n got:\n%s\nwant:\n%s", name, dropped, strings.Join(got, "\n"), strings.Join(want, "\n"))
			continue
		}
		t.Logf("%s: %d supported filter lines round-trip (%d lines with unsupported modules left out)", name, len(want), dropped)
	}
	t.Logf("dumps: %d round-tripped whole, %d skipped", tested, skipped)
}
