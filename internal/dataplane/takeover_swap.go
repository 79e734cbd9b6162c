package dataplane

// The takeover's swap: every interface's XDP and TCX programs replaced in
// place (XDP_FLAGS_REPLACE against the old program, BPF_F_REPLACE on the
// TCX hooks), so that each hook runs the old program or the new one and
// never neither; the guard's admissions follow each interface's XDP
// program (takeover_guard.go); on failure the interfaces already swapped
// get the old programs back.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Netlink's XDP attributes and flags that vishvananda/netlink lacks
// (include/uapi/linux/if_link.h).
const (
	iflaXDPExpectedFD = 8      // IFLA_XDP_EXPECTED_FD
	xdpFlagsReplace   = 1 << 4 // XDP_FLAGS_REPLACE
)

// swapFailAfter, set only by tests (-ldflags -X), makes Commit fail after
// swapping that many interfaces, to check that the old programs are put
// back.
var swapFailAfter string

// swappedHook is one hook Commit replaced, to put back on failure.
type swappedHook struct {
	ifc  Interface
	xdp  bool    // the XDP hook (else hook)
	hook tcxHook // a TCX hook
	// was is the program the hook ran before (0: none).
	was ebpf.ProgramID
}

// Commit swaps this build's programs in on every interface and ends the
// takeover: from its return the old build's programs run nowhere (the
// kernel frees them, and their maps but the connection tables handed
// over). On failure the old programs are back wherever they were replaced
// and the error says why.
func (t *Takeover) Commit() error {
	if t.done {
		return errors.New("takeover already ended")
	}
	attachHeld.Store(false)
	// The interface facts and local addresses as they are now (Apply
	// filled them, unless no family has a ruleset); another program's
	// XDP hook is refused, not replaced.
	cur, ifaces, err := loadedState()
	if err != nil {
		return err
	}
	cur.Close()
	if _, _, err := t.next.programIDs(); err != nil {
		return err
	}
	rest, ports, err := splitPorts(ifaces)
	if err != nil {
		return err
	}
	guard, err := openGuards()
	if err != nil {
		return err
	}
	defer guard.close()
	var swapped []swappedHook
	start := time.Now()
	for _, ifc := range append(rest, ports...) {
		done, err := t.swapInterface(ifc, !containsIndex(ports, ifc.Index), guard)
		swapped = append(swapped, done...)
		if err == nil && strconv.Itoa(t.Swapped+1) == swapFailAfter {
			err = fmt.Errorf("swap failure injected after interface %s (a test build)", ifc.Name)
		}
		if err != nil {
			if rerr := t.putBack(swapped, guard); rerr != nil {
				err = fmt.Errorf("%w; putting the old programs back: %v", err, rerr)
			}
			return err
		}
		t.Swapped++
	}
	TraceSince("takeover: swap every interface", start)
	t.done = true
	err = t.carryLateCounts()
	t.old.Close()
	return err
}

// containsIndex reports whether ifaces holds the interface of index.
func containsIndex(ifaces []Interface, index int) bool {
	for _, ifc := range ifaces {
		if ifc.Index == index {
			return true
		}
	}
	return false
}

// swapInterface replaces xfw's programs on ifc (its XDP program unless it
// is a bridge port) and returns the hooks it replaced.
func (t *Takeover) swapInterface(ifc Interface, withXDP bool, guard guards) ([]swappedHook, error) {
	var done []swappedHook
	if withXDP {
		var was ebpf.ProgramID
		if x := ifc.link.Attrs().Xdp; x != nil && x.Attached {
			was = ebpf.ProgramID(x.ProgId)
		}
		if err := replaceXDP(ifc, t.next.xdp, t.opts.Mode); err != nil {
			return done, err
		}
		done = append(done, swappedHook{ifc: ifc, xdp: true, was: was})
		if err := guard.retarget(ifc.Index, was, t.next.xdpID); err != nil {
			return done, err
		}
	}
	for _, h := range []struct {
		hook tcxHook
		prog *ebpf.Program
	}{{egressHook, t.next.tc}, {ingressHook, t.next.tcIn}} {
		was, err := ourTCX(ifc, h.hook)
		if err != nil {
			return done, err
		}
		if err := attachTCX(h.prog, ifc, h.hook); err != nil {
			return done, err
		}
		done = append(done, swappedHook{ifc: ifc, hook: h.hook, was: was})
	}
	return done, nil
}

