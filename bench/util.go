package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// defaultCmdTimeout bounds every external command the bench runs (a
// 100,000-rule restore takes a few seconds; a million-rule one well under a
// minute on the reference machine).
const defaultCmdTimeout = 120 * time.Second

// cmdResult is what an external command printed and how long it took.
type cmdResult struct {
	Stdout, Stderr string
	Elapsed        time.Duration
}

// runIn runs argv inside network namespace ns (ip netns exec), with stdin
// from in (may be nil), bounded by timeout. An empty ns runs argv directly
// (only for commands that touch no network state, such as version queries).
func runIn(ctx context.Context, timeout time.Duration, ns string, in io.Reader, argv ...string) (cmdResult, error) {
	if timeout <= 0 {
		timeout = defaultCmdTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := argv
	if ns != "" {
		full = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin = in
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Kill only the process we started, by pid, when the context ends.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	res := cmdResult{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("%s: timed out after %v", strings.Join(argv, " "), timeout)
		}
		msg := strings.TrimSpace(res.Stderr)
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		return res, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return res, nil
}

// mustIn is runIn with the default timeout and no stdin.
func mustIn(ctx context.Context, ns string, argv ...string) error {
	_, err := runIn(ctx, 0, ns, nil, argv...)
	return err
}

// stats summarises repeated measurements of one point.
type stats struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	N      int       `json:"n"`
	All    []float64 `json:"all"`
}

// summarize returns the median, min and max of xs.
func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{Median: med, Min: s[0], Max: s[len(s)-1], N: len(s), All: xs}
}

// quiet silences progress (bench-quick prints its headline only).
var quiet bool

// progress prints a timestamped progress line on stderr.
func progress(format string, args ...any) {
	if quiet {
		return
	}
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// humanCount renders a rule count as in the tables: 500, 1K, 50K, 1M.
func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return fmt.Sprint(n)
}

// humanRate renders packets (or requests) per second.
func humanRate(pps float64) string {
	switch {
	case pps >= 1e6:
		return fmt.Sprintf("%.2f M", pps/1e6)
	case pps >= 1e3:
		return fmt.Sprintf("%.1f k", pps/1e3)
	}
	return fmt.Sprintf("%.0f", pps)
}

// humanDuration renders a latency with three significant digits.
func humanDuration(sec float64) string {
	switch {
	case sec >= 1:
		return fmt.Sprintf("%.2f s", sec)
	case sec >= 1e-3:
		return fmt.Sprintf("%.1f ms", sec*1e3)
	}
	return fmt.Sprintf("%.0f µs", sec*1e6)
}

// joinInts writes xs comma-separated.
func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// parseInts reads a comma-separated list of non-negative integers.
func parseInts(s string) ([]int, error) {
	var xs []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		x, err := strconv.Atoi(f)
		if err != nil || x < 0 {
			return nil, fmt.Errorf("%q: not a rule count", f)
		}
		xs = append(xs, x)
	}
	return xs, nil
}
