// Package metrics exposes xfw's state in the Prometheus text exposition
// format (version 0.0.4): the rule and policy counters `iptables -L -v -x`
// prints, the drops they add up to, the connection tables' size, the
// sets, what is attached to each interface, and the attach events a
// long-running agent counts (Events).
//
// # Using it
//
// A Collector reads the data plane of the current network namespace at
// every Write (one scrape: read everything, then render): `xfw metrics`
// writes it once to standard output (for node_exporter's textfile
// collector), an agent serves it over HTTP (Collector.Handler,
// Collector.Serve). The metrics and their labels are listed in
// docs/usage.md.
//
// # Where things are
//
// expo.go writes the text format (escaping, HELP and TYPE lines);
// read.go reads the data plane into a snapshot; families.go turns a
// snapshot into metric families; events.go is the agent's event counters;
// serve.go the HTTP side.
//
// # Imports
//
// metrics imports dataplane (what is running), ir (the rulesets it reads),
// iptables (the order `iptables -L` lists chains in) and ipset (the
// namespace's sets). The CLI (internal/cli) imports it for `xfw metrics`
// and the agent; it imports nothing above it.
package metrics
