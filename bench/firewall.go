package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// loadTimeout bounds loading one ruleset (a million rules included); a
// firewall that takes longer is reported as "did not load".
const loadTimeout = 300 * time.Second

// firewall is one implementation under test, driven through its own
// command-line tools inside a namespace.
type firewall struct {
	// Name is how results name it.
	Name string
	// load replaces the namespace's ruleset with rs.
	load func(ctx context.Context, ns string, rs *ruleset) error
	// appendRule appends r to chain of the loaded ruleset (one command).
	appendRule func(ctx context.Context, ns, chain string, r rule) error
	// insertRule inserts r at the head of chain and deleteRule deletes r
	// from it, by specification (one command each; nil: not measured).
	insertRule, deleteRule func(ctx context.Context, ns, chain string, r rule) error
	// reset removes everything the firewall loaded into the namespace.
	reset func(ctx context.Context, ns string) error
	// setUpdate adds (or deletes) one member of the loaded set, with the
	// firewall's set command (set firewalls only).
	setUpdate func(ctx context.Context, ns string, add bool, a netip.Addr) error
	// bin is the firewall's own binary, if it has one (xfw).
	bin string
}

// Names of the firewalls.
const (
	fwNone      = "none"
	fwXFW       = "xfw"
	fwLegacy    = "iptables-legacy"
	fwIptNFT    = "iptables-nft"
	fwNFT       = "nftables"
	fwIpset     = "ipset"
	fwNFTSet    = "nft-set"
	fwXFWSet    = "xfw-set"    // xfw ipset + one -m set rule
	fwXFWAgent  = "xfw, agent" // xfw's commands served by its agent (update section)
	refFirewall = fwIptNFT     // the reference of every ratio
)

// firewalls returns the implementations by name; xfwBin is xfw's binary.
func firewalls(xfwBin string) map[string]*firewall {
	fws := map[string]*firewall{
		fwNone: {
			Name:  fwNone,
			load:  func(context.Context, string, *ruleset) error { return nil },
			reset: func(context.Context, string) error { return nil },
		},
		fwXFW: xfwFirewall(xfwBin),
		fwLegacy: {
			Name:       fwLegacy,
			load:       restoreWith("iptables-legacy-restore", "-w"),
			appendRule: appendWith("iptables-legacy", "-w"),
			insertRule: ruleCmd("-I", "iptables-legacy", "-w"),
			deleteRule: ruleCmd("-D", "iptables-legacy", "-w"),
			reset:      resetWith("iptables-legacy-restore", "-w"),
		},
		fwIptNFT: {
			Name:       fwIptNFT,
			load:       restoreWith("iptables-nft-restore", "-w"),
			appendRule: appendWith("iptables-nft", "-w"),
			insertRule: ruleCmd("-I", "iptables-nft", "-w"),
			deleteRule: ruleCmd("-D", "iptables-nft", "-w"),
			reset:      nftReset,
		},
		fwNFT: {
			Name: fwNFT,
			load: nftLoad,
			appendRule: func(ctx context.Context, ns, chain string, r rule) error {
				return mustIn(ctx, ns, "nft", "add", "rule", "ip", nftTable, nftChainName(chain), r.nftExpr())
			},
			reset: nftReset,
		},
		fwIpset:  ipsetFirewall(),
		fwNFTSet: {Name: fwNFTSet, load: nftLoad, reset: nftReset},
		fwXFWSet: xfwSetFirewall(xfwBin),
	}
	return fws
}

// xfwFirewall is xfw, driven through its iptables commands.
func xfwFirewall(xfwBin string) *firewall {
	return &firewall{
		Name: fwXFW,
		bin:  xfwBin,
		// Conntrack matches included: xfw tracks connections in its
		// data plane (bpf/ct.h).
		load: func(ctx context.Context, ns string, rs *ruleset) error {
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(false)),
				xfwBin, "iptables-restore", "-w")
			return err
		},
		appendRule: appendWith(xfwBin, "iptables", "-w"),
		insertRule: ruleCmd("-I", xfwBin, "iptables", "-w"),
		deleteRule: ruleCmd("-D", xfwBin, "iptables", "-w"),
		reset: func(ctx context.Context, ns string) error {
			return mustIn(ctx, ns, xfwBin, "stop")
		},
	}
}

