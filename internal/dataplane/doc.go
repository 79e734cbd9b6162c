// Package dataplane loads xfw's eBPF programs into the current network
// namespace, fills their maps from a compiled generation, attaches them to
// every interface (XDP ingress, TCX egress) and swaps generations
// atomically. It is the only package that touches the kernel's BPF API.
//
// State lives in the kernel, anchored on the interfaces: the attached
// programs hold their maps, and among them each generation's saved ruleset
// text and counter offsets. Nothing is pinned, so `ip netns exec` (which remounts
// /sys) works, the filter keeps running after the command exits, and
// deleting the namespace frees everything.
//
// # What it owns
//
//   - Loading: the embedded BPF object and its programs' names (object.go),
//     the loaded programs and maps found again from the interfaces
//     (state.go), attaching them (attach.go).
//   - Installing a generation: Update (update.go), the Apply transaction
//     that builds the family's idle bank and swaps it in (apply.go), a
//     generation slot's maps (slots.go) and writing a generation into them
//     (fill.go), over generic map helpers (maps.go, mapped.go).
//   - Set lookups: the tables a generation carries (SetTable, settable.go),
//     built by the control plane (internal/settable); patching the running
//     ones (setpatch.go) and their entry counters (setctr.go); the
//     namespace's stored ipsets (ipsets.go).
//   - Reading back: the running generation (running.go), its counters and
//     saved ruleset (queries.go), LOG events, the connection tracker.
//
// # Imports
//
// dataplane is the bottom of the control plane: it imports compiler (the
// generation it loads), ir, conntrack (connection listings) and prefault;
// cli, settable and logd import it, never the other way round, and it
// knows nothing of iptables' or ipset's syntax.
package dataplane
