package dataplane

import (
	"strings"
	"testing"
)

func TestCheckRelease(t *testing.T) {
	tests := []struct {
		release string
		wantErr string // "" for accepted
	}{
		{"6.18.0-1-amd64", ""},
		{"6.7.0", ""},
		{"6.7", ""},
		{"7.0.0-rc1", ""},
		{"6.10+", ""},
		{"6.6.58-generic", "needs Linux 6.7 or later"},
		{"5.15.0-91-generic", "this kernel is 5.15.0-91-generic"},
		{"6", "want MAJOR.MINOR"},
		{"x.1", "major"},
		{"6.rc", "minor"},
	}
	for _, tt := range tests {
		err := checkRelease(tt.release)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("checkRelease(%q) = %v, want nil", tt.release, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("checkRelease(%q) = %v, want an error with %q", tt.release, err, tt.wantErr)
		}
	}
}
