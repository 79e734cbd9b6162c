package logd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/ir"
)

func TestIfNames(t *testing.T) {
	tables := [][]net.Interface{
		{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}},
		{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}, {Index: 3, Name: "eth1"}},
	}
	loads := 0
	c := &ifNames{list: func() ([]net.Interface, error) {
		t := tables[min(loads, len(tables)-1)]
		loads++
		return t, nil
	}}
	steps := []struct {
		index     uint32
		wait      time.Duration
		want      string
		wantLoads int
	}{
		{index: 2, want: "eth0", wantLoads: 1},
		{index: 1, want: "lo", wantLoads: 1},                               // cached
		{index: 3, want: "if3", wantLoads: 1},                              // a miss right after a load
		{index: 3, wait: 2 * ifMissRefreshGap, want: "eth1", wantLoads: 2}, // a miss reloads
		{index: 7, want: "if7", wantLoads: 2},
	}
	for i, s := range steps {
		time.Sleep(s.wait)
		if got := c.name(s.index); got != s.want || loads != s.wantLoads {
			t.Errorf("step %d: name(%d) = %q after %d loads, want %q after %d", i, s.index, got, loads, s.want, s.wantLoads)
		}
	}
}

func TestIfNamesError(t *testing.T) {
	c := &ifNames{list: func() ([]net.Interface, error) { return nil, errors.New("no netlink") }}
	if got := c.name(2); got != "if2" {
		t.Errorf("name = %q, want if2", got)
	}
}

func TestRecordStride(t *testing.T) {
	tests := []struct{ n, want int }{{316, 328}, {8, 16}, {1, 16}, {0, 8}}
	for _, tc := range tests {
		if got := recordStride(tc.n); got != tc.want {
			t.Errorf("recordStride(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestRunnerWrite(t *testing.T) {
	var out, kmsg bytes.Buffer
	r := &runner{out: &out, kmsg: &kmsg, names: &ifNames{list: func() ([]net.Interface, error) {
		return []net.Interface{{Index: 2, Name: "eth0"}}, nil
	}}, host: offlineHost{}}
	ev := Event{OutIfindex: 2, Family: ir.IPv4, Chain: ir.ChainOutput, Level: 6, L3Off: 14, Prefix: "p "}
	ev.Frame = mustHex(t, ethV4+udp4)
	ev.FrameLen = len(ev.Frame)
	if err := r.write(ev); err != nil {
		t.Fatal(err)
	}
	line := "p IN= OUT=eth0 " + udp4Line
	if out.String() != line+"\n" {
		t.Errorf("out = %q, want %q", out.String(), line+"\n")
	}
	if kmsg.String() != "<6>"+line+"\n" {
		t.Errorf("kmsg = %q, want %q", kmsg.String(), "<6>"+line+"\n")
	}
}

// TestRunWithoutXfw checks that Run waits while xfw is not loaded, stops on
// cancellation, and returns an error opening the ring at start.
func TestRunWithoutXfw(t *testing.T) {
	tests := []struct {
		name    string
		open    func() (*ebpf.Map, error)
		cancel  time.Duration
		wantErr string
	}{
		{name: "not loaded", open: func() (*ebpf.Map, error) { return nil, nil }, cancel: 50 * time.Millisecond},
		{name: "error at start", open: func() (*ebpf.Map, error) { return nil, errors.New("permission denied") },
			cancel: time.Hour, wantErr: "permission denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.cancel)
			defer cancel()
			r := &runner{out: &bytes.Buffer{}, names: newIfNames(), host: offlineHost{}, open: tc.open}
			start := time.Now()
			err := r.run(ctx)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("run = %v, want error %q", err, tc.wantErr)
			}
			if d := time.Since(start); d > tc.cancel+ringPollInterval/2 && tc.wantErr == "" {
				t.Errorf("run took %v after cancellation", d)
			}
		})
	}
}
