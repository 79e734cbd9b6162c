package ir

import "errors"

// The packet-rewriting targets of the mangle table (TCPMSS, DSCP, TOS,
// TTL, HL) and the raw table's notrack targets (CT --notrack, NOTRACK),
// with what the kernel's structures keep of them.

// TCPMSSClampPMTU is xt_tcpmss_info's mss for --clamp-mss-to-pmtu
// (XT_TCPMSS_CLAMP_PMTU).
const TCPMSSClampPMTU = 0xffff

// TTLMode is the TTL and HL targets' mode (IPT_TTL_SET ..., IP6T_HL_SET
// ...: the same numbers).
type TTLMode uint8

// The TTL and HL targets' modes, as the kernel numbers them.
const (
	TTLSet TTLMode = iota
	TTLInc
	TTLDec
)

// MangleTarget holds the options of TCPMSS, DSCP, TOS, TTL and HL (the
// notrack targets have none).
type MangleTarget struct {
	// MSS is TCPMSS's xt_tcpmss_info.mss: --set-mss N, or
	// TCPMSSClampPMTU.
	MSS uint16
	// Value is DSCP's code point (0-63), TOS's tos_value, the TTL or HL
	// target's value.
	Value uint8
	// Mask is TOS's tos_mask: the new byte is (tos & ^Mask) ^ Value.
	Mask uint8
	// Mode is the TTL or HL target's mode.
	Mode TTLMode
}

// IsMangleTarget reports whether k is one of the packet-rewriting or
// notrack targets (options, if any, in Target.Mangle).
func IsMangleTarget(k TargetKind) bool {
	switch k {
	case TargetTCPMSS, TargetDSCP, TargetTOS, TargetTTL, TargetHL, TargetCTNotrack, TargetNotrack:
		return true
	}
	return false
}

// mangleTarget encodes the options of a packet-rewriting target.
func (e *encoder) mangleTarget(t *MangleTarget) {
	if t == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.uv(uint64(t.MSS))
	e.u8(t.Value)
	e.u8(t.Mask)
	e.u8(uint8(t.Mode))
}

// mangleTarget decodes what encoder.mangleTarget wrote.
func (d *decoder) mangleTarget() *MangleTarget {
	if d.u8() == 0 {
		return nil
	}
	t := &MangleTarget{}
	mss := d.uv()
	if mss > 0xffff {
		d.fail(errMangleMSS)
	}
	t.MSS = uint16(mss)
	t.Value = d.u8()
	t.Mask = d.u8()
	t.Mode = TTLMode(d.u8())
	return t
}

// errMangleMSS is the decoding error of an MSS beyond 16 bits.
var errMangleMSS = errors.New("TCPMSS value out of range")
