package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseDifftestArgsConntrack: --conntrack and its options, and --nat
// (both families, or --family's) implying it.
func TestParseDifftestArgsConntrack(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantErr   bool
		conntrack bool
		convs     int
		skip      bool
	}{
		{"default", []string{"--seed", "1"}, false, false, 60, false},
		{"stateful", []string{"--conntrack", "--seed", "3"}, false, true, 60, false},
		{"conversations", []string{"--conntrack", "--conversations", "5", "--skip-stack-errors"}, false, true, 5, true},
		{"negative conversations", []string{"--conntrack", "--conversations", "-1"}, true, false, 0, false},
		{"nat implies conntrack", []string{"--nat", "--seed", "5"}, false, true, 60, false},
		{"IPv6 nat", []string{"--family", "6", "--nat"}, false, true, 60, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseDifftestArgs(tc.args, io.Discard)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if a.conntrack != tc.conntrack || a.convs != tc.convs || a.skipStack != tc.skip {
				t.Errorf("conntrack %v conversations %d skip %v, want %v %d %v", a.conntrack, a.convs, a.skipStack, tc.conntrack, tc.convs, tc.skip)
			}
		})
	}
}

func TestFindXFW(t *testing.T) {
	withXFW := t.TempDir()
	xfw := filepath.Join(withXFW, xfwProgram)
	if err := os.WriteFile(xfw, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExecutable := filepath.Join(withXFW, "data")
	if err := os.WriteFile(notExecutable, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	without := t.TempDir()
	selfIn := func(dir string) func() (string, error) {
		return func() (string, error) { return filepath.Join(dir, "xfw-difftest"), nil }
	}
	tests := []struct {
		name       string
		flagPath   string
		executable func() (string, error)
		want       string
		wantErr    string
	}{
		{"beside", "", selfIn(withXFW), xfw, ""},
		{"not beside", "", selfIn(without), "", "no xfw binary beside xfw-difftest"},
		{"own binary unknown", "", func() (string, error) { return "", errors.New("no /proc") }, "", "own binary"},
		{"flag wins", xfw, selfIn(without), xfw, ""},
		{"flag missing", filepath.Join(without, "xfw"), selfIn(withXFW), "", "--xfw"},
		{"flag not executable", notExecutable, selfIn(withXFW), "", "not an executable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findXFW(tc.flagPath, tc.executable)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
