// Package ipset is xfw's ipset front end: it parses ipset's command line
// and restore format, keeps the sets' model and prints what ipset 7.17
// prints. The sets themselves live behind a Store; the data plane reads the
// model (Set, Entry) and the Diff between two collections.
//
// # Using it
//
// Run executes one ipset invocation against a Store and returns ipset's
// exit status. It loads the collection once, applies the invocation (every
// line of a restore) to a Clone and calls Store.Commit(old, new) once if
// anything changed: one atomic change per invocation. ComputeDiff(old, new)
// lists created, destroyed and renamed sets (by ID: a set's ID follows its
// contents through rename and swap) and the added and deleted members of
// the others, at the cost of the changes (each cloned set journals them).
//
// Members are Entry values: netip.Prefix for the address part (masked; a
// full-length prefix for the ip types), Proto and Port for port parts
// (ICMP: type<<8|code), Iface/Physdev, SetName for list:set, and the
// extensions: Nomatch, Expires (absolute; zero is permanent), Packets,
// Bytes, Comment.
//
// # Fidelity
//
// Supported: create, add, del, test, destroy, list, save, restore, flush,
// rename, swap, help, version with ipset's abbreviations and options
// (-exist/-!, -quiet, -terse, -name, -output plain|save|xml, -sorted,
// -file, -resolve), for hash:ip, hash:net, hash:ip,port, hash:net,port,
// hash:net,iface, bitmap:port and list:set in both families. Messages,
// exit statuses, list and save output and restore's batching (consecutive
// adds or deletes of one set are sent together: a parse error drops the
// batch, a kernel error stops it) follow ipset 7.17 on kernel 6.18; the
// test ipset_kernel_test.go compares every step, and the sets after it,
// with the real ipset in a network namespace.
//
// Known differences:
//   - Members are always listed sorted (address, longer prefix first,
//     protocol, port). ipset -sorted sorts by address only and keeps the
//     kernel's hash order among members of one address; without -sorted
//     the kernel lists all members in hash order.
//   - "Size in memory" is an estimate; the kernel's depends on its
//     allocator and hash layout.
//   - initval is random, as in the kernel, but not the kernel's value.
//   - hashsize grows when the average bucket holds more than four entries;
//     the kernel grows when a bucket overflows, which depends on initval.
//   - A range add that overflows maxelem stops at maxelem; the kernel may
//     exceed maxelem by a few entries when it reuses the slot of a deleted
//     entry in the same bucket (it checks maxelem only for new slots).
//   - forceadd is accepted and reports a full set (the kernel evicts only
//     from the new entry's bucket, usually empty).
//   - Host names are resolved through /etc/hosts only, not DNS; -resolve
//     prints addresses.
//   - help TYPE prints the general help only (no type-specific part).
//   - hash:ip's bitmask option is not supported (Unknown argument).
//   - Types ipset knows but xfw does not serve (bitmap:ip, hash:mac,
//     hash:net,net, …) fail as on a kernel without their module; skbinfo
//     and its entry options are refused (Unknown argument).
//
// # Imports
//
// ipset imports nothing of xfw's: it knows neither the iptables front end
// nor the data plane. The CLI (internal/cli) imports it: it runs ipset
// against its Store and turns the Diff into data-plane updates.
package ipset
