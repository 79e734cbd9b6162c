package cli

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
)

// The command server (cmdserver.go) and its client (cmdclient.go) speak
// over a SOCK_SEQPACKET unix socket with an abstract name: abstract names
// belong to the network namespace, as xfw's state does, so the agent of a
// namespace serves the commands run in it and no other.
//
// The exchange, one message each:
//
//	client → server  request: build id, argv (name first), XFW_* environment;
//	                 SCM_RIGHTS: the caller's stdin, stdout, stderr
//	server → client  'D' reason: declined (the client runs the command itself)
//	                 'S': ready to start
//	client → server  'G': go (from here on the client never runs it itself)
//	server → client  'H': still running (every heartbeatEvery)
//	server → client  'E' status (4 bytes, little endian): the command's exit status
//
// The 'S'/'G' step makes the hand-over exact: a client that gave up
// waiting for 'S' closes the connection, and the server, reading no 'G',
// does not start the command the client then runs itself.

// cmdSocketName is the abstract socket's name (the leading NUL of an
// abstract address is added where it is bound).
const cmdSocketName = "xfw/cmd"

// Server message tags.
const (
	msgDecline   = 'D'
	msgStart     = 'S'
	msgGo        = 'G'
	msgHeartbeat = 'H'
	msgExit      = 'E'
)

// maxRequest bounds a request message (argv and environment; stdin is
// passed as a descriptor).
const maxRequest = 64 << 10

// cmdEnvPrefix selects the environment that changes what a command does.
const cmdEnvPrefix = "XFW_"

// serverEnv is the client-side switch: "off" never asks the agent, "only"
// fails instead of running the command itself (tests, benchmarks). It is
// not part of the environment compared with the server's.
const serverEnv = "XFW_CMDSERVER"

// cmdRequest is what the client asks the server to run.
type cmdRequest struct {
	build string
	args  []string // the command's name (iptables, ip6tables-restore, …) and its arguments
	env   []string // the caller's XFW_* variables, sorted
}

// encode renders r as the request message.
func (r *cmdRequest) encode() []byte {
	var b []byte
	put := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	put(r.build)
	b = binary.AppendUvarint(b, uint64(len(r.args)))
	for _, a := range r.args {
		put(a)
	}
	b = binary.AppendUvarint(b, uint64(len(r.env)))
	for _, e := range r.env {
		put(e)
	}
	return b
}

var errBadRequest = errors.New("malformed request")

// decodeRequest parses a request message.
func decodeRequest(b []byte) (*cmdRequest, error) {
	rd := bytes.NewReader(b)
	str := func() (string, error) {
		n, err := binary.ReadUvarint(rd)
		if err != nil || n > uint64(rd.Len()) {
			return "", errBadRequest
		}
		s := make([]byte, n)
		rd.Read(s)
		return string(s), nil
	}
	list := func() ([]string, error) {
		n, err := binary.ReadUvarint(rd)
		if err != nil || n > uint64(rd.Len()) {
			return nil, errBadRequest
		}
		out := make([]string, 0, n)
		for range n {
			s, err := str()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	var r cmdRequest
	var err error
	if r.build, err = str(); err != nil {
		return nil, err
	}
	if r.args, err = list(); err != nil {
		return nil, err
	}
	if r.env, err = list(); err != nil {
		return nil, err
	}
	if rd.Len() != 0 || len(r.args) == 0 {
		return nil, errBadRequest
	}
	return &r, nil
}

// commandEnv returns the XFW_* variables of environ that change what a
// command does, sorted.
func commandEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, cmdEnvPrefix) && !strings.HasPrefix(kv, serverEnv+"=") {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// goBuildIDNote is the ELF note the Go linker writes the build id into:
// owner "Go", type 4 (cmd/link's ELF_NOTE_GOBUILDID_TAG).
const goBuildIDNote = 4

// noteSearchBytes is how much of the executable's start is searched for
// the note (the linker puts it right after the program headers).
const noteSearchBytes = 8 << 10

// buildID returns the Go build id of the running executable (it changes
// with any input of the build), or "" when it cannot be read: client and
// server then never match.
var buildID = sync.OnceValue(func() string {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, noteSearchBytes)
	n, _ := f.ReadAt(head, 0)
	return findGoBuildID(head[:n])
})

// findGoBuildID finds the Go build-id note in the start of an ELF file.
func findGoBuildID(head []byte) string {
	owner := []byte("Go\x00\x00")
	for off := 0; ; {
		i := bytes.Index(head[off:], owner)
		if i < 0 {
			return ""
		}
		at := off + i
		off = at + 1
		const hdr = 12 // namesz, descsz, type (4 bytes each)
		if at < hdr {
			continue
		}
		namesz := binary.LittleEndian.Uint32(head[at-hdr:])
		descsz := binary.LittleEndian.Uint32(head[at-hdr+4:])
		typ := binary.LittleEndian.Uint32(head[at-hdr+8:])
		end := at + len(owner) + int(descsz)
		if namesz != uint32(len(owner)) || typ != goBuildIDNote || descsz == 0 || end > len(head) {
			continue
		}
		return string(head[at+len(owner) : end])
	}
}
