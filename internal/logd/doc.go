// Package logd turns xfw's LOG events into the lines the kernel's LOG target
// (net/netfilter/nf_log_syslog.c) prints, and copies them from the data
// plane's ring buffer to a writer and to the kernel log.
//
// Format reproduces the kernel's text byte for byte: field order, spacing
// (every field ends with a space, so most lines end with one), upper-case
// hex for TOS, PREC and option bytes, lower-case hex for the MAC, RES, SPI
// and IPv6 fields, "INCOMPLETE [n bytes]" and "TRUNCATED" for short
// headers, one level of ICMP/ICMPv6 error recursion, the kernel's 1 KiB
// line buffer, and MARK= with the packet's mark at the rule (the walk's,
// which the event carries). What the data plane cannot know is left out,
// as the kernel leaves it out when it does not apply:
//
//   - UID= GID= (--log-uid) of a received packet: XDP has no socket for
//     it (those of the host's own packets, read at TC, are printed).
//   - PHYSIN= of a packet a bridge passed up whose port the data plane
//     could not name (bpf/bridge.h: its receive was steered to another
//     CPU, or the port runs no program yet).
//
// The packet is what the data plane saw, which differs from what netfilter
// sees in a few cases the formatter compensates for: on FORWARD the kernel
// has already decremented the TTL (hop limit) of a routed packet, so
// Format prints the received value minus one (not for a frame bridged from
// port to port, which keeps its TTL); a VLAN-tagged frame is printed as the VLAN
// device sees it (tag removed from the MAC header); the packet is cut to its
// IP length as the stack trims link-layer padding. Bytes beyond the event's
// snapshot (the first 256 bytes of the frame) are unknown: a header that
// lies past them is printed as the kernel prints a header cut short.
//
// # Imports
//
// logd imports dataplane (the LOG event and its ring buffer) and ir (chains,
// families, LOG flags). The CLI (internal/cli) imports it.
package logd
