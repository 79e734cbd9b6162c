package compiler

import (
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Routing by the packet's mark. The kernel routes a received packet after
// the PREROUTING chains (raw, mangle, nat) with the mark they left it
// (ip rule fwmark), and routes the host's own packet again when mangle
// OUTPUT changed its mark (ip_route_me_harder). The data plane routes
// before its walk. When those chains can change the mark,
// Layout.Reroute tells the data plane where each walk's packet is routed
// again: after the PREROUTING segments (INPUT and FORWARD walks; it
// resumes the walk of the chain that route picks at the same point,
// bpf/xfw.c xfw_xdp_rerouted) and after the mangle OUTPUT segment (the
// OUTPUT walk; POSTROUTING then sees the new device, xfw_tc_rerouted).
// Only a packet whose mark changed stops there (emitReroute); after the
// PREROUTING segments also one whose TTL (hop limit) a TTL or HL rule
// changed, or its TOS a TOS or DSCP rule (rerouteInputs): ip_forward
// judges the TTL PREROUTING left (a TTL raised from 1 is forwarded, one
// set to 1 gets "time exceeded" before FORWARD), and the route lookup
// takes the TOS (ip rule tos, routes by TOS), so the data plane routes it
// again with the new values.

// reroutePoints are, per walk, the segments after which the kernel routes
// the packet again with its mark, and the tables whose chains of that
// name can change it there.
var reroutePoints = [NumChains]struct {
	chain  string
	tables []string
}{
	ChainInput:   {ir.ChainPrerouting, []string{ir.TableRaw, ir.TableMangle, ir.TableNat}},
	ChainForward: {ir.ChainPrerouting, []string{ir.TableRaw, ir.TableMangle, ir.TableNat}},
	ChainOutput:  {ir.ChainOutput, []string{ir.TableMangle}},
}

// marksBeforeRoute reports whether, in hook's walk, a chain the kernel
// routes after (reroutePoints), or a user chain it reaches, holds a rule
// that changes the packet's mark: MARK, or CONNMARK --restore-mark. (A
// mark set in the other chains only, for tc or a socket, costs the data
// plane no split walk.)
func marksBeforeRoute(rs *ir.Ruleset, hook int) bool {
	pt := reroutePoints[hook]
	for _, name := range pt.tables {
		t := rs.TableByName(name)
		if t == nil {
			continue
		}
		if c := t.Chain(pt.chain); c != nil && reachesMarkChange(t, c, map[*ir.Chain]bool{}) {
			return true
		}
	}
	return rerouteInputs(rs, hook) != 0
}

// The reroute probe's Arg bits (ProbeMarkMoved): besides the mark, it
// compares the TTL (hop limit) and the TOS with the ones the packet was
// routed with.
const (
	RerouteTTL = 1 << 0
	RerouteTOS = 1 << 1
)

// rerouteInputs returns the RerouteTTL and RerouteTOS bits for hook's walk
// (INPUT, FORWARD): a PREROUTING chain, or a user chain it reaches, has a
// TTL or HL rule, a TOS or DSCP rule.
func rerouteInputs(rs *ir.Ruleset, hook int) uint32 {
	if hook == ChainOutput {
		return 0
	}
	var bits uint32
	for _, name := range reroutePoints[hook].tables {
		if name != ir.TableMangle {
			// TTL, HL, TOS and DSCP are the kernel's mangle-only
			// targets (xt_target .table; the front end refuses them
			// elsewhere): nat's chains, 110,000 of them at
			// kube-proxy's 10,000 services, need no walk.
			continue
		}
		t := rs.TableByName(name)
		if t == nil {
			continue
		}
		c := t.Chain(ir.ChainPrerouting)
		if c == nil {
			continue
		}
		if reachesTarget(t, c, changesTTL, map[*ir.Chain]bool{}) {
			bits |= RerouteTTL
		}
		if reachesTarget(t, c, changesTOS, map[*ir.Chain]bool{}) {
			bits |= RerouteTOS
		}
	}
	return bits
}

// changesTTL reports whether target t changes the packet's TTL (hop
// limit).
func changesTTL(t *ir.Target) bool {
	return t.Kind == ir.TargetTTL || t.Kind == ir.TargetHL
}

// changesTOS reports whether target t changes the packet's TOS byte
// (IPv6: traffic class).
func changesTOS(t *ir.Target) bool {
	return t.Kind == ir.TargetTOS || t.Kind == ir.TargetDSCP
}

// reachesMarkChange reports whether chain c of table t, or a user chain it
// jumps or goes to, changes the packet's mark; seen holds the chains
// already looked at.
func reachesMarkChange(t *ir.Ruleset, c *ir.Chain, seen map[*ir.Chain]bool) bool {
	return reachesTarget(t, c, changesMark, seen)
}

// reachesTarget reports whether chain c of table t, or a user chain it
// jumps or goes to, has a rule whose target is one of (is) says; seen
// holds the chains already looked at.
func reachesTarget(t *ir.Ruleset, c *ir.Chain, is func(*ir.Target) bool, seen map[*ir.Chain]bool) bool {
	if seen[c] {
		return false
	}
	seen[c] = true
	for _, r := range c.Rules {
		if is(&r.Target) {
			return true
		}
		if !r.Target.Jumps() {
			continue
		}
		if next := t.Chain(r.Target.Chain); next != nil && reachesTarget(t, next, is, seen) {
			return true
		}
	}
	return false
}

// changesMark reports whether target t changes the packet's mark.
func changesMark(t *ir.Target) bool {
	switch t.Kind {
	case ir.TargetMark:
		return true
	case ir.TargetConnmark:
		return t.Connmark != nil && t.Connmark.Mode == ir.ConnmarkRestore
	}
	return false
}

// isReroutePoint reports whether segment tc of hook's walk is the last
// before the point where the kernel routes the packet again
// (reroutePoints), given next, the walk's segment after it (nil: none
// before filter's chain).
func isReroutePoint(hook int, tc tableChain, next *tableChain) bool {
	pt := reroutePoints[hook]
	if tc.chain != pt.chain || !slices.Contains(pt.tables, tc.table) {
		return false
	}
	return next == nil || next.chain != pt.chain || !slices.Contains(pt.tables, next.table)
}

// emitReroute emits, where the kernel routes hook's packet again, the
// entries that end the walk of a packet whose mark changed since its
// route was made: a probe (ProbeMarkMoved) and, for the packets it says
// true, an ActReroute entry. Layout.Reroute is the position after them,
// where the data plane resumes the walk once it routed the packet again
// (a DNAT walk of nat PREROUTING's, which routes with the mark itself,
// resumes there too). Other packets pass them by: one probe per walk.
// The probe says true for a TTL or TOS changed since too, as inputs says
// (Arg: RerouteTTL, RerouteTOS).
func (fl *flattener) emitReroute(hook int, inputs uint32) error {
	k, err := fl.probeIndex(Probe{Kind: ProbeMarkMoved, Arg: inputs})
	if err != nil {
		return err
	}
	first := uint32(len(fl.entries))
	past := &label{}
	fl.emit(Entry{Flags: EFProbe, Rule: NoRule, Action: ActContinue, Aux: k, nextLabel: past})
	fl.emit(Entry{Rule: NoRule, Action: ActReroute, Next: first + 2})
	past.pos, past.resolved = first+2, true
	if fl.natResume[hook] == first+1 {
		fl.natResume[hook] = past.pos + 1
	}
	fl.reroute[hook] = past.pos + 1
	return nil
}
