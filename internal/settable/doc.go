// Package settable builds the data plane's set lookups (dataplane.SetTable)
// of a generation from the sets of `xfw ipset`'s store and the compiler's
// set conditions (Build), patches the running generations' tables in place
// after member changes (Patch), and moves the set entry counts the data
// plane keeps into the stored sets (TakeCounts, AddCounts).
//
// # Set lookups
//
// Each set condition of a generation (compiler.SetCond: set, directions,
// --return-nomatch) becomes data plane lookups whose answers are OR-ed
// into its bit, as the kernel's ip_set_test answers it:
//
//   - a set of the other family, or of more dimensions than the match has
//     directions, never matches (ip_set_test returns 0): no lookup;
//   - hash:ip and hash:net without timeouts: one longest-prefix-match DXR
//     table (internal/lpm), the fast path;
//   - every other type, and hash:ip/hash:net with timeouts: one hash table
//     keyed by the parts of the type (address masked to each prefix length
//     present, protocol and port, interface), each entry with its expiry
//     in CLOCK_MONOTONIC ns (bpf/set_lookup.h xfw_set_hlookup);
//   - list:set: one lookup per member, in list order (list_set_ktest tests
//     the members in turn, the first match answers; without counters the
//     OR is the same). Members of the other family or of more dimensions
//     than the match has directions never match; a member entry with a
//     timeout caps the expiry of every entry of the member's lookup, since
//     the kernel skips an expired list entry.
//
// Hash tables are shared: the lookups of one set in a generation share one
// table (SetTable.SameAs), and a generation takes the running one's table
// of a set over (SetTable.Reuse) when the set has not changed since it was
// built (the running tables follow every member change: patched in place,
// or rebuilt by the reload that follows it), so a ruleset change does not
// rebuild a million-entry table. hash:net,iface tables, which hold
// interface indexes, are rebuilt.
//
// # Set entry counters
//
// Every entry of a set with counters gets a counter of its table
// (SetHashEntry.Ctr, 1…SetTable.Counters), and every entry of a list:set
// with counters one of the generation for the member it names
// (SetTable.ListCtr). The lookups of a set with counters, and of every
// member of a list:set with counters, are hash lookups: the data plane
// records which entry answered, which a DXR table does not say.
//
// The data plane counts in each generation from zero
// (dataplane.SetCounterID); the stored sets hold everything counted before.
// A new generation takes over the counts of the one it replaces
// (dataplane.Apply); the running counts reach the stored sets when an
// `xfw ipset` command loads them (TakeCounts) and when a new generation no
// longer counts an entry (dataplane.Update.SetLeftover, AddCounts).
//
// # Imports
//
// settable sits between the command line and the data plane: it imports
// ipset (the sets), compiler and ir (the set conditions), lpm (the DXR
// tables) and dataplane (the tables' form, the running generations); cli
// imports it, and it imports neither cli nor iptables.
package settable
