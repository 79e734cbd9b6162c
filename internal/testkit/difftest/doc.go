// Package difftest is xfw's differential oracle: it runs the same
// iptables-save ruleset and the same packets through the kernel's
// iptables-legacy and through xfw, in two identical namespace topologies
// (gen — fw — sink, see internal/testkit/nettest), and compares what became of
// every packet.
//
// Per packet (a probe) it compares where the packet went — fw's own socket
// layer (INPUT), sink or gen (FORWARD, OUTPUT) — the replies fw sent
// (REJECT, and what fw's stack answers to packets it accepted), and the LOG
// lines each firewall printed (the kernel's from /dev/kmsg, xfw's from
// `xfw log`). After each run it compares every rule's and policy's counters
// (iptables-legacy-save -c against xfw iptables-save -c).
//
// The pieces:
//
//   - Plan is the addressing of both topologies: the same addresses and MACs
//     in each, so both firewalls load the same text and see byte-identical
//     frames.
//   - GenerateRuleset writes a seeded random ruleset (every match, target
//     and chain structure xfw supports) as iptables-restore text.
//   - GenerateCorpus writes probes aimed at the edges of a ruleset: prefix
//     boundaries, port range ends, TCP flag combinations, ICMP types and
//     codes, fragments, options, extension headers, truncated headers, VLAN
//     tags, TTL and length edges; to fw (INPUT), through it (FORWARD) and
//     from it (OUTPUT). ParseCorpus and Corpus.Format read and write them.
//   - A Session owns the two topologies and their observers; Session.Run
//     sends a corpus through both with one ruleset and returns the
//     Differences; Session.Shrink reduces a failing ruleset and corpus to a
//     minimal reproduction.
//
// Stateful runs (Config.Conntrack, GenOptions.Conntrack,
// GenerateStatefulCorpus) compare connection tracking: rulesets with -m
// conntrack and -m state, both connection tables flushed before each run,
// and conversations — probes with a Step, sent in order, each step once
// both sides have settled after the one before (conversation.go).
//
// Probes are sent in batches and observed continuously: each carries a
// unique marker (the IPv4 identification or the IPv6 flow label, which no
// supported match reads; the TCP sequence numbers and the ICMP echo
// identifier for replies that do not quote the probe), so observations are
// attributed to probes without waiting for each one.
//
// Imports point down: into nettest (the topologies and frames) and into
// xfw's ruleset packages (ir, iptables, compiler) to read the rulesets it
// generates and loads; it drives xfw itself as a program (Config.XFW). It is
// imported by cmd/xfw-difftest, tests/difftest and tests of xfw's packages,
// never by anything in bin/xfw.
package difftest
