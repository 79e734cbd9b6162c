package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The connlimit match (xt_connlimit, nf_conncount) in the walk. Its answer
// depends on a count the packet changes (the kernel adds the packet's
// connection to the list of connections counted under its masked address),
// so it is a probe of kind ProbeConnlimit (probe.go). The probe's Arg packs
// everything the evaluator needs (ConnlimitArg): the match's index in the
// generation (its lists are its own, as the kernel gives every match
// instance its own tree), the limit, the mask and the flags. The data
// plane (bpf/connlimit.h) keeps, per match and masked address, the list of
// at most ConnlimitSlots connections counted, each checked against the
// connection tables when the list is counted, as nf_conncount does.

// ConnlimitSlots is XFW_CONNLIMIT_SLOTS: the connections one list (one
// match, one masked address) holds. A count is exact up to ConnlimitSlots
// + 1 (the stored live connections and the packet's own), so a limit up to
// ConnlimitSlots compares as the kernel does; larger limits are refused.
const ConnlimitSlots = 64

// MaxConnlimits bounds the connlimit matches of a generation (the index
// field of ConnlimitArg).
const MaxConnlimits = 1 << 8

// ConnlimitArg packs a connlimit probe's argument (struct xfw_probe .arg,
// decoded by bpf/connlimit.h): bits 0–7 the match's index, 8–15 the
// mask's prefix length, 16–23 the limit, bit 24 --connlimit-upto (count
// ≤ limit matches), bit 25 --connlimit-daddr.
func ConnlimitArg(index int, m *ir.ConnlimitMatch) uint32 {
	arg := uint32(index) | uint32(m.MaskBits)<<8 | m.Limit<<16
	if m.Upto {
		arg |= 1 << 24
	}
	if m.Daddr {
		arg |= 1 << 25
	}
	return arg
}

// connlimitIndex returns the index of match i (m) of rule r among the
// generation's connlimit matches, numbered in the order flattening meets
// them.
func (fl *flattener) connlimitIndex(r *ir.Rule, i int, m *ir.ConnlimitMatch) (int, error) {
	if m.Limit > ConnlimitSlots {
		return 0, fmt.Errorf("connlimit match: a limit above %d connections is not supported by xfw (--connlimit-%s %d)",
			ConnlimitSlots, map[bool]string{true: "upto", false: "above"}[m.Upto], m.Limit)
	}
	k, err := fl.connlimits.index(r, i, MaxConnlimits, "connlimit matches", func() struct{} { return struct{}{} })
	return int(k), err
}

// ctFullKeys is every FieldCt key: the condition a connlimit probe puts on
// FieldCt so that the generation tracks connections (the data plane
// tracks only while FieldCt is active), which the count needs.
var ctFullKeys = NewSet(Interval{U64(0), U64(ctDomain - 1)})

// probeNeedsCt reports whether probes of kind k read the packet's
// connection.
func probeNeedsCt(k ProbeKind) bool {
	return k == ProbeConnlimit || k == ProbeCtExpire || k == ProbeConnmark
}
