package dataplane

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestConsistentDump: an interrupted dump is asked again until one is
// whole; other errors end it at once; a table that changes through every
// attempt is an error, never the partial list.
func TestConsistentDump(t *testing.T) {
	other := errors.New("permission denied")
	for _, tc := range []struct {
		name        string
		interrupted int // dumps interrupted before the first whole one
		err         error
		want        []int
		wantCalls   int
		wantErr     error
	}{
		{name: "whole at once", want: []int{1}, wantCalls: 1},
		{name: "interrupted twice", interrupted: 2, want: []int{3}, wantCalls: 3},
		{name: "other error", err: other, wantCalls: 1, wantErr: other},
		{name: "always interrupted", interrupted: dumpAttempts + 5, wantCalls: dumpAttempts, wantErr: netlink.ErrDumpInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := consistentDump("the test table", func() ([]int, error) {
				calls++
				if tc.err != nil {
					return nil, tc.err
				}
				if calls <= tc.interrupted {
					return []int{calls}, netlink.ErrDumpInterrupted
				}
				return []int{calls}, nil
			})
			if calls != tc.wantCalls {
				t.Errorf("%d dumps, want %d", calls, tc.wantCalls)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil && got != nil {
				t.Errorf("a failed dump returned %v", got)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
