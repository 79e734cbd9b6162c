package logd

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// pcap file format (the classic one tcpdump -r reads): a global header,
// then each packet's record header and bytes, little-endian.
const (
	pcapMagic        = 0xa1b2c3d4
	pcapVersionMajor = 2
	pcapVersionMinor = 4
	// pcapSnapLen is the header's snapshot length: the largest IP packet.
	pcapSnapLen = 65535
	// pcapLinkRaw is LINKTYPE_RAW: records start with the IP header.
	pcapLinkRaw = 101
)

// pcapWriter writes a pcap stream.
type pcapWriter struct {
	w io.Writer
}

// newPcapWriter writes the global header to w.
func newPcapWriter(w io.Writer) (*pcapWriter, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagic)
	binary.LittleEndian.PutUint16(h[4:], pcapVersionMajor)
	binary.LittleEndian.PutUint16(h[6:], pcapVersionMinor)
	// thiszone (8) and sigfigs (12) stay 0.
	binary.LittleEndian.PutUint32(h[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(h[20:], pcapLinkRaw)
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return &pcapWriter{w: w}, nil
}

// packet writes one record: the captured bytes of a packet of length
// bytes, seen at t.
func (p *pcapWriter) packet(t time.Time, data []byte, length int) error {
	const usecPerSec = 1000000
	rec := make([]byte, 16+len(data))
	us := t.UnixMicro()
	binary.LittleEndian.PutUint32(rec[0:], uint32(us/usecPerSec))
	binary.LittleEndian.PutUint32(rec[4:], uint32(us%usecPerSec))
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(rec[12:], uint32(max(length, len(data))))
	copy(rec[16:], data)
	if _, err := p.w.Write(rec); err != nil {
		return fmt.Errorf("write pcap record: %w", err)
	}
	return nil
}
