package cli

import (
	"io"
	"testing"
)

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
