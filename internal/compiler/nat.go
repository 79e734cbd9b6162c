package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// NAT in the walk (bpf/nat.h).
//
// DNAT in nat PREROUTING is an entry of its own action (ActDNAT): a
// terminal entry whose Next carries the new IPv4 address (host order) and
// Aux the new port (0: the packet's own). REDIRECT is a DNAT to the input
// interface's primary address (Next RedirectAddr), as nf_nat_redirect_ipv4
// picks it (the data plane's xfw_nat_ifaddr, filled by the control plane
// with the local addresses). The data plane translates the
// connection's first packet, routes it again (the kernel's PREROUTING runs
// before its routing decision) and resumes the walk of the chain that
// route picks after its nat PREROUTING segment (Layout.NatResume). The
// translation is kept with the connection and applied to both directions.
//
// What the data plane translates, and so what is accepted: IPv4 DNAT
// (--to-destination [ADDR[-ADDR]][:PORT[-PORT]]; without an address the
// destination's own is kept, KeepAddr) or REDIRECT
// ([--to-ports PORT[-PORT]]) with ports in a rule restricted to TCP or UDP, by
// the address alone for any other protocol, in nat PREROUTING and nat
// OUTPUT (checkDnatProto); SNAT and MASQUERADE in
// nat POSTROUTING for any protocol (TCP and UDP ports, the ICMP echo
// identifier, other protocols address only, as nf_nat_proto.c does).
// DNAT and REDIRECT in nat OUTPUT are translated at TC egress
// (nat_output.go). Address and port ranges and the --random,
// --random-fully and --persistent flags name a range (nat_range.go).
// DNAT's shifted port maps (/BASE) are a range (nat_range.go); SNAT's and
// MASQUERADE's are refused. SNAT in nat INPUT (the kernel's LOCAL_IN: the
// source of packets delivered locally) is an ActSNAT entry of the INPUT
// walk's nat INPUT segment: the data plane translates the source after
// INPUT accepted the packet and the host's replies' destination back at
// TC egress, routed again (bpf/nat_out.h). The conntrack options a
// translation changes the answer of: --ctstate SNAT and DNAT are a
// probe's (ctnat.go), so are --ctreplsrc and --ctrepldst in a ruleset
// with NAT (ctrepl.go); the reply tuple's ports are the translated ones.

// RedirectAddr is an ActDNAT entry's address for REDIRECT: the primary
// IPv4 address of the packet's input interface (0.0.0.0, which DNAT never
// translates to).
const RedirectAddr = 0

// MasqueradeAddr is an ActSNAT entry's address for MASQUERADE: the
// output interface's primary IPv4 address.
const MasqueradeAddr = 0

// KeepAddr is an ActDNAT or ActSNAT entry's address for a translation
// without one (`--to-destination :PORT`, `--to-source :PORT`): the
// packet's own destination or source is kept, as the kernel keeps it
// without NF_NAT_RANGE_MAP_IPS. A translation to 255.255.255.255 is
// refused.
const KeepAddr = 0xffffffff

// natTargetAddr returns a DNAT's or SNAT's entry address for range n
// (KeepAddr without an address, with ports), refusing what the data plane
// cannot translate to.
func natTargetAddr(name string, n *ir.NatRange) (uint32, error) {
	if n.Flags&ir.NatMapIPs == 0 {
		if n.Flags&ir.NatProtoSpecified == 0 {
			return 0, fmt.Errorf("target %s is not supported by xfw's data plane yet without an address or a port", name)
		}
		return KeepAddr, nil
	}
	if !n.MinAddr.Is4() || !n.MaxAddr.Is4() || n.MinAddr.IsUnspecified() {
		return 0, fmt.Errorf("target %s is not supported by xfw's data plane yet with other than IPv4 addresses", name)
	}
	if addr4(n.MinAddr) == KeepAddr || addr4(n.MaxAddr) == KeepAddr {
		return 0, fmt.Errorf("target %s is not supported by xfw's data plane to 255.255.255.255", name)
	}
	return addr4(n.MinAddr), nil
}

// natTargetNames name the NAT targets in refusals.
var natTargetNames = map[ir.TargetKind]string{ir.TargetDNAT: "DNAT", ir.TargetRedirect: "REDIRECT",
	ir.TargetSNAT: "SNAT", ir.TargetMasquerade: "MASQUERADE"}

// natRangeOf returns rule r's NAT range (an empty one without).
func natRangeOf(r *ir.Rule) *ir.NatRange {
	if r.Target.Nat == nil {
		return &ir.NatRange{}
	}
	return r.Target.Nat
}

// natContext says which nat chain a NAT rule is evaluated in.
type natContext struct {
	prerouting, postrouting, output, input bool
}

