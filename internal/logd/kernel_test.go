package logd

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// kernelLinesFile holds frames and the lines the kernel's LOG target
// printed for them, captured by TestFormatMatchesKernel -update.
var kernelLinesFile = filepath.Join("testdata", "kernel_lines.json")

var update = flag.Bool("update", false, "rewrite "+kernelLinesFile+" from the live kernel (TestFormatMatchesKernel)")

// kernelLine is one frame and the LOG line the kernel printed for it.
type kernelLine struct {
	Name   string `json:"name"`
	Family uint8  `json:"family"`
	Chain  string `json:"chain"`
	// InIndex and OutIndex are the interface indexes of the event (1 is
	// the loopback device), In and Out their names.
	InIndex  uint32 `json:"in_index,omitempty"`
	In       string `json:"in,omitempty"`
	OutIndex uint32 `json:"out_index,omitempty"`
	Out      string `json:"out,omitempty"`
	Flags    uint8  `json:"flags"`
	Prefix   string `json:"prefix"`
	HasMAC   bool   `json:"has_mac"`
	L3Off    int    `json:"l3_off"`
	// Frame is the whole frame in hex; the event carries its first
	// snapLen bytes.
	Frame string `json:"frame"`
	// Line is the kernel's line (dmesg text, without the level).
	Line string `json:"line"`
	// SpecDst is the address the kernel recorded in the IPv4 options of a
	// forwarded packet (the routing table's answer), if any.
	SpecDst string `json:"spec_dst,omitempty"`
	// NowMs is the kernel's clock in the IPv4 timestamp option it filled
	// (milliseconds since midnight UTC), if any.
	NowMs *uint32 `json:"now_ms,omitempty"`
}

// fixedHost answers the kernel's lookups with recorded values.
type fixedHost struct {
	spec netip.Addr
	at   time.Time
}

func (h fixedHost) specDst(netip.Addr) (netip.Addr, bool) { return h.spec, h.spec.IsValid() }
func (h fixedHost) isLocal(netip.Addr) bool               { return false }
func (h fixedHost) now() time.Time                        { return h.at }

// atMs returns today's midnight UTC plus ms milliseconds.
func atMs(ms uint32) time.Time {
	y, m, d := time.Now().UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

// host returns the recorded answers of the case.
func (k kernelLine) host() (fixedHost, error) {
	var h fixedHost
	if k.SpecDst != "" {
		a, err := netip.ParseAddr(k.SpecDst)
		if err != nil {
			return h, fmt.Errorf("case %s: spec_dst: %w", k.Name, err)
		}
		h.spec = a
	}
	if k.NowMs != nil {
		h.at = atMs(*k.NowMs)
	}
	return h, nil
}

// snapLen is XFW_LOG_SNAP: the bytes of a frame a LOG event carries.
const snapLen = 256

// event returns the LOG event the data plane would send for the frame.
func (k kernelLine) event() (Event, error) {
	frame, err := hex.DecodeString(k.Frame)
	if err != nil {
		return Event{}, fmt.Errorf("case %s: frame: %w", k.Name, err)
	}
	return Event{
		InIfindex:  k.InIndex,
		OutIfindex: k.OutIndex,
		Family:     ir.Family(k.Family),
		Chain:      k.Chain,
		Level:      defaultLevel,
		Flags:      k.Flags,
		Prefix:     k.Prefix,
		HasMAC:     k.HasMAC,
		L3Off:      k.L3Off,
		FrameLen:   len(frame),
		Frame:      frame[:min(len(frame), snapLen)],
	}, nil
}

// defaultLevel is the LOG target's default level (warning).
const defaultLevel = 4

// names returns the ifName function of the case.
func (k kernelLine) names() func(uint32) string {
	return func(i uint32) string {
		switch i {
		case k.InIndex:
			return k.In
		case k.OutIndex:
			return k.Out
		}
		return fmt.Sprintf("unknown%d", i)
	}
}

// loadKernelLines reads kernelLinesFile.
func loadKernelLines(t *testing.T) []kernelLine {
	t.Helper()
	b, err := os.ReadFile(kernelLinesFile)
	if err != nil {
		t.Fatalf("read %s: %v", kernelLinesFile, err)
	}
	var cases []kernelLine
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("decode %s: %v", kernelLinesFile, err)
	}
	return cases
}

// TestFormatKernelLines formats every captured frame and compares the
// result with the line the kernel printed for it.
func TestFormatKernelLines(t *testing.T) {
	cases := loadKernelLines(t)
	if len(cases) == 0 {
		t.Fatalf("%s holds no cases", kernelLinesFile)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ev, err := c.event()
			if err != nil {
				t.Fatal(err)
			}
			h, err := c.host()
			if err != nil {
				t.Fatal(err)
			}
			if got := formatEvent(ev, c.names(), h); got != c.Line {
				t.Errorf("Format mismatch\n got: %q\nwant: %q", got, c.Line)
			}
		})
	}
}
