package cli

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

func init() { commands["status"] = runStatus }

// runStatus prints, per interface of the namespace, what xfw has attached,
// and which families hold a ruleset. It exits 1 when xfw is loaded and an
// interface lacks one of its programs (traffic there is not filtered).
func runStatus(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw status")
		return exitParameter
	}
	st, err := dataplane.Status()
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw status: %v\n", err)
		return exitOther
	}
	if !st.Loaded {
		fmt.Fprintln(env.Stdout, "xfw is not loaded in this network namespace")
		return exitOK
	}
	fmt.Fprintf(env.Stdout, "rulesets: ipv4 %s, ipv6 %s\n", onOff(st.IPv4), onOff(st.IPv6))
	for _, i := range st.Interfaces {
		mark := ""
		if !i.Protected() {
			mark = "  UNPROTECTED: " + i.Missing() + " missing"
		}
		if i.ForeignXDP != "" {
			mark += "; another XDP program runs there: " + i.ForeignXDP
		}
		if len(i.OtherTCX) > 0 {
			mark += "; TCX egress also runs: " + strings.Join(i.OtherTCX, ", ")
		}
		fmt.Fprintf(env.Stdout, "  %-16s XDP %-8s TCX egress %s ingress %s%s\n", i.Name, i.XDPMode, onOff(i.TCX), onOff(i.TCXIngress), mark)
	}
	if bare := st.Unprotected(); len(bare) > 0 {
		fmt.Fprintf(env.Stderr, "xfw status: %d interface(s) without xfw's programs: the ruleset does not cover them; `xfw sync` (or the agent) attaches them\n", len(bare))
		return exitOther
	}
	return exitOK
}

func onOff(b bool) string {
	if b {
		return "loaded"
	}
	return "none"
}
