package dataplane

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// progFacts are the facts of a loaded program xfw asks for: its id, its
// name and the ids of the maps it uses.
type progFacts struct {
	ID     ebpf.ProgramID
	Name   string
	MapIDs []ebpf.MapID
}

// bpfProgInfo is the head of the kernel's struct bpf_prog_info, up to the
// name: BPF_OBJ_GET_INFO_BY_FD fills as much as it is given.
type bpfProgInfo struct {
	Type            uint32
	ID              uint32
	Tag             [8]byte
	JitedProgLen    uint32
	XlatedProgLen   uint32
	JitedProgInsns  uint64
	XlatedProgInsns uint64
	LoadTime        uint64
	CreatedByUID    uint32
	NrMapIDs        uint32
	MapIDs          unsafe.Pointer // __aligned_u64 on the 64-bit machines xfw runs on
	Name            [16]byte
}

// bpfInfoAttr is the BPF_OBJ_GET_INFO_BY_FD command's part of union bpf_attr.
type bpfInfoAttr struct {
	FD      uint32
	InfoLen uint32
	Info    unsafe.Pointer
}

// programFacts returns prog's id, name and map ids. ebpf.Program.Info asks
// the kernel for the program's translated instructions as well (a copy of
// ~1 ms for xfw's programs, paid several times per command); this asks for
// the head of bpf_prog_info only, and for the map ids.
func programFacts(prog *ebpf.Program) (progFacts, error) {
	info, err := objInfo(prog.FD(), bpfProgInfo{})
	if err != nil {
		return progFacts{}, fmt.Errorf("program info: %w", err)
	}
	pf := progFacts{ID: ebpf.ProgramID(info.ID), Name: unix.ByteSliceToString(info.Name[:])}
	if info.NrMapIDs == 0 {
		return pf, nil
	}
	ids := make([]uint32, info.NrMapIDs)
	info2, err := objInfo(prog.FD(), bpfProgInfo{NrMapIDs: info.NrMapIDs, MapIDs: unsafe.Pointer(&ids[0])})
	runtime.KeepAlive(ids)
	if err != nil {
		return progFacts{}, fmt.Errorf("program map ids: %w", err)
	}
	for _, id := range ids[:min(int(info2.NrMapIDs), len(ids))] {
		pf.MapIDs = append(pf.MapIDs, ebpf.MapID(id))
	}
	return pf, nil
}

// objInfo runs BPF_OBJ_GET_INFO_BY_FD on fd with in as the request and
// returns what the kernel filled in.
func objInfo(fd int, in bpfProgInfo) (bpfProgInfo, error) {
	info := new(bpfProgInfo)
	*info = in
	attr := bpfInfoAttr{FD: uint32(fd), InfoLen: uint32(unsafe.Sizeof(*info)), Info: unsafe.Pointer(info)}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET_INFO_BY_FD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(info)
	if errno != 0 {
		return bpfProgInfo{}, errno
	}
	return *info, nil
}

// programName returns the name of the program of id, or "" when it is
// gone or unreadable. A name read once is cached (attachprint.go: ids are
// not reused): the agent's checks and the fast path's polled facts name
// the same programs every second.
func programName(id ebpf.ProgramID) string {
	if name, ok := cachedProgramName(id); ok {
		return name
	}
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return ""
	}
	defer prog.Close()
	pf, err := programFacts(prog)
	if err != nil {
		return ""
	}
	cacheProgramName(id, pf.Name)
	return pf.Name
}

// bpfMapInfo is the head of the kernel's struct bpf_map_info, up to the
// name.
type bpfMapInfo struct {
	Type       uint32
	ID         uint32
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	MapFlags   uint32
	Name       [16]byte
}

// mapFacts returns the name the kernel keeps for m and m's id. ebpf.Map.Info
// reads /proc/self/fdinfo as well (an open, a read and a close per map,
// thirty-odd maps per command).
func mapFacts(m *ebpf.Map) (string, ebpf.MapID, error) {
	info := new(bpfMapInfo)
	attr := bpfInfoAttr{FD: uint32(m.FD()), InfoLen: uint32(unsafe.Sizeof(*info)), Info: unsafe.Pointer(info)}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET_INFO_BY_FD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(info)
	if errno != 0 {
		return "", 0, fmt.Errorf("map info: %w", errno)
	}
	return unix.ByteSliceToString(info.Name[:]), ebpf.MapID(info.ID), nil
}