// checkNatRule refuses a NAT target (DNAT or REDIRECT in PREROUTING or
// OUTPUT, SNAT or MASQUERADE in POSTROUTING) of family fam in context at
// that the data plane cannot translate (also asked for every rule a nat
// chain reaches before flattening: checkNatReach).
func checkNatRule(fam ir.Family, at natContext, r *ir.Rule) error {
	name := natTargetNames[r.Target.Kind]
	source := r.Target.Kind == ir.TargetSNAT || r.Target.Kind == ir.TargetMasquerade
	switch {
	case !source && !at.prerouting && !at.output:
		return fmt.Errorf("target %s is not supported by xfw's data plane outside nat PREROUTING and OUTPUT", name)
	case r.Target.Kind == ir.TargetMasquerade && !at.postrouting:
		// The kernel refuses it too (the front end answers as iptables).
		return fmt.Errorf("target %s is not supported by xfw's data plane outside nat POSTROUTING", name)
	case source && !at.postrouting && !at.input:
		return fmt.Errorf("target %s is not supported by xfw's data plane outside nat POSTROUTING and INPUT", name)
	}
	if fam != ir.IPv4 {
		if err := checkNat6Rule(r); err != nil {
			return err
		}
	}
	n := natRangeOf(r)
	if !source {
		if err := checkDnatProto(name, r, n); err != nil {
			return err
		}
	}
	if n.Flags&ir.NatProtoOffset != 0 && r.Target.Kind != ir.TargetDNAT {
		return fmt.Errorf("target %s: port maps (/BASE) are not supported by xfw's data plane yet", name)
	}
	if fam == ir.IPv4 && (r.Target.Kind == ir.TargetDNAT || r.Target.Kind == ir.TargetSNAT) {
		if _, err := natTargetAddr(name, n); err != nil {
			return err
		}
	}
	if !natRanged(n) && n.Flags&ir.NatProtoSpecified != 0 && n.MinPort == 0 {
		return fmt.Errorf("target %s is not supported by xfw's data plane yet with port 0", name)
	}
	return nil
}

// checkDnatProto refuses a DNAT or REDIRECT (named name) whose rule r,
// translating to range n, names packets the data plane cannot translate:
// in nat PREROUTING and nat OUTPUT alike every protocol is translated by
// the address (UDP-Lite as UDP, ICMP and ICMPv6 echo with the identifier
// kept: bpf/nat_query.h, bpf/nat_out.h), ports only for TCP, UDP and SCTP
// (iptables takes no UDP-Lite ports; SCTP's CRC32c follows:
// bpf/sctp_nat.h). DCCP is refused: a kernel without a DCCP tracker
// (Linux 6.18 has no nf_conntrack_dccp_* sysctls) tracks it by its
// addresses and translates its address alone, leaving its checksum, which
// covers the addresses, wrong.
func checkDnatProto(name string, r *ir.Rule, n *ir.NatRange) error {
	proto := func(num uint8) bool { return r.Proto.Set && !r.Proto.Invert && r.Proto.Num == num }
	switch {
	case proto(protoTCP) || proto(protoUDP) || proto(protoSCTP):
		return nil
	case proto(protoDCCP):
		return fmt.Errorf("target %s is not supported by xfw's data plane for -p dccp "+
			"(a kernel without a DCCP tracker, as Linux 6.18, tracks DCCP by its addresses, translates "+
			"the address alone and leaves the checksum, which covers the addresses, wrong)", name)
	case n.Flags&ir.NatProtoSpecified != 0:
		return fmt.Errorf("target %s is not supported by xfw's data plane yet with ports in a rule not restricted to -p tcp, -p udp or -p sctp", name)
	}
	return nil
}

// natEntry sets e's action for rule r's NAT target (checkNatRule refuses
// what the data plane cannot translate).
func (fl *flattener) natEntry(e *Entry, r *ir.Rule) error {
	at := natContext{prerouting: fl.natPrerouting, postrouting: fl.natPostrouting, output: fl.natOutput,
		input: fl.natInput}
	if err := checkNatRule(fl.rs.Family, at, r); err != nil {
		return err
	}
	source := r.Target.Kind == ir.TargetSNAT || r.Target.Kind == ir.TargetMasquerade
	n := natRangeOf(r)
	e.Action = ActDNAT
	if source {
		e.Action = ActSNAT
	}
	if fl.rs.Family != ir.IPv4 {
		return fl.nat6Entry(e, r, n)
	}
	addr := uint32(RedirectAddr)
	if fl.natOutput && r.Target.Kind == ir.TargetRedirect {
		addr = redirectOutputAddr
	}
	if r.Target.Kind == ir.TargetDNAT || r.Target.Kind == ir.TargetSNAT {
		addr, _ = natTargetAddr(natTargetNames[r.Target.Kind], n) // checked above
	}
	e.Next = addr
	if natRanged(n) {
		return fl.natRangeEntry(e, n)
	}
	if n.Flags&ir.NatProtoSpecified != 0 {
		e.Aux = n.MinPort
	}
	return nil
}

// Protocol numbers DNAT translates with ports (TCP, UDP, SCTP) and the
// one it refuses (DCCP: checkDnatProto).
const (
	protoTCP  = 6
	protoUDP  = 17
	protoDCCP = 33
	protoSCTP = 132
)

// usesNAT reports whether rs's nat table has a NAT target.
func usesNAT(rs *ir.Ruleset) bool {
	t := rs.TableByName(ir.TableNat)
	if t == nil {
		return false
	}
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			if _, ok := natTargetNames[r.Target.Kind]; ok {
				return true
			}
		}
	}
	return false
}
