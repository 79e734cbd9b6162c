package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// LogEvent is one LOG event of the data plane (struct xfw_log_event),
// decoded from a record of the ring buffer returned by LogRing.
type LogEvent struct {
	// InIfindex is the input interface (the VLAN device for tagged
	// frames); 0 on OUTPUT.
	InIfindex uint32
	// OutIfindex is the output interface; 0 on INPUT.
	OutIfindex uint32
	// Rule is the counter index of the LOG rule.
	Rule uint32
	// Family is ir.IPv4 or ir.IPv6.
	Family ir.Family
	// Chain is the built-in chain the packet traversed: ir.ChainInput,
	// ir.ChainForward or ir.ChainOutput.
	Chain string
	// Level is the syslog level of the rule (--log-level, 0-7).
	Level uint8
	// Flags are the rule's ir.LogFlag* bits.
	Flags uint8
	// Prefix is the rule's --log-prefix.
	Prefix string
	// HasMAC is true when Frame starts with the link-layer header the
	// packet was received with (INPUT and FORWARD); on OUTPUT the header
	// is the one the packet is about to be sent with, which the kernel
	// does not log.
	HasMAC bool
	// L3Off is the offset of the IP header in Frame (after the Ethernet
	// header and a VLAN tag, if any).
	L3Off int
	// FrameLen is the length of the whole frame, of which Frame holds the
	// first bytes.
	FrameLen int
	// Frame holds the first bytes of the frame, from its Ethernet header
	// on (at most logSnap bytes, and for NFLOG as many as it passes on, up
	// to XFW_NFLOG_SNAP_MAX).
	Frame []byte
	// NFLogGroup and NFLogLen are an NFLOG rule's group and copy length
	// (compiler.NFLogWhole: no --nflog-size), when Flags has
	// ir.LogFlagNFLog.
	NFLogGroup uint16
	NFLogLen   uint32
	// Mark is the packet's mark when the walk met the rule (the LOG
	// line's MARK= field, printed when not 0).
	Mark uint32
	// HasUID says UID and GID hold the fsuid and fsgid of the packet's
	// socket's file (a packet the host sends, --log-uid).
	HasUID   bool
	UID, GID uint32
	// PhysIn and PhysOut are the bridge ports br_netfilter records for
	// the packet (PHYSIN= PHYSOUT=): a port's ifindex, 0 for none. PhysIn
	// is 0 also for a port the data plane could not name
	// (compiler.PhysAnyPort), whose PHYSIN= is left out.
	PhysIn, PhysOut uint32
}

// physPort returns a physdev field's port, 0 for a sentinel (no bridge
// information, no port, a port not named).
func physPort(v uint32) uint32 {
	if v == compiler.PhysNull || v == compiler.PhysAnyPort {
		return 0
	}
	return v
}

// logChains maps enum xfw_chain to the chain names.
var logChains = [...]string{ir.ChainInput, ir.ChainForward, ir.ChainOutput}

