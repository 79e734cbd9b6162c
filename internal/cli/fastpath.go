package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

func init() { commands["fastpath"] = runFastPath }

// runFastPath prints the XDP fast path's state: the devices it forwards to, and what became of the
// packets FORWARD accepted at XDP (taken, or why they went to the stack).
func runFastPath(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw fastpath")
		return exitParameter
	}
	st, err := dataplane.FastPath()
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw fastpath: %v\n", err)
		return exitOther
	}
	if st == nil {
		fmt.Fprintln(env.Stdout, "xfw is not loaded in this network namespace")
		return exitOK
	}
	list := strings.Join(st.Targets, " ")
	if list == "" {
		list = "none (" + dataplane.FastPathEnv + "=off at the last sync, or no device takes XDP frames)"
	}
	fmt.Fprintf(env.Stdout, "fast path targets: %s\n", list)
	if st.Off != "" {
		fmt.Fprintf(env.Stdout, "fast path off: %s\n", st.Off)
	}
	for _, d := range sortedKeys(st.NoSource) {
		fmt.Fprintf(env.Stdout, "fast path takes nothing arriving on %s: %s\n", d, st.NoSource[d])
	}
	for _, d := range sortedKeys(st.NoTarget) {
		fmt.Fprintf(env.Stdout, "fast path sends nothing to %s: %s\n", d, st.NoTarget[d])
	}
	if st.Stale {
		fmt.Fprintln(env.Stdout, "fast path stale: the running data plane's targets and sources differ from what a sync would decide now (xfw sync, or the agent, applies it)")
	}
	for i, n := range st.Outcomes {
		fmt.Fprintf(env.Stdout, "  %-16s %d\n", dataplane.FastPathOutcomes[i], n)
	}
	return exitOK
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
