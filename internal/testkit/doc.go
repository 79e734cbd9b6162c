// Package testkit is the test and benchmark harness: nothing under it is
// linked into bin/xfw.
//
//   - nettest builds namespace topologies (gen — fw — sink) and sends and
//     captures real frames through them;
//   - difftest is the differential oracle that compares xfw with the
//     kernel's iptables-legacy in twin nettest topologies (the program is
//     cmd/xfw-difftest).
//
// Imports point into testkit from the tests, the benchmarks (bench/) and
// cmd/xfw-difftest, and from testkit into xfw's packages, never from xfw's
// product packages into testkit; `go list -deps ./cmd/xfw` names none of it.
package testkit
