package metrics

import (
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// table is the table label of the rule and chain metrics: xfw serves the
// filter table only.
const table = "filter"

// families returns s's metric families, in the order they are written.
func (s *snapshot) families() []*family {
	fams := rulesetFamilies(s.rulesets)
	fams = append(fams, s.conntrackFamily())
	fams = append(fams, s.conntrackCounters()...)
	fams = append(fams, s.setFamilies()...)
	fams = append(fams, s.attachFamilies()...)
	return append(fams, s.guardFamily())
}

// guardFamily returns the guard's drops (no samples without a guard).
func (s *snapshot) guardFamily() *family {
	f := &family{name: "xfw_guard_drops_packets_total", typ: counter,
		help: "Packets the agent's guard dropped because their interface did not run xfw's programs yet: arriving (prerouting) or leaving (postrouting)."}
	if s.guard != nil {
		f.add(s.guard.in, "hook", "prerouting")
		f.add(s.guard.out, "hook", "postrouting")
	}
	return f
}

// rulesetFamilies returns the rule, policy and drop counters of rulesets,
// chain by chain in the order `iptables -L` lists them.
func rulesetFamilies(rulesets []*ir.Ruleset) []*family {
	rulePackets := &family{name: "xfw_rule_packets_total", typ: counter,
		help: "Packets that matched the rule (the pkts column of iptables -L -v -x); rule is its position in the chain, as iptables -L --line-numbers shows it."}
	ruleBytes := &family{name: "xfw_rule_bytes_total", typ: counter,
		help: "Bytes of the packets that matched the rule (the bytes column of iptables -L -v -x)."}
	policyPackets := &family{name: "xfw_chain_policy_packets_total", typ: counter,
		help: "Packets the built-in chain's policy decided (they reached the end of the chain)."}
	policyBytes := &family{name: "xfw_chain_policy_bytes_total", typ: counter,
		help: "Bytes of the packets the built-in chain's policy decided."}
	dropPackets := &family{name: "xfw_chain_drops_packets_total", typ: counter,
		help: "Packets the chain dropped: its rules' DROP and REJECT verdicts, and its policy when it is DROP."}
	dropBytes := &family{name: "xfw_chain_drops_bytes_total", typ: counter,
		help: "Bytes of the packets the chain dropped."}
	for _, rs := range rulesets {
		fam := rs.Family.String()
		for _, c := range iptables.OrderedChains(rs) {
			var drops ir.Counters
			for i, r := range c.Rules {
				labels := []string{"family", fam, "table", table, "chain", c.Name, "rule", strconv.Itoa(i + 1), "comment", comment(r)}
				rulePackets.add(r.Counters.Packets, labels...)
				ruleBytes.add(r.Counters.Bytes, labels...)
				if k := r.Target.Kind; k == ir.TargetDrop || k == ir.TargetReject {
					drops.Packets += r.Counters.Packets
					drops.Bytes += r.Counters.Bytes
				}
			}
			labels := []string{"family", fam, "table", table, "chain", c.Name}
			if c.Builtin {
				policyPackets.add(c.Counters.Packets, labels...)
				policyBytes.add(c.Counters.Bytes, labels...)
				if c.Policy == ir.VerdictDrop {
					drops.Packets += c.Counters.Packets
					drops.Bytes += c.Counters.Bytes
				}
			}
			dropPackets.add(drops.Packets, labels...)
			dropBytes.add(drops.Bytes, labels...)
		}
	}
	return []*family{rulePackets, ruleBytes, policyPackets, policyBytes, dropPackets, dropBytes}
}

// comment returns the text of r's -m comment, "" when it has none; the
// texts of several are joined by a space.
func comment(r *ir.Rule) string {
	var texts []string
	for _, m := range r.Matches {
		if cm, ok := m.(*ir.CommentMatch); ok {
			texts = append(texts, cm.Text)
		}
	}
	return strings.Join(texts, " ")
}

// conntrackCounters returns the connection tracker's counters (no samples
// without them).
func (s *snapshot) conntrackCounters() []*family {
	inserts := &family{name: "xfw_conntrack_inserts_total", typ: counter,
		help: "Connections the data plane started tracking (entered in its table of new connections)."}
	assured := &family{name: "xfw_conntrack_assured_total", typ: counter,
		help: "Connections moved to the table of assured connections."}
	full := &family{name: "xfw_conntrack_assured_table_full_total", typ: counter,
		help: "Moves to the table of assured connections refused because it was full of live ones."}
	removed := &family{name: "xfw_conntrack_removed_total", typ: counter,
		help: "Entries removed: by the tracker (expired, closed, moved) or by the user (xfw conntrack -D, -F)."}
	evicted := &family{name: "xfw_conntrack_evictions_total", typ: counter,
		help: "New connections the full table of new connections dropped to make room (least recently used first)."}
	locks := &family{name: "xfw_conntrack_lock_timeouts_total", typ: counter,
		help: "Connection entry locks the data plane gave up waiting for (the holder on another CPU for milliseconds): updates made unserialised, which can lose another CPU's."}
	if c := s.ctStats; c != nil {
		inserts.add(c.Inserts)
		assured.add(c.Assured)
		full.add(c.AssuredFull)
		removed.add(c.RemovedByTracker, "by", "tracker")
		removed.add(c.RemovedByUser, "by", "user")
		evicted.add(c.Evictions)
		locks.add(c.LockTimeouts)
	}
	return []*family{inserts, assured, full, removed, evicted, locks}
}

// conntrackFamily returns the number of live connections by family
// (none when the data plane has no connection tables).
func (s *snapshot) conntrackFamily() *family {
	f := &family{name: "xfw_conntrack_entries", typ: gauge,
		help: "Connections in the data plane's connection tables (both: assured and not yet assured), as xfw conntrack -C counts them."}
	if s.conntrack == nil {
		return f
	}
	for _, fam := range addressFamilies {
		f.add(uint64(s.conntrack[fam]), "family", fam.String())
	}
	return f
}

// setFamilies returns the sets' sizes and references.
func (s *snapshot) setFamilies() []*family {
	entries := &family{name: "xfw_set_entries", typ: gauge,
		help: "Members of the set (ipset list's Number of entries)."}
	refs := &family{name: "xfw_set_references", typ: gauge,
		help: "Rules of the running rulesets and list:set sets that use the set (ipset list's References)."}
	for _, set := range s.sets {
		entries.add(uint64(set.entries), "set", set.name, "type", set.typ)
		refs.add(uint64(set.references), "set", set.name)
	}
	return []*family{entries, refs}
}

// attachFamilies returns what is loaded and attached, and the agent's
// attach events.
func (s *snapshot) attachFamilies() []*family {
	attached := &family{name: "xfw_interfaces_attached", typ: gauge,
		help: "1 when xfw's program is attached to the interface at the hook (xdp: ingress, tcx_egress: egress, tcx_ingress: REJECT replies' way out), else 0."}
	loaded := &family{name: "xfw_loaded", typ: gauge,
		help: "1 when a ruleset of the family is loaded in the network namespace, else 0."}
	events := &family{name: "xfw_attach_events_total", typ: counter,
		help: "Attachments of xfw's programs to the interface by the agent: first ones (attach) and repairs (reattach)."}
	var loadedFam = map[ir.Family]bool{}
	if st := s.status; st != nil {
		for _, i := range st.Interfaces {
			attached.add(oneIf(i.XDPMode != "-"), "interface", i.Name, "hook", "xdp")
			attached.add(oneIf(i.TCX), "interface", i.Name, "hook", "tcx_egress")
			attached.add(oneIf(i.TCXIngress), "interface", i.Name, "hook", "tcx_ingress")
		}
		loadedFam[ir.IPv4], loadedFam[ir.IPv6] = st.IPv4, st.IPv6
	}
	for _, fam := range addressFamilies {
		loaded.add(oneIf(loadedFam[fam]), "family", fam.String())
	}
	for _, e := range s.events {
		events.add(e.n, "interface", e.iface, "kind", string(e.kind))
	}
	return []*family{attached, loaded, events}
}

// oneIf is 1 for true, 0 for false.
func oneIf(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
