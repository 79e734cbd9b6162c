// Package compiler turns a ruleset IR into the contents of xfw's data plane
// maps: it flattens user chains into one ordered entry list per base chain
// and builds, per field, the value → class → bit-vector tables of linear
// bit-vector search (LBVS). It is pure: no kernel, no BPF, only values.
//
// # Where things are
//
// Compile (compile.go) drives the rest: flatten.go inlines user chains into
// entries, conditions.go and the terms_*.go files turn each rule's matches
// into conditions on the classification fields (ct.go and sets.go build the
// conntrack and set conditions), interval.go holds the interval sets those
// conditions are made of, and lbvs.go builds the per-field classes and bit
// vectors. append.go adds, inserts and deletes one rule in a compiled
// generation without compiling the ruleset again; ctfast.go picks the
// established fast path; simulate.go runs a generation in user space (the
// tests and the benchmark check the data plane against it). fields.go
// mirrors bpf/common.h.
//
// # Imports
//
// The compiler imports ir (its input) and prefault only. The data plane
// (internal/dataplane), the CLI (internal/cli), the differential test
// (internal/testkit/difftest) and the benchmarks import it; it imports none of
// them, nor any front end: it sees rules only as ir values.
package compiler
