package dataplane

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The predicates (string, u32, time; compiler/pred.go, bpf/pred.h): each
// a struct xfw_pred in the generation's xfw_o_pred.

// bpfU32Test mirrors struct xfw_u32_test.
type bpfU32Test struct {
	Num, Min, Max  [ir.U32MaxSize]uint32
	Op             [ir.U32MaxSize]uint8
	NNums, NValues uint8
}

// bpfPred mirrors struct xfw_pred.
type bpfPred struct {
	Kind, Flags               uint32
	From, To                  uint32
	N                         uint32
	DateStart, DateStop       uint32
	DaytimeStart, DaytimeStop uint32
	Monthdays, Weekdays       uint32
	TZWest                    int32
	TAIOff                    int64
	Pattern                   [ir.StringMaxPattern]uint8
	Shift                     [256]uint8
	Fold                      [256]uint8
	Tests                     [u32TestSlots]bpfU32Test
}

// u32TestSlots is XFW_U32_SLOTS: struct xfw_pred's test slots (the
// first ir.U32MaxSize used).
const u32TestSlots = 16

// XFW_PREDF_* flags of bpfPred.Flags.
const (
	predInvert     = 1
	predICase      = 2
	predContiguous = 4
	predKernelTZ   = 8
)

// pktBytesMap is the per-CPU packet bytes of the predicates; it holds two
// elements (XDP, TC) per possible CPU.
const pktBytesMap = "xfw_pktbytes"

// sizePktBytes sizes the predicates' packet buffers to the possible CPUs
// (the online ones if the possible ones cannot be read).
func sizePktBytes(spec *ebpf.CollectionSpec) {
	m := spec.Maps[pktBytesMap]
	if m == nil {
		return
	}
	n, err := ebpf.PossibleCPU()
	if err != nil {
		n = runtime.NumCPU()
	}
	const hooks = 2 // XFW_SCRATCH_XDP, XFW_SCRATCH_TC
	m.MaxEntries = uint32(n * hooks)
}

// kernelToUpper is the kernel's toupper (lib/ctype.c): ASCII and Latin-1
// lower case letters (0xdf and 0xff among them, not 0xf7) lose 0x20.
func kernelToUpper(c byte) byte {
	if (c >= 'a' && c <= 'z') || (c >= 0xdf && c != 0xf7) {
		return c - 0x20
	}
	return c
}

// stringPred renders a string match: the pattern (folded under --icase)
// and the Horspool shift of each raw text byte.
func stringPred(m *ir.StringMatch) bpfPred {
	p := bpfPred{Kind: uint32(compiler.PredString), From: uint32(m.From), To: uint32(m.To), N: uint32(len(m.Pattern))}
	if m.Invert {
		p.Flags |= predInvert
	}
	fold := func(c byte) byte { return c }
	if m.ICase {
		p.Flags |= predICase
		fold = kernelToUpper
	}
	n := len(m.Pattern)
	var shift [256]int
	for i := range shift {
		shift[i] = n
	}
	for i, c := range m.Pattern {
		p.Pattern[i] = fold(c)
		if i < n-1 {
			shift[fold(c)] = n - 1 - i
		}
	}
	for t := range p.Shift {
		p.Shift[t] = uint8(shift[fold(byte(t))])
		p.Fold[t] = fold(byte(t))
	}
	return p
}

// u32Pred renders a u32 match.
func u32Pred(m *ir.U32Match) bpfPred {
	p := bpfPred{Kind: uint32(compiler.PredU32), N: uint32(len(m.Tests))}
	if m.Invert {
		p.Flags |= predInvert
	}
	for i, t := range m.Tests {
		bt := &p.Tests[i]
		bt.NNums, bt.NValues = uint8(len(t.Loc)), uint8(len(t.Values))
		for j, l := range t.Loc {
			bt.Op[j], bt.Num[j] = uint8(l.Op), l.Num
		}
		for j, v := range t.Values {
			bt.Min[j], bt.Max[j] = v.Min, v.Max
		}
	}
	return p
}

// wallClock is what the time predicates need of the host's clocks: the
// TAI offset in nanoseconds (CLOCK_TAI - CLOCK_REALTIME; the data plane
// reads CLOCK_TAI) and the kernel's timezone in seconds west of UTC.
type wallClock struct {
	taiOff int64
	tzWest int32
}

