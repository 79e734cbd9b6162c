package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/conntrack"
	"github.com/xfw-dev/xfw/internal/dataplane"
)

func init() {
	commands["conntrack"] = runConntrack
}

// conntrackUsage is the usage xfw conntrack prints (-h, no arguments).
const conntrackUsage = `Command line interface for the connection tracking system. Version 1.4.7 (xfw ` + Version + `)
Usage: conntrack [commands] [options]

Commands:
  -L [table] [options]		List conntrack table
  -D [table] parameters		Delete conntrack
  -F [table]			Flush table
  -C [table]			Show counter

Tables: conntrack

Conntrack parameters and options:
  -o, --output type		Output format: extended

Common parameters and options:
  -s, --src, --orig-src ip		Source address from original direction
  -d, --dst, --orig-dst ip		Destination address from original direction
  -p, --protonum proto		Layer 4 Protocol, eg. 'tcp'
  -f, --family proto		Layer 3 Protocol, eg. 'ipv6'

Protocol options (after -p tcp, udp, udplite, sctp, dccp):
  --sport, --orig-port-src port	original source port
  --dport, --orig-port-dst port	original destination port
  --state state			TCP state, fe. ESTABLISHED (-p tcp)
`

// runConntrack is `xfw conntrack`: conntrack-tools' -L, -D, -F and -C over
// the data plane's connection tables, with conntrack's output, messages
// and exit statuses.
func runConntrack(name string, args []string, env Env) int {
	o, err := conntrack.ParseArgs(args)
	if err != nil {
		var ce *conntrack.Error
		if errors.As(err, &ce) {
			fmt.Fprint(env.Stderr, ce.Message())
			return exitParameter
		}
		fmt.Fprint(env.Stderr, conntrack.Prefix+err.Error()+"\n")
		return exitParameter
	}
	switch o.Cmd {
	case conntrack.CmdNone, conntrack.CmdHelp:
		fmt.Fprint(env.Stdout, conntrackUsage)
		return exitOK
	case conntrack.CmdVersion:
		fmt.Fprintf(env.Stdout, "conntrack %s (conntrack-tools)\n", conntrack.Version)
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprint(env.Stderr, conntrack.Prefix+strings.TrimRight(err.Error(), "\n")+"\n")
		return exitOther
	}
	t, err := dataplane.OpenCT()
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	if o.Cmd == conntrack.CmdFlush {
		if err := t.Flush(); err != nil {
			return fail(err)
		}
		fmt.Fprint(env.Stderr, conntrack.Flushed)
		return exitOK
	}
	entries, err := t.LiveEntries()
	if err != nil {
		return fail(err)
	}
	switch o.Cmd {
	case conntrack.CmdCount:
		fmt.Fprintf(env.Stdout, "%d\n", len(entries))
		return exitOK
	case conntrack.CmdList:
		n := 0
		for _, e := range entries {
			if o.Filter.Match(e.Conn) {
				fmt.Fprint(env.Stdout, conntrack.Format(e.Conn, o.Format))
				n++
			}
		}
		fmt.Fprint(env.Stderr, conntrack.Summary(n, false))
		return exitOK
	case conntrack.CmdDelete:
		n := 0
		for _, e := range entries {
			if !o.Filter.Match(e.Conn) {
				continue
			}
			ok, err := t.Delete(e)
			if err != nil {
				return fail(err)
			}
			if ok {
				fmt.Fprint(env.Stdout, conntrack.Format(e.Conn, o.Format))
				n++
			}
		}
		fmt.Fprint(env.Stderr, conntrack.Summary(n, true))
		if n == 0 {
			return exitOther // as conntrack: nothing deleted is a failure
		}
		return exitOK
	}
	return exitOK
}