// ipsetFirewall is the kernel's ipset with one -m set rule (iptables-nft).
func ipsetFirewall() *firewall {
	return &firewall{
		Name: fwIpset,
		load: func(ctx context.Context, ns string, rs *ruleset) error {
			// Drop the rule using the set before replacing the set.
			if err := nftReset(ctx, ns); err != nil {
				return err
			}
			_ = mustIn(ctx, ns, "ipset", "destroy", ipsetName)
			if _, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.ipsetRestore()), "ipset", "restore"); err != nil {
				return err
			}
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(true)), "iptables-nft-restore", "-w")
			return err
		},
		reset: func(ctx context.Context, ns string) error {
			if err := nftReset(ctx, ns); err != nil {
				return err
			}
			_ = mustIn(ctx, ns, "ipset", "destroy", ipsetName)
			return nil
		},
		setUpdate: ipsetUpdate("ipset"),
	}
}

// xfwSetFirewall is xfw's ipset with one -m set rule.
func xfwSetFirewall(xfwBin string) *firewall {
	return &firewall{
		Name: fwXFWSet,
		load: func(ctx context.Context, ns string, rs *ruleset) error {
			// xfw stop removes the rules and the sets (kept in
			// the namespace's data plane).
			if err := mustIn(ctx, ns, xfwBin, "stop"); err != nil {
				return err
			}
			if _, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.ipsetRestore()), xfwBin, "ipset", "restore"); err != nil {
				return err
			}
			_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(true)), xfwBin, "iptables-restore", "-w")
			return err
		},
		reset: func(ctx context.Context, ns string) error {
			return mustIn(ctx, ns, xfwBin, "stop")
		},
		setUpdate: ipsetUpdate(xfwBin, "ipset"),
	}
}

// restoreWith returns a load that feeds the ruleset to an
// iptables-restore command.
func restoreWith(cmd ...string) func(context.Context, string, *ruleset) error {
	return func(ctx context.Context, ns string, rs *ruleset) error {
		_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(false)), cmd...)
		return err
	}
}

// ruleCmd returns a rule command that runs `cmd… op CHAIN RULE…`.
func ruleCmd(op string, cmd ...string) func(context.Context, string, string, rule) error {
	return func(ctx context.Context, ns, chain string, r rule) error {
		argv := append(append(append([]string(nil), cmd...), op, chain), r.iptablesArgs()...)
		_, err := runIn(ctx, 0, ns, nil, argv...)
		return err
	}
}

// appendWith returns an appendRule that runs `cmd… -A CHAIN RULE…`.
func appendWith(cmd ...string) func(context.Context, string, string, rule) error {
	return ruleCmd("-A", cmd...)
}

// resetWith returns a reset that restores the empty ruleset with an
// iptables-restore command.
func resetWith(cmd ...string) func(context.Context, string) error {
	empty := &ruleset{Chain: "FORWARD", Policy: "ACCEPT"}
	return func(ctx context.Context, ns string) error {
		_, err := runIn(ctx, 0, ns, strings.NewReader(empty.iptablesRestore(false)), cmd...)
		return err
	}
}

// nftLoad loads the ruleset as an nft script.
func nftLoad(ctx context.Context, ns string, rs *ruleset) error {
	_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.nftScript()), "nft", "-f", "/dev/stdin")
	return err
}

// nftReset flushes the nftables ruleset (iptables-nft's rules included).
func nftReset(ctx context.Context, ns string) error {
	return mustIn(ctx, ns, "nft", "flush", "ruleset")
}

// ipsetUpdate returns a setUpdate that runs `argv… add|del SET ADDR`.
func ipsetUpdate(argv ...string) func(ctx context.Context, ns string, add bool, a netip.Addr) error {
	return func(ctx context.Context, ns string, add bool, a netip.Addr) error {
		op := "del"
		if add {
			op = "add"
		}
		return mustIn(ctx, ns, append(append([]string(nil), argv...), op, ipsetName, a.String())...)
	}
}

// loadTimed loads rs and returns how long it took.
func (f *firewall) loadTimed(ctx context.Context, ns string, rs *ruleset) (time.Duration, error) {
	start := time.Now()
	if err := f.load(ctx, ns, rs); err != nil {
		return time.Since(start), fmt.Errorf("%s: load %d rules: %w", f.Name, len(rs.Rules)+len(rs.SetDrop), err)
	}
	return time.Since(start), nil
}
