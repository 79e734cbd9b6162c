package main

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The per-packet cost of -m set lookups, by kind of set table
// (BPF_PROG_TEST_RUN of xfw_xdp on fw's ingress, FORWARD): a DXR table
// (hash:ip, hash:net), a hash table (timeouts, port types), and a hash
// table with entry counters (a counting probe and two atomic adds). The
// sets are loaded with `xfw ipset restore` and one rule
// "-A FORWARD -m set --match-set S src[,dst] -j DROP".

// setLookupSize is the number of members of the large sets.
const setLookupSize = 1_000_000

// setLookupCase is one set and its rule.
type setLookupCase struct {
	Name string `json:"name"`
	// Create is the set's ipset create options after its name.
	Create string `json:"create"`
	// Members is the number of members.
	Members int `json:"members"`
	// Table is the kind of data plane table ("DXR", "hash", "hash +
	// counters", "none").
	Table string `json:"table"`
	// Member and Other are the frame of a member source (dropped) and of
	// a source in no entry (forwarded).
	Member progRunCase `json:"member"`
	Other  progRunCase `json:"other"`
	Error  string      `json:"error,omitempty"`
}

// setLookupSection is the setlookup section's result.
type setLookupSection struct {
	Cases []setLookupCase `json:"cases"`
	Notes []string        `json:"notes"`
}

