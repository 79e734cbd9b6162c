package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Collector reads xfw's metrics from the data plane of the network
// namespace the process runs in, anew at every Write (every scrape). Its zero value reads
// without a lock and exports no attach events.
type Collector struct {
	// Events are the attach events to export (an agent's), or nil.
	Events *Events
	// Lock, when set, is taken around the reading and its release called
	// after: xfw's lock, so that no command changes the rulesets or the
	// sets while they are read.
	Lock func() (unlock func(), err error)
	// GuardDrops, when set, reads the agent's guard: the packets it
	// dropped arriving on (in) and leaving by (out) unprotected
	// interfaces; ok is false while there is no guard.
	GuardDrops func() (in, out uint64, ok bool)

	// read replaces readDataPlane in tests.
	read func() (*snapshot, error)
}

// Write reads the metrics and writes them to w in the text exposition
// format. Nothing is written when the reading fails.
func (c *Collector) Write(w io.Writer) error {
	read := c.readDataPlane
	if c.read != nil {
		read = c.read
	}
	snap, err := read()
	if err != nil {
		return err
	}
	snap.events = c.Events.snapshot()
	if c.GuardDrops != nil {
		if in, out, ok := c.GuardDrops(); ok {
			snap.guard = &guardDrops{in: in, out: out}
		}
	}
	return writeFamilies(w, snap.families())
}

// Handler returns an http.Handler that answers GET and HEAD with the
// metrics (whatever the path), and 500 with the error when they cannot be
// read.
func (c *Collector) Handler() http.Handler { return c.handler(nil) }

// handler is Handler; logf, when not nil, is told the scrapes that fail.
func (c *Collector) handler(logf func(format string, args ...any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		if err := c.Write(&b); err != nil {
			if logf != nil {
				logf("metrics: scrape from %s: %v", r.RemoteAddr, err)
			}
			http.Error(w, fmt.Sprintf("xfw metrics: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		if r.Method == http.MethodGet {
			w.Write(b.Bytes())
		}
	})
}

// MetricsPath is where Serve serves the metrics.
const MetricsPath = "/metrics"

// readHeaderTimeout bounds how long a client may take to send its request
// headers (a scrape sends a few hundred bytes).
const readHeaderTimeout = 10 * time.Second

// shutdownTimeout bounds how long Serve waits for scrapes in progress when
// ctx ends.
const shutdownTimeout = 5 * time.Second

// Serve serves the metrics over HTTP on addr (host:port; port 0 picks a
// free one) at MetricsPath until ctx ends, then returns nil; it returns
// the error that stops it otherwise. logf, when not nil, is told the
// address it listens on and the scrapes that fail.
func (c *Collector) Serve(ctx context.Context, addr string, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return c.serve(ctx, ln, logf)
}

// serve is Serve on the listener ln, which it closes.
func (c *Collector) serve(ctx context.Context, ln net.Listener, logf func(format string, args ...any)) error {
	logf("metrics: serving http://%s%s", ln.Addr(), MetricsPath)
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, c.handler(logf))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Scrapes still running past the timeout are cut off.
		srv.Close()
	}
	return nil
}
