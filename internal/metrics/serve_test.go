package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// fakeCollector is a Collector whose reading returns snap (or err),
// counting the attach events of events.
func fakeCollector(snap *snapshot, err error, events *Events) *Collector {
	return &Collector{Events: events, read: func() (*snapshot, error) {
		if err != nil {
			return nil, err
		}
		copied := *snap
		return &copied, nil
	}}
}

// TestHandler answers GET and HEAD with the metrics, other methods with
// 405 and a failed reading with 500.
func TestHandler(t *testing.T) {
	var events Events
	events.Add("eth0", Attach)
	snap := &snapshot{conntrack: map[ir.Family]int{ir.IPv4: 1}}
	var want strings.Builder
	if err := fakeCollector(snap, nil, &events).Write(&want); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want.String(), `xfw_attach_events_total{interface="eth0",kind="attach"} 1`) {
		t.Fatalf("Write lacks the attach event:\n%s", want.String())
	}
	tests := []struct {
		name, method string
		readErr      error
		status       int
		body         string // "" for none; a prefix for errors
	}{
		{"GET", http.MethodGet, nil, http.StatusOK, want.String()},
		{"HEAD", http.MethodHead, nil, http.StatusOK, ""},
		{"POST", http.MethodPost, nil, http.StatusMethodNotAllowed, "method not allowed"},
		{"reading fails", http.MethodGet, errors.New("boom"), http.StatusInternalServerError, "xfw metrics: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			fakeCollector(snap, tt.readErr, &events).Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, "/metrics", nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if tt.status == http.StatusOK {
				if ct := rec.Header().Get("Content-Type"); ct != ContentType {
					t.Errorf("Content-Type %q", ct)
				}
				if rec.Body.String() != tt.body {
					t.Errorf("body:\n%s\nwant:\n%s", rec.Body.String(), tt.body)
				}
			} else if !strings.HasPrefix(rec.Body.String(), tt.body) {
				t.Errorf("body %q, want it to start with %q", rec.Body.String(), tt.body)
			}
		})
	}
}

// TestServe serves on a loopback port until the context ends.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logged []string
	done := make(chan error, 1)
	c := fakeCollector(&snapshot{}, nil, nil)
	go func() {
		done <- c.serve(ctx, ln, func(format string, args ...any) { logged = append(logged, format) })
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + MetricsPath)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "xfw_loaded{family=\"ipv4\"} 0\n") {
		t.Errorf("GET %s: %s\n%s", MetricsPath, resp.Status, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v when its context ended", err)
		}
	case <-time.After(shutdownTimeout + time.Second):
		t.Fatal("Serve did not return when its context ended")
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "serving") {
		t.Errorf("logged %q, want the address served", logged)
	}
}

// TestServeListenError reports an address it cannot listen on.
func TestServeListenError(t *testing.T) {
	err := (&Collector{}).Serve(context.Background(), "256.0.0.1:0", nil)
	if err == nil || !strings.Contains(err.Error(), "listen on 256.0.0.1:0") {
		t.Errorf("Serve on a bad address: %v", err)
	}
}