// readWallClock reads the TAI offset and the kernel's timezone (sys_tz,
// which gettimeofday(2) returns and xt_time's --kerneltz uses).
func readWallClock() (wallClock, error) {
	var tai, real unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &tai); err != nil {
		return wallClock{}, fmt.Errorf("read CLOCK_TAI: %w", err)
	}
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &real); err != nil {
		return wallClock{}, fmt.Errorf("read CLOCK_REALTIME: %w", err)
	}
	// The offset is whole seconds: round away the nanoseconds between the
	// two readings.
	const nsPerSec = int64(1e9)
	off := (tai.Nano() - real.Nano() + nsPerSec/2) / nsPerSec * nsPerSec
	var tv unix.Timeval
	var tz struct{ MinutesWest, DSTTime int32 }
	if _, _, e := unix.Syscall(unix.SYS_GETTIMEOFDAY, uintptr(unsafe.Pointer(&tv)), uintptr(unsafe.Pointer(&tz)), 0); e != 0 {
		return wallClock{}, fmt.Errorf("read the kernel's timezone: %w", e)
	}
	const secPerMin = 60
	return wallClock{taiOff: off, tzWest: tz.MinutesWest * secPerMin}, nil
}

// timePred renders a time match.
func timePred(m *ir.TimeMatch, wc wallClock) bpfPred {
	p := bpfPred{Kind: uint32(compiler.PredTime), DateStart: m.DateStart, DateStop: m.DateStop,
		DaytimeStart: m.DaytimeStart, DaytimeStop: m.DaytimeStop,
		Monthdays: m.Monthdays, Weekdays: uint32(m.Weekdays), TZWest: wc.tzWest, TAIOff: wc.taiOff}
	if m.Contiguous {
		p.Flags |= predContiguous
	}
	if m.KernelTZ {
		p.Flags |= predKernelTZ
	}
	return p
}

// renderPred renders predicate pr.
func renderPred(pr compiler.Pred, wc wallClock) (bpfPred, error) {
	switch m := pr.Match.(type) {
	case *ir.StringMatch:
		return stringPred(m), nil
	case *ir.U32Match:
		return u32Pred(m), nil
	case *ir.TimeMatch:
		return timePred(m, wc), nil
	}
	return bpfPred{}, fmt.Errorf("predicate of match %T", pr.Match)
}

// fillPreds writes a generation's predicates into its xfw_o_pred map.
func fillPreds(m *ebpf.Map, preds []compiler.Pred) error {
	if len(preds) == 0 {
		return nil
	}
	wc, err := readWallClock()
	if err != nil {
		return err
	}
	vals := make([]bpfPred, len(preds))
	for i, pr := range preds {
		if vals[i], err = renderPred(pr, wc); err != nil {
			return err
		}
	}
	if err := putArray(m, len(vals), func(i int) bpfPred { return vals[i] }); err != nil {
		return fmt.Errorf("fill predicates: %w", err)
	}
	return nil
}

// predMeta is a predicate in a generation's saved metadata (JSON), so
// that an in-place change of the running generation keeps it.
type predMeta struct {
	Kind   compiler.PredKind
	String *ir.StringMatch `json:",omitempty"`
	U32    *ir.U32Match    `json:",omitempty"`
	Time   *ir.TimeMatch   `json:",omitempty"`
}

// predMetas encodes a generation's predicates for its metadata.
func predMetas(preds []compiler.Pred) []predMeta {
	var out []predMeta
	for _, pr := range preds {
		pm := predMeta{Kind: pr.Kind}
		switch m := pr.Match.(type) {
		case *ir.StringMatch:
			pm.String = m
		case *ir.U32Match:
			pm.U32 = m
		case *ir.TimeMatch:
			pm.Time = m
		}
		out = append(out, pm)
	}
	return out
}

// predsOfMeta decodes what predMetas encoded.
func predsOfMeta(metas []predMeta) []compiler.Pred {
	var out []compiler.Pred
	for _, pm := range metas {
		pr := compiler.Pred{Kind: pm.Kind}
		switch {
		case pm.String != nil:
			pr.Match = pm.String
		case pm.U32 != nil:
			pr.Match = pm.U32
		case pm.Time != nil:
			pr.Match = pm.Time
		}
		out = append(out, pr)
	}
	return out
}
