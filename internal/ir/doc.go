// Package ir is xfw's ruleset intermediate representation: the filter table
// of one address family as pure data (chains, rules, matches, targets).
//
// The IR is what the front ends (iptables-restore, iptables commands) produce
// and print back, and what the compiler consumes. It knows nothing of BPF or
// of the kernel. Every field keeps enough of the user's spelling to print the
// rule back exactly as iptables-save would, and enough meaning for the
// compiler to enforce it.
//
// codec.go holds the ruleset's binary form, which the control plane keeps in
// the kernel with a running ruleset so the next command need not parse text.
//
// # Imports
//
// ir is the bottom of xfw's packages: it imports prefault only (to map a
// decoded ruleset's pages at once). Every package that handles rules
// imports it: the iptables front end, the compiler, the data plane, logd,
// the CLI, the differential test and the benchmarks.
package ir
