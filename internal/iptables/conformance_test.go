package iptables

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// conformanceDir locates shared/conformance beside the repository root (the
// directory holding go.mod), failing the test loudly when it is missing.
func conformanceDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod) not found above the test directory")
		}
		dir = parent
	}
	conf := filepath.Join(dir, "..", "shared", "conformance")
	if _, err := os.Stat(filepath.Join(conf, "iptables", "extensions")); err != nil {
		t.Fatalf("conformance data missing: expected %s (shared/conformance beside the repository): %v", conf, err)
	}
	return conf
}

// TestConformance replays the upstream extension tests.
func TestConformance(t *testing.T) {
	rep, err := RunConformance(filepath.Join(conformanceDir(t), "iptables", "extensions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Files {
		t.Logf("%-22s passed %3d  failed %3d  skipped %3d", f.Name, f.Passed, f.Failed, f.Skipped)
		for _, msg := range f.Failures {
			t.Errorf("%s", msg)
		}
	}
	reasons := map[string]int{}
	for _, f := range rep.Files {
		for r, n := range f.SkipReasons {
			reasons[r] += n
		}
	}
	var rs []string
	for r, n := range reasons {
		rs = append(rs, r+": "+itoa(n))
	}
	sort.Strings(rs)
	t.Logf("skipped by reason: %s", strings.Join(rs, ", "))
	t.Logf("TOTAL passed %d  failed %d  skipped %d", rep.Passed, rep.Failed, rep.Skipped)
	if rep.Passed == 0 {
		t.Error("no conformance case passed")
	}
}

// TestShellSplit checks the shell word splitting used for .t rules.
func TestShellSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`-j LOG --log-prefix "test: "`, []string{"-j", "LOG", "--log-prefix", "test: "}},
		{`-c "" x`, []string{"-c", "", "x"}},
		{`a\ b 'c d' "e\"f" "g\h"`, []string{"a b", "c d", `e"f`, `g\h`}},
		{`  x   y  `, []string{"x", "y"}},
	}
	for _, tt := range tests {
		got, err := shellSplit(tt.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("shellSplit(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := shellSplit(`"open`); err == nil {
		t.Error("unterminated quote accepted")
	}
}
