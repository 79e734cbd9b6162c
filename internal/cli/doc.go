// Package cli implements xfw's commands: the iptables-compatible front ends
// (iptables, iptables-restore, iptables-save and their ip6tables twins) and
// xfw's own (ipset, stop, status, log, conntrack, sync, watch, version;
// `xfw difftest` only hands over to the separate xfw-difftest program). It wires the front end (iptables) to the compiler and the data
// plane, and maps errors to iptables' exit codes.
//
// # What it owns
//
//   - The command line: dispatch by program or command name (cli.go), the
//     namespace lock (lock.go), each command's flags and output.
//   - A ruleset change as one transaction: read the running ruleset back,
//     apply the command, compile, carry counters over and install
//     (state.go, iptables.go), or extend the running generation in place.
//   - `xfw ipset`'s store in the namespace (ipset.go), the set match's view
//     of it (ipsetLookup, sets.go), refusing set matches the data plane
//     cannot evaluate, and the set entry counters' way into and out of the
//     stored sets (setcounters.go). Building and patching the data plane's
//     set tables is internal/settable's.
//
// # Imports
//
// cli is the top of the tree, imported only by cmd/xfw: it imports the
// front end (iptables), ir, the compiler, settable, ipset, dataplane,
// conntrack, logd and prefault; none of them imports cli, and nothing of
// the test harness (internal/testkit) is imported.
package cli
