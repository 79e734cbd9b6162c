package ir

import "errors"

// NFLogOptions are the options of the NFLOG target (struct xt_nflog_info).
type NFLogOptions struct {
	// Group is --nflog-group (0 when not given; iptables omits it then).
	Group uint16
	// Prefix is --nflog-prefix (at most 63 bytes).
	Prefix string
	// Len is --nflog-size or --nflog-range: bytes of the packet to copy.
	Len uint32
	// Size records XT_NFLOG_F_COPY_LEN: Len came from --nflog-size. The
	// kernel ignores a length given with --nflog-range.
	Size bool
	// Threshold is --nflog-threshold (0 when not given).
	Threshold uint16
}

// nflogTarget writes a target's NFLOG options: a presence byte, then the
// fields.
func (e *encoder) nflogTarget(o *NFLogOptions) {
	if o == nil {
		e.u8(0)
		return
	}
	e.u8(1 | packBools(false, o.Size)) // bit 0: present
	e.uv(uint64(o.Group))
	e.str(o.Prefix)
	e.uv(uint64(o.Len))
	e.uv(uint64(o.Threshold))
}

// nflogTarget decodes what encoder.nflogTarget wrote.
func (d *decoder) nflogTarget() *NFLogOptions {
	const presentSize = 2 // the Size bit beside the presence bit
	f := d.u8()
	if f&1 == 0 {
		return nil
	}
	o := &NFLogOptions{Size: f&presentSize != 0}
	o.Group = d.u16v()
	o.Prefix = d.str()
	o.Len = d.u32()
	o.Threshold = d.u16v()
	return o
}

// u16v reads a uvarint that must fit 16 bits.
func (d *decoder) u16v() uint16 {
	v := d.uv()
	if v > 0xffff {
		d.fail(errNFLogValue)
	}
	return uint16(v)
}

// errNFLogValue is the decoding error of an NFLOG group or threshold
// beyond 16 bits.
var errNFLogValue = errors.New("NFLOG value out of range")

// LogFlagNFLog marks the data plane's LOG options of an NFLOG rule (the
// kernel's XT_LOG_NFLOG bit, which the LOG target never sets).
const LogFlagNFLog uint8 = 0x10
