package ir

import (
	"net/netip"
	"slices"
)

// The tables besides filter (nat, mangle, raw, security) and the options
// of the NAT targets.

// Table names as iptables' -t takes them.
const (
	TableFilter   = "filter"
	TableNat      = "nat"
	TableMangle   = "mangle"
	TableRaw      = "raw"
	TableSecurity = "security"
)

// Built-in chain names of the tables besides filter's.
const (
	ChainPrerouting  = "PREROUTING"
	ChainPostrouting = "POSTROUTING"
)

// tableBuiltins are each table's built-in chains in hook order (the order
// iptables-save and iptables -S print them), as the kernel's
// iptable_*.c register them.
var tableBuiltins = map[string][]string{
	TableFilter:   BuiltinChains,
	TableNat:      {ChainPrerouting, ChainInput, ChainOutput, ChainPostrouting},
	TableMangle:   {ChainPrerouting, ChainInput, ChainForward, ChainOutput, ChainPostrouting},
	TableRaw:      {ChainPrerouting, ChainOutput},
	TableSecurity: {ChainInput, ChainForward, ChainOutput},
}

// IsTable reports whether name is a table the kernel offers.
func IsTable(name string) bool {
	_, ok := tableBuiltins[name]
	return ok
}

// TableBuiltins returns the built-in chains of table ("" is filter) in hook
// order, or nil for an unknown table.
func TableBuiltins(table string) []string {
	if table == "" {
		table = TableFilter
	}
	return tableBuiltins[table]
}

// IsTableBuiltin reports whether chain is a built-in chain of table.
func IsTableBuiltin(table, chain string) bool {
	return slices.Contains(TableBuiltins(table), chain)
}

// Name returns the ruleset's table name ("filter" for the filter table).
func (rs *Ruleset) Name() string {
	if rs.Table == "" {
		return TableFilter
	}
	return rs.Table
}

// NewTable returns an empty table of family f: its built-in chains with
// policy ACCEPT, as the kernel creates it when a command first uses it.
func NewTable(f Family, table string) *Ruleset {
	if table == "" || table == TableFilter {
		return NewRuleset(f)
	}
	t := &Ruleset{Family: f, Table: table}
	for _, name := range TableBuiltins(table) {
		t.Chains = append(t.Chains, &Chain{Name: name, Builtin: true, Policy: VerdictAccept})
	}
	return t
}

// TableByName returns the table called name ("" or "filter": rs itself),
// or nil when it does not exist.
func (rs *Ruleset) TableByName(name string) *Ruleset {
	if name == "" || name == TableFilter {
		return rs
	}
	for _, t := range rs.Tables {
		if t.Table == name {
			return t
		}
	}
	return nil
}

// EnsureTable returns the table called name, creating it empty (as the
// kernel does when a command first names it) if it does not exist yet.
func (rs *Ruleset) EnsureTable(name string) *Ruleset {
	if t := rs.TableByName(name); t != nil {
		return t
	}
	t := NewTable(rs.Family, name)
	rs.Tables = append(rs.Tables, t)
	return t
}

// SetTable replaces (or adds) the table t.Table with t.
func (rs *Ruleset) SetTable(t *Ruleset) {
	if t.Table == "" || t.Table == TableFilter {
		tables := rs.Tables
		*rs = *t
		rs.Table, rs.Tables = "", tables
		return
	}
	for i, old := range rs.Tables {
		if old.Table == t.Table {
			rs.Tables[i] = t
			return
		}
	}
	rs.Tables = append(rs.Tables, t)
}

// HasRules reports whether any chain of the table holds a rule, or a
// built-in chain a policy other than ACCEPT, or the table a user chain.
func (rs *Ruleset) HasRules() bool {
	for _, c := range rs.Chains {
		if len(c.Rules) > 0 || !c.Builtin || c.Policy != VerdictAccept {
			return true
		}
	}
	return false
}

// LOG view bits: xfw's own, ORed into the data plane's LOG options above
// the LOG target's LogFlag* bits (never printed): the rule is in a
// PREROUTING chain (the line names no output device and shows the packet
// as received, before the stack's IPv4 option processing and ip_forward's
// TTL decrement) or in a POSTROUTING chain (no input device, no MAC
// header).
const (
	LogViewPrerouting  uint8 = 0x40
	LogViewPostrouting uint8 = 0x80
)

// NatFlags are the flags of a NAT range (NF_NAT_RANGE_*, the kernel's
// values).
type NatFlags uint8

// The NAT range flags.
const (
	// NatMapIPs: an address range is given.
	NatMapIPs NatFlags = 1 << iota
	// NatProtoSpecified: a port range is given.
	NatProtoSpecified
	// NatRandom is --random.
	NatRandom
	// NatPersistent is --persistent.
	NatPersistent
	// NatRandomFully is --random-fully.
	NatRandomFully
	// NatProtoOffset: a shifted port map (DNAT's ":PORT-PORT/BASE").
	NatProtoOffset
)

// NatRange is the range of a NAT target (struct nf_nat_range2): the
// addresses and ports to map to and the flags.
type NatRange struct {
	Flags NatFlags
	// MinAddr and MaxAddr bound the addresses (with NatMapIPs).
	MinAddr, MaxAddr netip.Addr
	// MinPort and MaxPort bound the ports (with NatProtoSpecified);
	// BasePort is a shifted port map's base (with NatProtoOffset).
	MinPort, MaxPort, BasePort uint16
}
