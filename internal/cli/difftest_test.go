package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindDifftest(t *testing.T) {
	withBoth := t.TempDir()
	beside := filepath.Join(withBoth, difftestProgram)
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inPath := t.TempDir()
	onPath := filepath.Join(inPath, difftestProgram)
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	alone := t.TempDir()
	tests := []struct {
		name    string
		self    string
		path    string
		want    string
		wantErr bool
	}{
		{"beside wins over PATH", filepath.Join(withBoth, "xfw"), inPath, beside, false},
		{"PATH", filepath.Join(alone, "xfw"), inPath, onPath, false},
		{"nowhere", filepath.Join(alone, "xfw"), alone, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			got, err := findDifftest(tc.self)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "make build") {
					t.Fatalf("got %q, %v; want an error saying how to build it", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
