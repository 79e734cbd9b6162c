package iptables

import (
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
	netnsinfo "github.com/xfw-dev/xfw/internal/netns"
)

// The owner match (libxt_owner revision 1, xt_owner.c): options, checks
// and printing as iptables 1.8.9. The kernel allows it in the OUTPUT and
// POSTROUTING hooks only (checkEntry).

// Owner option ids (libxt_owner's enum).
const (
	ownerOptUser = iota
	ownerOptGroup
	ownerOptSocketExists
	ownerOptSupplGroups = 6 // after the revision 0 options xfw does not have
)

// ownerMaxID is the largest uid or gid a range may name: -1 is
// the kernel's invalid id.
const ownerMaxID = math.MaxUint32 - 1

// ownerExt is the owner match module.
var ownerExt = registerMatch(&extension{
	name: "owner",
	x6: []x6opt{
		{name: "uid-owner", id: ownerOptUser, typ: xtString, flags: xtInvert},
		{name: "gid-owner", id: ownerOptGroup, typ: xtString, flags: xtInvert},
		{name: "socket-exists", id: ownerOptSocketExists, typ: xtNone, flags: xtInvert},
		{name: "suppl-groups", id: ownerOptSupplGroups, typ: xtNone},
	},
	newMatch: func(*parseCtx) matchState { return &ownerState{} },
})

// ownerState is one owner match being parsed.
type ownerState struct {
	m     ir.OwnerMatch
	flags x6flags
}

// ownerBadValue is XTF_BAD_VALUE's message for an option's value.
func ownerBadValue(opt, arg string) *failure {
	return paramErr("owner: Bad value for \"%s\" option: \"%s\"", opt, arg)
}

// parseOwnerRange is owner_parse_range: N, N-M or N:M, each 0 to 2^32-2.
func parseOwnerRange(opt, arg string) (lo, hi uint32, f *failure) {
	v, end, ok := xtStrtouiPrefix(arg, 0, ownerMaxID)
	if !ok {
		return 0, 0, ownerBadValue(opt, arg)
	}
	w := v
	if end < len(arg) && (arg[end] == '-' || arg[end] == ':') {
		var n int
		if w, n, ok = xtStrtouiPrefix(arg[end+1:], 0, ownerMaxID); !ok {
			return 0, 0, ownerBadValue(opt, arg)
		}
		end += 1 + n
	}
	if end != len(arg) {
		return 0, 0, ownerBadValue(opt, arg)
	}
	return uint32(v), uint32(w), nil
}

// ownerID resolves a user (group when group) name as getpwnam (getgrnam)
// does, else parses a range.
func ownerID(opt, arg string, group bool) (lo, hi uint32, f *failure) {
	var id string
	if group {
		if g, err := user.LookupGroup(arg); err == nil {
			id = g.Gid
		}
	} else if u, err := user.Lookup(arg); err == nil {
		id = u.Uid
	}
	if n, err := strconv.ParseUint(id, 10, 32); id != "" && err == nil {
		return uint32(n), uint32(n), nil
	}
	return parseOwnerRange(opt, arg)
}

