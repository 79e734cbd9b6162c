package compiler

// DNAT and REDIRECT in nat OUTPUT: the host's own packets (bpf/nat_out.h).
//
// The kernel translates them after the local route lookup, before filter
// OUTPUT, and routes them again (ip_route_me_harder); the replies get
// their source back after filter INPUT. An entry of action ActDNAT in the
// OUTPUT walk's nat OUTPUT segment does the same at TC egress: the data
// plane translates the connection's first packet, routes it again and
// resumes the walk after the nat OUTPUT segment (Layout.NatResume) with
// the new output device, then sends the packet out of it. The same
// limits as nat PREROUTING's DNAT apply (natEntry): IPv4, TCP or UDP,
// ranges and flags as nat_range.go.

// redirectOutputAddr is REDIRECT's address in nat OUTPUT: 127.0.0.1, as
// nf_nat_redirect_ipv4 picks it for the host's own packets.
const redirectOutputAddr = 0x7f000001