// DecodeLogEvent decodes a raw ring buffer record (struct xfw_log_event).
func DecodeLogEvent(raw []byte) (LogEvent, error) {
	var ev bpfLogEvent
	if len(raw) < binary.Size(ev) {
		return LogEvent{}, fmt.Errorf("decode LOG event: %d bytes, want %d", len(raw), binary.Size(ev))
	}
	if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &ev); err != nil {
		return LogEvent{}, fmt.Errorf("decode LOG event: %w", err)
	}
	fam := ir.Family(ev.Family)
	if fam != ir.IPv4 && fam != ir.IPv6 {
		return LogEvent{}, fmt.Errorf("decode LOG event: unknown family %d", ev.Family)
	}
	if int(ev.Chain) >= len(logChains) {
		return LogEvent{}, fmt.Errorf("decode LOG event: unknown chain %d", ev.Chain)
	}
	// An NFLOG event passing more than logSnap bytes is a longer record:
	// the frame goes on past Pkt to the record's end.
	pktOff := binary.Size(ev) - logSnap
	held := ev.Pkt[:]
	if len(raw) > pktOff+logSnap {
		held = raw[pktOff:]
	}
	snap := min(int(ev.SnapLen), len(held))
	prefix := ev.Prefix[:]
	if i := bytes.IndexByte(prefix, 0); i >= 0 {
		prefix = prefix[:i]
	}
	frame := append([]byte(nil), held[:snap]...)
	applyLogView(frame, int(ev.L3Off), fam, ev.View)
	return LogEvent{
		InIfindex:  ev.InIfindex,
		OutIfindex: ev.OutIfindex,
		Rule:       ev.Rule,
		Family:     fam,
		Chain:      logChains[ev.Chain],
		Level:      ev.Level,
		Flags:      ev.Flags,
		Prefix:     string(prefix),
		HasMAC:     ev.HasMAC != 0,
		L3Off:      int(ev.L3Off),
		FrameLen:   int(ev.PktLen),
		Frame:      frame,
		NFLogGroup: ev.NFLogGroup,
		NFLogLen:   ev.NFLogLen,
		Mark:       ev.Mark,
		HasUID:     ev.HasUID != 0,
		UID:        ev.UID,
		GID:        ev.GID,
		PhysIn:     physPort(ev.PhysIn),
		PhysOut:    physPort(ev.PhysOut),
	}, nil
}

// The bits of struct xfw_log_event .view (bpf/common.h XFW_LOGV_*).
const (
	logViewSet   = 0x80000000
	logViewGrown = 0x40000000
	logViewTTL   = 0x20000000
	logViewTOS   = 0x10000000
	logViewFwd   = 0x08000000
	// logViewGrowth is the bytes of the MSS option TCPMSS adds.
	logViewGrowth = 4
)

// applyLogView writes into frame (its IP header at l3) what the rewrites
// before the LOG rule changed, as view (XFW_LOGV_*) says: the TOS byte
// (IPv6: traffic class), the TTL (hop limit; in FORWARD's walk the
// walk's value is one below the wire's, which the line's formatting takes
// off again) and the length of an added MSS option, the IPv4 header
// checksum made right again. The event's frame is the packet as it came;
// the kernel's LOG prints it as the rules before it left it.
func applyLogView(frame []byte, l3 int, fam ir.Family, view uint32) {
	if view&logViewSet == 0 || l3 < 0 {
		return
	}
	ttl, tos := uint8(view), uint8(view>>8)
	if view&logViewFwd != 0 && ttl < 255 {
		ttl++
	}
	switch fam {
	case ir.IPv4:
		if len(frame) < l3+20 {
			return
		}
		h := frame[l3:]
		if view&logViewTOS != 0 {
			h[1] = tos
		}
		if view&logViewTTL != 0 {
			h[8] = ttl
		}
		if view&logViewGrown != 0 {
			binary.BigEndian.PutUint16(h[2:], binary.BigEndian.Uint16(h[2:])+logViewGrowth)
		}
		ihl := int(h[0]&0xf) * 4
		if ihl >= 20 && len(h) >= ihl {
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], ipv4HeaderChecksum(h[:ihl]))
		}
	case ir.IPv6:
		if len(frame) < l3+40 {
			return
		}
		h := frame[l3:]
		if view&logViewTOS != 0 {
			h[0] = h[0]&0xf0 | tos>>4
			h[1] = h[1]&0x0f | tos<<4
		}
		if view&logViewTTL != 0 {
			h[7] = ttl
		}
		if view&logViewGrown != 0 {
			binary.BigEndian.PutUint16(h[4:], binary.BigEndian.Uint16(h[4:])+logViewGrowth)
		}
	}
}

// ipv4HeaderChecksum is the Internet checksum of an IPv4 header whose
// checksum field is 0.
func ipv4HeaderChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
