package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The owner match (xt_owner.c) in the walk: a probe (ProbeOwner) that
// answers from the facts the TC egress hook read of the packet's socket
// (bpf/owner.h: whether a full socket with a struct socket exists, whether
// it has a file, the file's credentials' fsuid and fsgid). Probe.Arg packs
// the options given (low byte, ir.Owner*) and those inverted (next byte),
// Val and Mask are the uid range, Wide the gid range (OwnerGIDRange).
// --suppl-groups (the process's supplementary groups) is refused: the
// walk has no bounded way to search them.

// OwnerInvertShift is the position of the inverted options in
// ProbeOwner's Arg.
const OwnerInvertShift = 8

// OwnerGIDRange packs a gid range into a probe's Wide: the first gid in
// the low 32 bits, the last in the high ones.
func OwnerGIDRange(lo, hi uint32) uint64 { return uint64(lo) | uint64(hi)<<32 }

// ownerProbe returns the probe of an owner match.
func ownerProbe(m *ir.OwnerMatch) (Probe, error) {
	if m.Match&ir.OwnerSupplGroups != 0 {
		return Probe{}, fmt.Errorf("owner match: --suppl-groups is not supported by xfw")
	}
	pr := Probe{Kind: ProbeOwner, Arg: uint32(m.Match) | uint32(m.Invert)<<OwnerInvertShift}
	if m.Match&ir.OwnerUID != 0 {
		pr.Val, pr.Mask = m.UIDMin, m.UIDMax
	}
	if m.Match&ir.OwnerGID != 0 {
		pr.Wide = OwnerGIDRange(m.GIDMin, m.GIDMax)
	}
	return pr, nil
}

// SocketOwner is what the data plane read of a packet's socket
// (the simulator's Packet.Owner).
type SocketOwner struct {
	// Socket: a full socket with a struct socket (skb_to_full_sk);
	// File: the socket has a file, whose credentials are UID and GID.
	Socket, File bool
	UID, GID     uint32
}

// OwnerAnswer is owner_mt for the facts o (the simulator's and the
// tests' reference).
func OwnerAnswer(pr Probe, o SocketOwner) bool {
	match := uint8(pr.Arg)
	inv := uint8(pr.Arg >> OwnerInvertShift)
	switch {
	case !o.Socket:
		return match^inv == 0
	case match&inv&ir.OwnerSocket != 0:
		return false
	case !o.File:
		return (match^inv)&(ir.OwnerUID|ir.OwnerGID) == 0
	}
	if match&ir.OwnerUID != 0 && (o.UID >= pr.Val && o.UID <= pr.Mask) == (inv&ir.OwnerUID != 0) {
		return false
	}
	lo, hi := uint32(pr.Wide), uint32(pr.Wide>>32)
	if match&ir.OwnerGID != 0 && (o.GID >= lo && o.GID <= hi) == (inv&ir.OwnerGID != 0) {
		return false
	}
	return true
}

// UsesOwner reports whether the generation has owner probes (the TC hook
// then reads the packet's socket).
func (g *Generation) UsesOwner() bool {
	for _, pr := range g.Probes {
		if pr.Kind == ProbeOwner {
			return true
		}
	}
	return false
}
