package iptables

import (
	"math"
	"testing"
)

// TestCStrtoul checks the strtoul emulation.
func TestCStrtoul(t *testing.T) {
	tests := []struct {
		in       string
		base     int
		v        uint64
		n        int
		overflow bool
	}{
		{"22", 0, 22, 2, false},
		{"0x16", 0, 22, 4, false},
		{"026", 0, 22, 3, false},
		{" +5x", 0, 5, 3, false},
		{"-1", 10, math.MaxUint64, 2, false},
		{"0x", 0, 0, 1, false},
		{"0xg", 16, 0, 1, false},
		{"", 0, 0, 0, false},
		{"  ", 10, 0, 0, false},
		{"18446744073709551616", 10, math.MaxUint64, 20, true},
		{"ff", 16, 255, 2, false},
	}
	for _, tt := range tests {
		v, n, o := cStrtoul(tt.in, tt.base)
		if v != tt.v || n != tt.n || o != tt.overflow {
			t.Errorf("cStrtoul(%q, %d) = %d, %d, %v", tt.in, tt.base, v, n, o)
		}
	}
	if _, ok := xtStrtoui("-0", 0, 10); ok {
		t.Error("xtables_strtoui accepted a minus sign")
	}
	if v, ok := xtStrtoui(" 0x10", 0, 255); !ok || v != 16 {
		t.Errorf("xtStrtoui(\" 0x10\") = %d, %v", v, ok)
	}
	if _, ok := xtStrtoui("5 ", 0, 255); ok {
		t.Error("trailing blank accepted")
	}
}

// TestGetaddrinfoPort checks glibc's numeric service conversion.
func TestGetaddrinfoPort(t *testing.T) {
	tests := map[string]int{"65536": 0, "65537": 1, "4294967297": 1, " 5": 5, "": 0, "-0": 0, "ssh": 22, "tftp": 69}
	for in, want := range tests {
		if got, ok := getaddrinfoPort(in); !ok || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"-1", "2147483648", "0x10", "5 ", "SSH", "foo"} {
		if _, ok := getaddrinfoPort(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
