package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"syscall"

	"github.com/xfw-dev/xfw/internal/dataplane"
)

func init() { commands["recent"] = runRecent }

// `xfw recent` is the kernel's /proc/net/xt_recent/ for xfw's recent
// lists, in the caller's network namespace as xfw's other commands:
//
//	xfw recent              the lists' names (ls /proc/net/xt_recent)
//	xfw recent NAME         the entries (cat /proc/net/xt_recent/NAME)
//	xfw recent NAME +ADDR   add ADDR, or stamp it again
//	xfw recent NAME -ADDR   remove ADDR
//	xfw recent NAME /       flush the list
//	xfw recent NAME -       read one such write from standard input
//	                        (echo +ADDR > /proc/net/xt_recent/NAME)
//
// A write is taken as recent_mt_proc_write takes one, errors included.

// recentWriteMax is the kernel's write buffer: the longest IPv6 address
// with its "+" (sizeof("+b335:1d35:1e55:dead:c0de:1715:5afe:c0de")).
const recentWriteMax = 42

// recentOp is one parsed write.
type recentOp struct {
	kind byte // '+', '-' or '/'; 0: an empty write, nothing to do
	addr netip.Addr
	// rest says that the write was longer than the kernel takes at once:
	// the writer's next write fails with ESPIPE.
	rest bool
}

func runRecent(name string, args []string, env Env) int {
	switch {
	case len(args) == 0:
		names, err := dataplane.RecentLists()
		if err != nil {
			return recentFail(env, "", err)
		}
		for _, n := range names {
			fmt.Fprintln(env.Stdout, n)
		}
		return exitOK
	case len(args) == 1:
		return showRecent(env, args[0])
	case len(args) == 2:
		input := []byte(args[1] + "\n") // as echo writes it
		if args[1] == "-" {
			var err error
			if input, err = io.ReadAll(env.Stdin); err != nil {
				return recentFail(env, args[0], err)
			}
		}
		return writeRecent(env, args[0], input)
	}
	fmt.Fprintln(env.Stderr, "usage: xfw recent [NAME [+ADDR|-ADDR|/|-]]")
	return exitParameter
}

// showRecent prints list's entries as recent_seq_show does.
func showRecent(env Env, list string) int {
	entries, err := dataplane.RecentEntries(list)
	if err != nil {
		return recentFail(env, list, err)
	}
	var b strings.Builder
	for _, e := range entries {
		addr := e.Addr.String()
		if e.Addr.Is6() {
			addr = e.Addr.StringExpanded() // %pI6
		}
		fmt.Fprintf(&b, "src=%s ttl: %d last_seen: %d oldest_pkt: %d", addr, e.TTL, e.LastSeen, e.Index)
		for i, s := range e.Stamps {
			sep := ""
			if i > 0 {
				sep = ","
			}
			fmt.Fprintf(&b, "%s %d", sep, s)
		}
		b.WriteByte('\n')
	}
	fmt.Fprint(env.Stdout, b.String())
	return exitOK
}

// writeRecent applies one write of input to list.
func writeRecent(env Env, list string, input []byte) int {
	op, errno := parseRecentWrite(input)
	if errno != 0 {
		return recentFail(env, list, errno)
	}
	var err error
	switch op.kind {
	case '/':
		err = dataplane.RecentFlush(list)
	case '+':
		err = dataplane.RecentAdd(list, op.addr)
	case '-':
		err = dataplane.RecentRemove(list, op.addr)
	default:
		_, err = dataplane.RecentEntries(list) // an empty write: the list must exist
	}
	if err == nil && op.rest {
		err = syscall.ESPIPE
	}
	if err != nil {
		return recentFail(env, list, err)
	}
	return exitOK
}

// parseRecentWrite parses a write as recent_mt_proc_write: the first 42
// bytes at most, "/", or "+" or "-" and an address ending at a newline or
// at the end (IPv6 when a colon follows the sign).
func parseRecentWrite(in []byte) (recentOp, syscall.Errno) {
	if len(in) == 0 {
		return recentOp{}, 0
	}
	size := min(len(in), recentWriteMax)
	op := recentOp{kind: in[0], rest: size < len(in)}
	switch op.kind {
	case '/':
		return op, 0
	case '+', '-':
	default:
		return recentOp{}, syscall.EINVAL
	}
	text := in[1:size]
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	var ok bool
	if bytes.IndexByte(in[1:size], ':') >= 0 {
		a, err := netip.ParseAddr(string(text))
		op.addr, ok = a, err == nil && a.Is6() && a.Zone() == ""
	} else {
		op.addr, ok = parseIn4(text)
	}
	if !ok {
		return recentOp{}, syscall.EINVAL
	}
	return op, 0
}

// parseIn4 parses a dotted quad as the kernel's in4_pton: four decimal
// fields of at least one digit, each at most 255.
func parseIn4(text []byte) (netip.Addr, bool) {
	fields := bytes.Split(text, []byte{'.'})
	if len(fields) != 4 {
		return netip.Addr{}, false
	}
	var a [4]byte
	for i, f := range fields {
		if len(f) == 0 {
			return netip.Addr{}, false
		}
		v := 0
		for _, c := range f {
			if c < '0' || c > '9' {
				return netip.Addr{}, false
			}
			if v = v*10 + int(c-'0'); v > 255 {
				return netip.Addr{}, false
			}
		}
		a[i] = byte(v)
	}
	return netip.AddrFrom4(a), true
}

// recentFail reports err as reading or writing the proc file would
// (strerror's words) and returns exit status 1.
func recentFail(env Env, list string, err error) int {
	prefix := "xfw recent: "
	if list != "" {
		prefix += list + ": "
	}
	if errors.Is(err, dataplane.ErrNoRecentList) {
		err = syscall.ENOENT
	}
	fmt.Fprintln(env.Stderr, prefix+strerror(err))
	return exitOther
}
