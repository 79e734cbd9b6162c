package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// DNAT and REDIRECT in nat OUTPUT: the host's own packets.
//
// The kernel translates them after the local route lookup, before filter
// OUTPUT, and routes them again. A packet to one of the host's own
// addresses (Docker's `-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type
// LOCAL -j DOCKER`, whose DOCKER chain DNATs a published port to a
// container) leaves through the loopback device, where TC egress can
// neither reroute it to another device nor see the reply come back
// through a translation of its source before the socket does. xfw takes
// such a DNAT when every packet reaching it is addressed to the host
// itself (the entry's condition holds only for a LOCAL destination, the
// addrtype fact) and leaves those packets untranslated: the nat OUTPUT
// chain ends there, as it does after a translation, and the packet goes
// on to filter OUTPUT with its original destination, to the socket
// listening on the host's port. Docker's userland proxy (docker-proxy, on
// by default) listens on every published port and forwards to the
// container, so the host still reaches it (docs/differences.md: the
// container sees the bridge's address as the source; with
// --userland-proxy=false nothing answers on the host port). A DNAT in nat
// OUTPUT that may see another destination is refused.

// rtnLocal is RTN_LOCAL, the route type of the host's own addresses.
const rtnLocal = 2

// addrTypeValues is the number of FieldAddrType values: two addresses'
// facts of AddrTypeBits each.
const addrTypeValues = 1 << (2 * AddrTypeBits)

// natOutputEntry makes entry e of a DNAT or REDIRECT (target name) in nat
// OUTPUT end the nat OUTPUT segment without a translation, when its
// condition holds only for packets to the host's own addresses; it refuses
// the rule otherwise.
func (fl *flattener) natOutputEntry(e *Entry, name string) error {
	if fl.rs.Family != ir.IPv4 {
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet", name)
	}
	if !onlyLocalDestination(e.Cond) {
		return fmt.Errorf("target %s in nat OUTPUT is not supported by xfw's data plane except for packets to the host's own addresses (-m addrtype --dst-type LOCAL)", name)
	}
	e.Action, e.nextLabel = ActContinue, fl.acceptTo
	return nil
}

// onlyLocalDestination reports whether every packet matching c has a
// destination of the host's own (route type LOCAL; IPv4 only: the caller
// refuses IPv6 NAT before).
func onlyLocalDestination(c Cond) bool {
	s := c[FieldAddrType]
	if s == nil {
		return false
	}
	any := false
	for v := uint64(0); v < addrTypeValues; v++ {
		if !s.Contains(U64(v)) {
			continue
		}
		any = true
		if (v>>AddrTypeDstShift)&AddrTypeRTN != rtnLocal {
			return false
		}
	}
	return any
}
