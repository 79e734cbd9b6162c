// Package iptables is xfw's iptables front end for the filter table: it
// parses iptables / ip6tables command lines and iptables-save lines into the
// ruleset IR (package ir), prints the IR back exactly as iptables-save and
// "iptables -S" do, executes commands against a ruleset with libiptc's
// semantics, and implements iptables-restore.
//
// The reference is iptables 1.8.9 with the legacy backend, as installed on
// the development machine: option parsing emulates glibc's getopt_long and
// the xtables option parsers, so accepted spellings, canonical output and
// error messages (with their exit statuses) are those of the real tools.
// The model is "iptables 1.8.9 with only the extensions xfw supports
// installed": a match or target name iptables has no module for fails
// exactly as with iptables ("Couldn't load match `foo':No such file or
// directory", exit 2); one of iptables' own modules that xfw does not
// support fails the same way but says why ("Couldn't load match
// `hashlimit': not supported by xfw"), on -m or -j, or on the first option
// of such a target or protocol match (ext.go: missingMatch, missingTarget).
//
// Where iptables 1.8.9 has a bug that later releases fixed and that the
// upstream conformance suite (shared/conformance/iptables) tests for, this
// package follows the fixed behaviour; each such place is marked with
// "Deviation from 1.8.9" in the code.
//
// The set match asks its environment whether a set exists and what its
// family is, as iptables asks the kernel: callers pass a SetLookup
// (ParseOptions.Sets, RestoreOptions.Sets; xfw's CLI serves it from `xfw
// ipset`'s store). Without one no set exists. Like iptables, the parser
// does not compare the set's dimensions with the number of src/dst flags.
//
// # Imports
//
// iptables is the front end: it imports ir only, parsing into ir values and
// printing them back. The compiler never sees it; the CLI (internal/cli),
// the conntrack front end (for protocol names), the differential test and
// the benchmarks import it.
package iptables