// parse implements matchState (owner_mt_parse).
func (s *ownerState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(ownerExt, o.id, invert); f != nil {
		return f
	}
	var bit uint8
	switch o.id {
	case ownerOptUser, ownerOptGroup:
		group := o.id == ownerOptGroup
		lo, hi, f := ownerID("--"+o.name, arg, group)
		if f != nil {
			return f
		}
		if group {
			s.m.GIDMin, s.m.GIDMax, bit = lo, hi, ir.OwnerGID
		} else {
			s.m.UIDMin, s.m.UIDMax, bit = lo, hi, ir.OwnerUID
		}
	case ownerOptSocketExists:
		bit = ir.OwnerSocket
	case ownerOptSupplGroups:
		if s.m.Match&ir.OwnerGID == 0 {
			return ownerBadValue("--suppl-groups", "you need to use --gid-owner first")
		}
		bit = ir.OwnerSupplGroups
	}
	s.m.Match |= bit
	if invert {
		s.m.Invert |= bit
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState (owner_mt_check).
func (s *ownerState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("owner: At least one of --uid-owner, --gid-owner or --socket-exists is required")
	}
	return s.flags.fcheck(ownerExt)
}

// build implements matchState.
func (s *ownerState) build() ir.Match { m := s.m; return &m }

// ownerItem is owner_mt_print_item: one option, its label and value;
// names for single ids unless numeric.
func ownerItem(b *strings.Builder, m *ir.OwnerMatch, label string, bit uint8, numeric bool) {
	if m.Match&bit == 0 {
		return
	}
	if m.Invert&bit != 0 {
		b.WriteString(" !")
	}
	b.WriteString(" " + label)
	lo, hi := m.UIDMin, m.UIDMax
	if bit == ir.OwnerGID {
		lo, hi = m.GIDMin, m.GIDMax
	}
	switch {
	case bit != ir.OwnerUID && bit != ir.OwnerGID:
	case lo != hi:
		fmt.Fprintf(b, " %d-%d", lo, hi)
	case !numeric && ownerName(lo, bit == ir.OwnerGID) != "":
		b.WriteString(" " + ownerName(lo, bit == ir.OwnerGID))
	default:
		fmt.Fprintf(b, " %d", lo)
	}
}

// ownerName is getpwuid's (getgrgid's) name of id, empty for none.
func ownerName(id uint32, group bool) string {
	s := strconv.FormatUint(uint64(id), 10)
	if group {
		if g, err := user.LookupGroupId(s); err == nil {
			return g.Name
		}
		return ""
	}
	if u, err := user.LookupId(s); err == nil {
		return u.Username
	}
	return ""
}

// writeOwner prints the owner match as iptables-save does (owner_mt_save).
func writeOwner(b *strings.Builder, m *ir.OwnerMatch) {
	ownerItem(b, m, "--socket-exists", ir.OwnerSocket, true)
	ownerItem(b, m, "--uid-owner", ir.OwnerUID, true)
	ownerItem(b, m, "--gid-owner", ir.OwnerGID, true)
	ownerItem(b, m, "--suppl-groups", ir.OwnerSupplGroups, true)
}

// ownerListing is the owner match as iptables -L prints it
// (owner_mt_print).
func ownerListing(m *ir.OwnerMatch, numeric bool) string {
	var b strings.Builder
	ownerItem(&b, m, "owner socket exists", ir.OwnerSocket, numeric)
	ownerItem(&b, m, "owner UID match", ir.OwnerUID, numeric)
	ownerItem(&b, m, "owner GID match", ir.OwnerGID, numeric)
	ownerItem(&b, m, "incl. suppl. groups", ir.OwnerSupplGroups, numeric)
	return b.String()
}

// ownerHooks are the hooks the owner match may be used from.
const ownerHooks = hookLocalOut | hookPostRouting

// ownerUserNSOK says whether the writer's user namespace owns the
// network namespace (netns.InOwningUserNS), which owner_check requires of
// a rule with --uid-owner or --gid-owner: their ids are the writer's,
// mapped through the namespace's user namespace. A failed check refuses.
// A variable: tests replace it.
var ownerUserNSOK = func() bool {
	ok, err := netnsinfo.InOwningUserNS()
	return err == nil && ok
}

// ownerOK is owner_mt_check and the match's hook mask: ranges in order,
// --uid-owner and --gid-owner from a writer of the network namespace's
// user namespace, reached from OUTPUT and POSTROUTING only.
func ownerOK(m *ir.OwnerMatch, hooks hookMask) bool {
	if m.Match&(ir.OwnerUID|ir.OwnerGID) != 0 && !ownerUserNSOK() {
		return false
	}
	if m.Match&ir.OwnerUID != 0 && m.UIDMin > m.UIDMax {
		return false
	}
	if m.Match&ir.OwnerGID != 0 && m.GIDMin > m.GIDMax {
		return false
	}
	return hooks&^ownerHooks == 0
}