// replaceXDP attaches prog to ifc's XDP hook in place of the xfw program
// running there, in its mode, by a compare-and-swap (XDP_FLAGS_REPLACE):
// the kernel swaps the program a packet runs in one pointer store, and
// refuses when the program there is no longer the one read. An interface
// running no XDP program gets prog as attachXDP attaches it in mode.
func replaceXDP(ifc Interface, prog *ebpf.Program, mode XDPMode) error {
	x := ifc.link.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return attachXDP(prog, ifc, mode)
	}
	flags := nl.XDP_FLAGS_DRV_MODE
	if x.AttachMode == nl.XDP_ATTACHED_SKB {
		flags = nl.XDP_FLAGS_SKB_MODE
	}
	running, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return fmt.Errorf("open the XDP program running on %s: %w", ifc.Name, err)
	}
	defer running.Close()
	if err := setXDPReplacing(ifc.Index, prog.FD(), running.FD(), flags); err != nil {
		return fmt.Errorf("replace the XDP program of %s: %w", ifc.Name, err)
	}
	return nil
}

// setXDPReplacing is RTM_SETLINK with IFLA_XDP {FD, FLAGS|REPLACE,
// EXPECTED_FD}.
func setXDPReplacing(ifindex, fd, expectedFD, mode int) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	attr := nl.NewRtAttr(unix.IFLA_XDP|unix.NLA_F_NESTED, nil)
	attr.AddRtAttr(nl.IFLA_XDP_FD, nl.Uint32Attr(uint32(fd)))
	attr.AddRtAttr(nl.IFLA_XDP_FLAGS, nl.Uint32Attr(uint32(mode|xdpFlagsReplace)))
	attr.AddRtAttr(iflaXDPExpectedFD, nl.Uint32Attr(uint32(expectedFD)))
	req.AddData(attr)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// putBack attaches the old build's programs again where the takeover had
// replaced them, the guard following.
func (t *Takeover) putBack(swapped []swappedHook, guard guards) error {
	var errs []error
	for _, h := range swapped {
		l, err := netlink.LinkByIndex(h.ifc.Index)
		if err != nil {
			errs = append(errs, fmt.Errorf("find %s: %w", h.ifc.Name, err))
			continue
		}
		ifc := h.ifc
		ifc.link = l
		old := t.old.xdp
		if !h.xdp {
			old = t.oldTCX(h.hook)
		}
		switch {
		case h.was == 0:
			// The hook ran none of the old programs: none again.
			if h.xdp {
				errs = append(errs, detachXDP(ifc))
			} else {
				errs = append(errs, detachTCX(ifc, h.hook))
			}
		case old == nil:
			// Never left empty: this build's program, with the same
			// rules, stays.
			errs = append(errs, fmt.Errorf("%s: the old build's program of this hook is not at hand; this build's stays there", ifc.Name))
		case h.xdp:
			if err := replaceXDP(ifc, old, t.opts.Mode); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, guard.retarget(ifc.Index, t.next.xdpID, h.was))
		default:
			errs = append(errs, attachTCX(old, ifc, h.hook))
		}
	}
	return errors.Join(errs...)
}

// oldTCX returns the old build's program of hook (nil when it is not open).
func (t *Takeover) oldTCX(hook tcxHook) *ebpf.Program {
	if hook.prog == tcProgName {
		return t.old.tc
	}
	return t.old.tcIn
}

// carryLateCounts adds to the new generations what the old programs
// counted after BeginTakeover read their counters (packets of the
// interfaces not swapped yet), once no old program runs.
func (t *Takeover) carryLateCounts() error {
	for fam, first := range t.first {
		slot := t.old.slot(fam)
		if err := t.old.waitForReaders(slot); err != nil {
			return err
		}
		final, err := t.old.readCounters(slot)
		if err != nil {
			return fmt.Errorf("read the old %s counters: %w", fam, err)
		}
		now, err := Counters(fam)
		if err != nil {
			return err
		}
		late := map[int]ir.Counters{}
		for i := 0; i < len(first) && i < len(final) && i < len(now); i++ {
			dp, db := final[i].Packets-first[i].Packets, final[i].Bytes-first[i].Bytes
			if dp != 0 || db != 0 {
				late[i] = ir.Counters{Packets: now[i].Packets + dp, Bytes: now[i].Bytes + db}
			}
		}
		if len(late) > 0 {
			if err := SetCounters(fam, late); err != nil {
				return err
			}
		}
	}
	return nil
}
