package cli

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/metrics"
)

func init() { commands["metrics"] = runMetrics }

// runMetrics is `xfw metrics`: the Prometheus metrics an agent serves,
// written once to standard output (for node_exporter's textfile collector,
// or to look at them).
func runMetrics(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw metrics")
		return exitParameter
	}
	c := &metrics.Collector{Lock: metricsLock}
	if err := c.Write(env.Stdout); err != nil {
		fmt.Fprintf(env.Stderr, "xfw metrics: %v\n", err)
		return exitOther
	}
	return exitOK
}

// metricsLock takes xfw's lock for a metrics reading, waiting for it as
// ipset does: the counters are read together with the rules they count.
func metricsLock() (func(), error) { return lock(waitSpec{set: true}) }
