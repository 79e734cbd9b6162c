package dataplane

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The agent checks every --poll that each interface runs xfw's programs
// (Status). Status opens the running state (every map of the program, by
// id) and each attached program to read its name: some two hundred bpf
// calls a check. What its answer about the attachments rests on is
// smaller: the devices (their kinds, bridge ports, pending veths), the
// XDP program id of each and the program ids on its TCX hooks. Program ids
// are not reused (the kernel allocates them cyclically up to 2^31), so a
// program id stands for the program's name and maps: while those ids and
// devices stay the same, Status would report the same attachments.
// AttachFingerprint reads them at one bpf call per TCX hook and device,
// and the link list kept by the netlink watch (netwatch.go).

// AttachFingerprint returns a digest of the inputs of Status' report of the
// attachments (which interfaces exist, which run xfw's programs, the XDP
// program ids), for a caller that checks often and acts only on a change
// (the agent): equal digests, equal attachments. It does not cover the
// running rulesets (Status' IPv4 and IPv6), which change without a change
// of program. Cost: the link list (no dump while the process's netlink
// watch saw no change) and one BPF_PROG_QUERY per TCX hook and device; no
// program or map is opened.
func AttachFingerprint() (string, error) {
	ifaces, err := listInterfaces()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, ifc := range ifaces {
		fmt.Fprintf(&b, "%d %s %s %t %t", ifc.Index, ifc.Name, ifc.link.Type(), ifc.BridgePort, ifc.PendingVeth)
		if x := ifc.link.Attrs().Xdp; x != nil && x.Attached {
			fmt.Fprintf(&b, " xdp %d/%d", x.ProgId, x.AttachMode)
		}
		for _, h := range []tcxHook{egressHook, ingressHook} {
			ids, err := tcxProgramIDs(ifc.Index, h.attach)
			if err != nil {
				return "", fmt.Errorf("query %s of %s: %w", h.label, ifc.Name, err)
			}
			fmt.Fprintf(&b, " %s %v", h.label, ids)
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// bpfQueryAttr is the kernel's bpf_attr for BPF_PROG_QUERY
// (include/uapi/linux/bpf.h), up to the mprog revision.
type bpfQueryAttr struct {
	Target          uint32
	AttachType      uint32
	QueryFlags      uint32
	AttachFlags     uint32
	ProgIDs         unsafe.Pointer
	Count           uint32
	_               uint32
	ProgAttachFlags uint64
	LinkIDs         uint64
	LinkAttachFlags uint64
	Revision        uint64
}

// tcxQuerySlots is how many program ids one query asks for: more programs
// on one hook than this are read by the two calls of link.QueryPrograms.
const tcxQuerySlots = 16

// tcxProgramIDs returns the ids of the programs on the TCX hook of
// ifindex, in their order, in one bpf call (link.QueryPrograms makes two:
// the count, then the ids).
func tcxProgramIDs(ifindex int, attach ebpf.AttachType) ([]ebpf.ProgramID, error) {
	var ids [tcxQuerySlots]uint32
	attr := bpfQueryAttr{Target: uint32(ifindex), AttachType: uint32(attach), ProgIDs: unsafe.Pointer(&ids[0]), Count: tcxQuerySlots}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_QUERY, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&ids)
	if errors.Is(errno, unix.ENOSPC) {
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: attach})
		if err != nil {
			return nil, err
		}
		out := make([]ebpf.ProgramID, 0, len(res.Programs))
		for _, p := range res.Programs {
			out = append(out, p.ID)
		}
		return out, nil
	}
	if errno != 0 {
		return nil, errno
	}
	out := make([]ebpf.ProgramID, 0, attr.Count)
	for _, id := range ids[:min(int(attr.Count), tcxQuerySlots)] {
		out = append(out, ebpf.ProgramID(id))
	}
	return out, nil
}

// progNames caches the names of programs by id (programName): an id is
// not reused, so its name never changes. Bounded by progNamesMax, past
// which it starts again empty.
var progNames struct {
	mu    sync.Mutex
	names map[ebpf.ProgramID]string
}

// progNamesMax bounds the program name cache (a few programs per
// namespace are looked up; a churn of others' programs must not grow it
// without end).
const progNamesMax = 4096

// cachedProgramName returns the cached name of the program of id.
func cachedProgramName(id ebpf.ProgramID) (string, bool) {
	progNames.mu.Lock()
	defer progNames.mu.Unlock()
	name, ok := progNames.names[id]
	return name, ok
}

// cacheProgramName remembers the name of the program of id.
func cacheProgramName(id ebpf.ProgramID, name string) {
	progNames.mu.Lock()
	defer progNames.mu.Unlock()
	if progNames.names == nil || len(progNames.names) >= progNamesMax {
		progNames.names = map[ebpf.ProgramID]string{}
	}
	progNames.names[id] = name
}