// runSetLookup measures each case in a fresh fw namespace's data plane.
func runSetLookup(ctx context.Context, o *options) (*setLookupSection, error) {
	defer fastPathOff()() // "other" frames are forwarded: see fastPathOff
	t, err := newTopology(ctx, "setlookup")
	if err != nil {
		return nil, err
	}
	defer t.Close()
	addrs, _ := setAddrs(setLookupSize)
	other := netip.MustParseAddr("10.99.0.1")
	dst := fwdNet.Addr().Next()
	const port = 9 // the frames' destination port (hash:ip,port members)
	hosts := func(b *strings.Builder, set string, n int, suffix string) {
		for _, a := range addrs[:n] {
			fmt.Fprintf(b, "add %s %s%s\n", set, a, suffix)
		}
	}
	// Networks of mixed lengths (/16 to /32) around the member address,
	// so the hash walk tries several prefix lengths: the member frame's
	// source is in the /24 only (its /25–/32 are absent).
	nets := func(b *strings.Builder, set string, n int) {
		rng := rand.New(rand.NewSource(seedSet))
		first := netip.PrefixFrom(addrs[0], 24).Masked()
		seen := map[netip.Prefix]bool{first: true}
		fmt.Fprintf(b, "add %s %s\n", set, first)
		for i := 1; i < len(addrs) && len(seen) < n; i++ {
			bits := 16 + rng.Intn(17)
			p := netip.PrefixFrom(addrs[i], bits).Masked()
			if seen[p] || p.Contains(addrs[0]) || p.Contains(other) {
				continue
			}
			seen[p] = true
			fmt.Fprintf(b, "add %s %s\n", set, p)
		}
	}
	cases := []struct {
		c    setLookupCase
		dirs string
		fill func(b *strings.Builder)
	}{
		{c: setLookupCase{Name: "no set (one -s rule)", Table: "none"}},
		{c: setLookupCase{Name: "hash:ip", Create: "hash:ip maxelem 2000000", Members: setLookupSize, Table: "DXR"}, dirs: "src",
			fill: func(b *strings.Builder) { hosts(b, "s", setLookupSize, "") }},
		{c: setLookupCase{Name: "hash:ip timeout", Create: "hash:ip maxelem 2000000 timeout 86400", Members: setLookupSize, Table: "hash"}, dirs: "src",
			fill: func(b *strings.Builder) { hosts(b, "s", setLookupSize, "") }},
		{c: setLookupCase{Name: "hash:ip counters", Create: "hash:ip maxelem 2000000 counters", Members: setLookupSize, Table: "hash + counters"}, dirs: "src",
			fill: func(b *strings.Builder) { hosts(b, "s", setLookupSize, "") }},
		{c: setLookupCase{Name: "hash:net /16–/32 timeout", Create: "hash:net maxelem 200000 timeout 86400", Members: 100_000, Table: "hash"}, dirs: "src",
			fill: func(b *strings.Builder) { nets(b, "s", 100_000) }},
		{c: setLookupCase{Name: "hash:ip,port", Create: "hash:ip,port maxelem 2000000", Members: setLookupSize, Table: "hash"}, dirs: "src,dst",
			fill: func(b *strings.Builder) { hosts(b, "s", setLookupSize, fmt.Sprintf(",udp:%d", port)) }},
	}
	sec := &setLookupSection{Notes: []string{
		"ns/packet: the kernel's mean duration of one run of xfw_xdp (BPF_PROG_TEST_RUN, on CPU 1), median of the calls [min–max]; FORWARD, 64-byte UDP, ingress_ifindex fw's ingress veth (FIB lookup and chain selection as for real traffic).",
		"Ruleset: one rule `-A FORWARD -m set --match-set s src[,dst] -j DROP` (the baseline: `-A FORWARD -s 192.0.2.1 -j DROP`), policy ACCEPT. member: the frame's source is in the set (dropped); other: it is in no entry (forwarded).",
		"Tables: DXR (hash:ip, hash:net without timeouts or counters: bpf/lpm.h); hash (one BPF hash map lookup per prefix length present, longest first: bpf/set_lookup.h xfw_set_hlookup); hash + counters (the same, and a counting probe before the rule, two atomic adds on the entry's counter).",
		"Each call runs one frame over and over: the set's entries it reads stay in the CPU caches, so these are the lookups' instruction costs, not their cache misses (for those, random keys over 1M-entry tables: results/lpm.md, where a BPF hash map lookup of a 1M /32 set costs 177–214 ns). ipset's cost is part of the sets section's forwarding rates.",
		"A frame of no entry costs more with counters: the counting probe is an entry every packet reaching the rule meets (a CONTINUE entry of the walk), whether or not the set holds it.",
	}}
	for _, tc := range cases {
		c := tc.c
		var sets, rules strings.Builder
		rules.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
		if tc.fill == nil {
			rules.WriteString("-A FORWARD -s 192.0.2.1/32 -j DROP\n")
		} else {
			fmt.Fprintf(&sets, "create s %s\n", c.Create)
			tc.fill(&sets)
			fmt.Fprintf(&rules, "-A FORWARD -m set --match-set s %s -j DROP\n", tc.dirs)
		}
		rules.WriteString("COMMIT\n")
		err := func() error {
			if err := mustIn(ctx, t.FwNS, o.xfwBin, "stop"); err != nil {
				return err
			}
			if tc.fill != nil {
				if _, err := runIn(ctx, loadTimeout, t.FwNS, strings.NewReader(sets.String()), o.xfwBin, "ipset", "restore"); err != nil {
					return err
				}
			}
			if _, err := runIn(ctx, loadTimeout, t.FwNS, strings.NewReader(rules.String()), o.xfwBin, "iptables-restore", "-w"); err != nil {
				return err
			}
			return nettest.InNamespace(t.FwNS, func() error {
				prog, err := attachedXDP(t.FwIn)
				if err != nil {
					return err
				}
				defer prog.Close()
				if err := pinSelf(fwCPU); err != nil {
					return err
				}
				src := addrs[0]
				if tc.fill == nil {
					src = netip.MustParseAddr("192.0.2.1")
				}
				if c.Member, err = timeFrame(prog, udpFrame(t, src, dst, 1, port), o.reps); err != nil {
					return fmt.Errorf("member frame: %w", err)
				}
				if c.Other, err = timeFrame(prog, udpFrame(t, other, dst, 1, port), o.reps); err != nil {
					return fmt.Errorf("other frame: %w", err)
				}
				// The member frame must be dropped and the other not.
				const xdpDrop = 1
				if c.Member.Retval != xdpDrop || c.Other.Retval == xdpDrop {
					return fmt.Errorf("verdicts: member %d, other %d (want %d, not %d)", c.Member.Retval, c.Other.Retval, xdpDrop, xdpDrop)
				}
				return nil
			})
		}()
		if err != nil {
			c.Error = err.Error()
		}
		progress("setlookup: %-26s member %.0f ns, other %.0f ns %s", c.Name, c.Member.Ns.Median, c.Other.Ns.Median, c.Error)
		sec.Cases = append(sec.Cases, c)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	_ = mustIn(ctx, t.FwNS, o.xfwBin, "stop")
	return sec, nil
}

// writeSetLookup renders the setlookup section.
func writeSetLookup(b *strings.Builder, s *setLookupSection) {
	b.WriteString("## Set lookups: data-plane cost per packet (BPF_PROG_TEST_RUN)\n\n")
	for _, n := range s.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	b.WriteString("\n| set | members | table | member: ns [min–max] | other: ns [min–max] |\n|---|---:|---|---:|---:|\n")
	for _, c := range s.Cases {
		if c.Error != "" {
			fmt.Fprintf(b, "| %s | %s | %s | error: %s | |\n", c.Name, humanCount(c.Members), c.Table, c.Error)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] |\n", c.Name, humanCount(c.Members), c.Table,
			c.Member.Ns.Median, c.Member.Ns.Min, c.Member.Ns.Max, c.Other.Ns.Median, c.Other.Ns.Min, c.Other.Ns.Max)
	}
	b.WriteString("\n")
}
