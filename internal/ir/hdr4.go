package ir

// Transport header matches of iptables beyond tcp and udp: -m sctp
// (xt_sctp), -m dccp (xt_dccp), -m esp (xt_esp) and IPv4's -m ah
// (ipt_ah). Their fields mirror the kernel's match structures, so a rule
// prints, saves and compares as iptables would.

// SCTP chunk match types (SCTP_CHUNK_MATCH_*).
const (
	SCTPChunkAny  = 0x01
	SCTPChunkAll  = 0x02
	SCTPChunkOnly = 0x04
)

// SCTPMaxFlags is XT_NUM_SCTP_FLAGS: chunk types with flag tests.
const SCTPMaxFlags = 4

// SCTPFlagInfo is struct xt_sctp_flag_info: chunks of type ChunkType must
// have flags&Mask == Flag. (libxt_sctp records a named chunk's place in
// its name table as ChunkType, which is the chunk type itself for DATA,
// ABORT and SHUTDOWN_COMPLETE, not for I_DATA.)
type SCTPFlagInfo struct {
	ChunkType, Flag, Mask uint8
}

// SCTPMatch is -m sctp: ports and chunk types.
type SCTPMatch struct {
	// SrcPort and DstPort are --sport and --dport (Set: the kernel's
	// XT_SCTP_SRC_PORTS / XT_SCTP_DEST_PORTS flag).
	SrcPort, DstPort PortMatch
	// HasChunks is --chunk-types (XT_SCTP_CHUNK_TYPES), InvChunks its "!".
	HasChunks, InvChunks bool
	// ChunkMatch is SCTPChunkAny, SCTPChunkAll or SCTPChunkOnly.
	ChunkMatch uint8
	// ChunkMap has bit t set for chunk type t.
	ChunkMap [8]uint32
	// Flags are the first NFlags flag tests.
	Flags  [SCTPMaxFlags]SCTPFlagInfo
	NFlags uint8
}

// ModuleName implements Match.
func (*SCTPMatch) ModuleName() string { return "sctp" }

// CloneMatch implements Match.
func (m *SCTPMatch) CloneMatch() Match { c := *m; return &c }

// HasChunk reports whether chunk type t is in the chunk map.
func (m *SCTPMatch) HasChunk(t uint8) bool { return m.ChunkMap[t/32]>>(t%32)&1 != 0 }

// DCCPMatch is -m dccp: ports, packet types and an option.
type DCCPMatch struct {
	SrcPort, DstPort PortMatch
	// HasTypes is --dccp-types: TypeMask has bit t for packet type t.
	HasTypes, InvTypes bool
	TypeMask           uint16
	// HasOption is --dccp-option Option.
	HasOption, InvOption bool
	Option               uint8
}

// ModuleName implements Match.
func (*DCCPMatch) ModuleName() string { return "dccp" }

// CloneMatch implements Match.
func (m *DCCPMatch) CloneMatch() Match { c := *m; return &c }

// ESPMatch is -m esp: the ESP header's SPI in an inclusive range (0 to
// 0xffffffff when not given).
type ESPMatch struct {
	SPIs    [2]uint32
	InvSPIs bool
}

// ModuleName implements Match.
func (*ESPMatch) ModuleName() string { return "esp" }

// CloneMatch implements Match.
func (m *ESPMatch) CloneMatch() Match { c := *m; return &c }

// AH4Match is -m ah in IPv4 (ipt_ah): the authentication header's SPI in
// an inclusive range.
type AH4Match struct {
	SPIs    [2]uint32
	InvSPIs bool
}

// ModuleName implements Match.
func (*AH4Match) ModuleName() string { return "ah" }

// CloneMatch implements Match.
func (m *AH4Match) CloneMatch() Match { c := *m; return &c }

// Match tags of these matches (codec.go), apart from the others'.
const (
	tagSCTP = iota + 100
	tagDCCP
	tagESP
	tagAH4
)

// hdr4 encodes one of these matches; false when m is none.
func (e *encoder) hdr4(m Match) bool {
	switch m := m.(type) {
	case *SCTPMatch:
		e.u8(tagSCTP)
		e.port(m.SrcPort)
		e.port(m.DstPort)
		e.flags(m.HasChunks, m.InvChunks)
		e.u8(m.ChunkMatch)
		for _, w := range m.ChunkMap {
			e.uv(uint64(w))
		}
		e.u8(m.NFlags)
		for _, f := range m.Flags {
			e.u8(f.ChunkType)
			e.u8(f.Flag)
			e.u8(f.Mask)
		}
	case *DCCPMatch:
		e.u8(tagDCCP)
		e.port(m.SrcPort)
		e.port(m.DstPort)
		e.flags(m.HasTypes, m.InvTypes, m.HasOption, m.InvOption)
		e.u16(m.TypeMask)
		e.u8(m.Option)
	case *ESPMatch:
		e.u8(tagESP)
		e.spis(m.SPIs, m.InvSPIs)
	case *AH4Match:
		e.u8(tagAH4)
		e.spis(m.SPIs, m.InvSPIs)
	default:
		return false
	}
	return true
}

// spis encodes an SPI range.
func (e *encoder) spis(r [2]uint32, inv bool) {
	e.flags(inv)
	e.uv(uint64(r[0]))
	e.uv(uint64(r[1]))
}

// spis decodes an SPI range.
func (d *decoder) spis(r *[2]uint32, inv *bool) {
	d.flags(inv)
	r[0], r[1] = d.u32(), d.u32()
}

// hdr4 decodes the match of tag; nil when the tag is none of these.
func (d *decoder) hdr4(tag uint8) Match {
	switch tag {
	case tagSCTP:
		m := &SCTPMatch{}
		d.port(&m.SrcPort)
		d.port(&m.DstPort)
		d.flags(&m.HasChunks, &m.InvChunks)
		m.ChunkMatch = d.u8()
		for i := range m.ChunkMap {
			m.ChunkMap[i] = d.u32()
		}
		m.NFlags = d.u8()
		for i := range m.Flags {
			m.Flags[i] = SCTPFlagInfo{ChunkType: d.u8(), Flag: d.u8(), Mask: d.u8()}
		}
		return m
	case tagDCCP:
		m := &DCCPMatch{}
		d.port(&m.SrcPort)
		d.port(&m.DstPort)
		d.flags(&m.HasTypes, &m.InvTypes, &m.HasOption, &m.InvOption)
		m.TypeMask = d.u16()
		m.Option = d.u8()
		return m
	case tagESP:
		m := &ESPMatch{}
		d.spis(&m.SPIs, &m.InvSPIs)
		return m
	case tagAH4:
		m := &AH4Match{}
		d.spis(&m.SPIs, &m.InvSPIs)
		return m
	}
	return nil
}
