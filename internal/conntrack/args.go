package conntrack

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/iptables"
)

// Command is what an invocation does.
type Command int

// The commands of conntrack(8) xfw serves.
const (
	// CmdNone: no command (no argument at all prints the usage).
	CmdNone Command = iota
	// CmdList lists connections (-L, --dump).
	CmdList
	// CmdDelete deletes the connections that match (-D, --delete).
	CmdDelete
	// CmdFlush deletes every connection (-F, --flush).
	CmdFlush
	// CmdCount prints the number of connections (-C, --count).
	CmdCount
	// CmdHelp prints the usage (-h, --help).
	CmdHelp
	// CmdVersion prints the version (-V, --version).
	CmdVersion
)

// Options is a parsed command line.
type Options struct {
	Cmd    Command
	Filter Filter
	Format FormatOptions
}

// Error is a parameter problem, reported as conntrack does (Message) with
// its exit status 2.
type Error struct {
	Msg string
}

// Error returns the message without conntrack's decoration.
func (e *Error) Error() string { return e.Msg }

// Message is the error as conntrack prints it on stderr (with newlines).
func (e *Error) Message() string {
	return Prefix + e.Msg + "\nTry `conntrack -h' or 'conntrack --help' for more information.\n"
}

func errorf(format string, a ...any) *Error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// Filter selects connections by their original direction (what -L and -D
// take). Zero values of the pointer-like fields match everything; use
// NewFilter for one that matches every connection.
type Filter struct {
	// Family is 4, 6 or 0 (any).
	Family int
	// Proto is a protocol number or -1 (any).
	Proto int
	// Src and Dst are prefixes the original addresses must lie in (zero
	// value: any).
	Src, Dst netip.Prefix
	// SPort and DPort are the original ports or -1 (any).
	SPort, DPort int
	// State is a TCP state (index of TCPStates) or -1 (any).
	State int
}

// NewFilter returns the filter that matches every connection.
func NewFilter() Filter { return Filter{Proto: -1, SPort: -1, DPort: -1, State: -1} }

// Match reports whether c passes f.
func (f Filter) Match(c Conn) bool {
	if f.Family == 4 && c.IPv6 || f.Family == 6 && !c.IPv6 {
		return false
	}
	if f.Proto >= 0 && int(c.Proto) != f.Proto {
		return false
	}
	if f.Src.IsValid() && !f.Src.Contains(c.Src) {
		return false
	}
	if f.Dst.IsValid() && !f.Dst.Contains(c.Dst) {
		return false
	}
	if f.SPort >= 0 && int(c.SPort) != f.SPort {
		return false
	}
	if f.DPort >= 0 && int(c.DPort) != f.DPort {
		return false
	}
	if f.State >= 0 && int(c.TCPState) != f.State {
		return false
	}
	return true
}

// option bits, in the order of conntrack's optflags (its "Illegal option"
// message names the first offending one in this order).
const (
	optSrc = 1 << iota
	optDst
	optProto
	optFamily
	optOutput
)

var optNames = []struct {
	bit  int
	name string
}{{optSrc, "src"}, {optDst, "dst"}, {optProto, "protonum"}, {optFamily, "family"}, {optOutput, "output"}}

// legal are the options each command takes.
var legal = map[Command]int{
	CmdList:   optSrc | optDst | optProto | optFamily | optOutput,
	CmdDelete: optSrc | optDst | optProto | optFamily | optOutput,
}

// unsupported are conntrack options xfw does not implement (reported as
// such rather than as unknown).
var unsupported = map[string]bool{
	"-r": true, "--reply-src": true, "-q": true, "--reply-dst": true,
	"-m": true, "--mark": true, "-u": true, "--status": true,
	"-t": true, "--timeout": true, "-z": true, "--zero": true,
	"-w": true, "--zone": true, "-c": true, "--secmark": true,
	"-l": true, "--label": true, "-n": true, "--src-nat": true,
	"-g": true, "--dst-nat": true, "-j": true, "--any-nat": true,
	"-e": true, "--event-mask": true, "-b": true, "--buffer-size": true,
	"--mask-src": true, "--mask-dst": true, "--orig-zone": true,
	"--reply-zone": true, "-G": true, "--get": true, "-I": true,
	"--create": true, "-U": true, "--update": true, "-E": true,
	"--event": true, "-S": true, "--stats": true, "-i": true, "--id": true,
	"--reply-port-src": true, "--reply-port-dst": true,
	"--mask-port-src": true, "--mask-port-dst": true,
}

// ParseArgs parses conntrack's command line (without the program name) as
// conntrack-tools 1.4.7 does for the commands and options xfw serves:
// -L/--dump, -D/--delete, -F/--flush, -C/--count with -f, -p, -s, -d, -o
// extended and, after -p of a protocol with ports, --sport/--orig-port-src
// and --dport/--orig-port-dst, and after -p tcp, --state. Errors are *Error.
func ParseArgs(args []string) (Options, error) {
	o := Options{Filter: NewFilter()}
	seen := 0
	setCmd := func(c Command) error {
		if o.Cmd != CmdNone {
			return errorf("Invalid commands combination")
		}
		o.Cmd = c
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue // getopt permutes stray words to the end; unused
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if k := strings.IndexByte(a, '='); k >= 0 {
				name, val, hasVal = a[:k], a[k+1:], true
			}
		} else if len(a) > 2 {
			name, val, hasVal = a[:2], a[2:], true
		}
		// arg returns the option's argument (attached or the next word).
		arg := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", errorf("option `%s' requires an argument", name)
			}
			i++
			return args[i], nil
		}
		// table takes a command's optional table name.
		table := func() error {
			t := ""
			if hasVal {
				t = val
			} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				t = args[i]
			}
			switch t {
			case "", "conntrack":
				return nil
			case "expect", "dying", "unconfirmed":
				return errorf("table `%s' is not supported by xfw", t)
			}
			return errorf("unknown type `%s'", t)
		}
		var err error
		switch name {
		case "-L", "--dump":
			if err = setCmd(CmdList); err == nil {
				err = table()
			}
		case "-D", "--delete":
			if err = setCmd(CmdDelete); err == nil {
				err = table()
			}
		case "-F", "--flush":
			if err = setCmd(CmdFlush); err == nil {
				err = table()
			}
		case "-C", "--count":
			if err = setCmd(CmdCount); err == nil {
				err = table()
			}
		case "-h", "--help":
			o.Cmd = CmdHelp
			return o, nil
		case "-V", "--version":
			o.Cmd = CmdVersion
			return o, nil
		case "-s", "--src", "--orig-src", "-d", "--dst", "--orig-dst":
			var v string
			if v, err = arg(); err != nil {
				break
			}
			var p netip.Prefix
			if p, err = parseAddr(v); err != nil {
				break
			}
			if err = o.Filter.setFamily(p.Addr()); err != nil {
				break
			}
			if name == "-s" || name == "--src" || name == "--orig-src" {
				o.Filter.Src, seen = p, seen|optSrc
			} else {
				o.Filter.Dst, seen = p, seen|optDst
			}
		case "-f", "--family":
			var v string
			if v, err = arg(); err != nil {
				break
			}
			fam := 0
			switch v {
			case "ipv4":
				fam = 4
			case "ipv6":
				fam = 6
			default:
				err = errorf("`%s' unsupported protocol", v)
			}
			if err != nil {
				break
			}
			if o.Filter.Family != 0 && o.Filter.Family != fam {
				err = errorf("mismatched address family")
				break
			}
			o.Filter.Family, seen = fam, seen|optFamily
		case "-p", "--protonum":
			var v string
			if v, err = arg(); err != nil {
				break
			}
			var p int
			if p, err = ParseProto(v); err == nil {
				o.Filter.Proto, seen = p, seen|optProto
			}
		case "-o", "--output":
			var v string
			if v, err = arg(); err != nil {
				break
			}
			for _, w := range strings.Split(v, ",") {
				switch w {
				case "extended":
					o.Format.Extended = true
				case "xml", "timestamp", "id", "ktimestamp", "labels", "userspace", "save":
					err = errorf("output `%s' is not supported by xfw", w)
				default:
					err = errorf("Bad parameter `%s'", w)
				}
			}
			seen |= optOutput
		case "--sport", "--orig-port-src", "--dport", "--orig-port-dst":
			if o.Filter.Proto < 0 || !hasPorts(uint8(o.Filter.Proto)) {
				err = errorf("unknown option `%s'", name)
				break
			}
			var v string
			if v, err = arg(); err != nil {
				break
			}
			port := int(uint16(atoi(v)))
			if name == "--sport" || name == "--orig-port-src" {
				o.Filter.SPort = port
			} else {
				o.Filter.DPort = port
			}
		case "--state":
			if o.Filter.Proto != ProtoTCP {
				err = errorf("unknown option `%s'", name)
				break
			}
			var v string
			if v, err = arg(); err != nil {
				break
			}
			o.Filter.State = ParseTCPState(v)
			if o.Filter.State < 0 {
				err = errorf("unknown TCP state `%s'", v)
			}
		default:
			if unsupported[name] {
				err = errorf("option `%s' is not supported by xfw", name)
			} else {
				err = errorf("unknown option `%s'", a)
			}
		}
		if err != nil {
			return o, err
		}
	}
	if o.Cmd == CmdNone && len(args) == 0 {
		o.Cmd = CmdHelp
		return o, nil
	}
	if bad := seen &^ legal[o.Cmd]; bad != 0 {
		for _, n := range optNames {
			if bad&n.bit != 0 {
				return o, errorf("Illegal option `--%s' with this command", n.name)
			}
		}
	}
	return o, nil
}

// setFamily records the family an address implies.
func (f *Filter) setFamily(a netip.Addr) error {
	fam := 4
	if a.Is6() {
		fam = 6
	}
	if f.Family != 0 && f.Family != fam {
		return errorf("mismatched address family")
	}
	f.Family = fam
	return nil
}

// parseAddr parses an address as conntrack does: inet_aton's IPv4 forms,
// else an IPv6 address, either optionally followed by /prefix-length (the
// address's host bits are ignored).
func parseAddr(s string) (netip.Prefix, error) {
	addr, bits := s, ""
	if k := strings.IndexByte(s, '/'); k >= 0 {
		addr, bits = s[:k], s[k+1:]
	}
	a, ok := inetAton(addr)
	if !ok {
		var err error
		if a, err = netip.ParseAddr(addr); err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Prefix{}, errorf("Invalid IP address `%s'", s)
		}
	}
	n := a.BitLen()
	if slash := len(addr) < len(s); slash {
		// Decimal; an empty length is 0 (conntrack 1.4.7 observed).
		v := 0
		for _, c := range []byte(bits) {
			if c < '0' || c > '9' || v > a.BitLen() {
				return netip.Prefix{}, errorf("Invalid netmask")
			}
			v = v*10 + int(c-'0')
		}
		if v > a.BitLen() {
			return netip.Prefix{}, errorf("Invalid netmask")
		}
		n = v
	}
	p, err := a.Prefix(n)
	if err != nil {
		return netip.Prefix{}, errorf("Invalid IP address `%s'", s)
	}
	return p, nil
}

// inetAton is glibc's inet_aton: one to four parts (decimal, 0 octal, 0x
// hex), the last filling the remaining bytes; trailing text after white
// space is ignored.
func inetAton(s string) (netip.Addr, bool) {
	if k := strings.IndexAny(s, " \t\n\v\f\r"); k >= 0 {
		s = s[:k]
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if p == "" || p[0] < '0' || p[0] > '9' {
			return netip.Addr{}, false
		}
		v, ok := strtoul(p)
		if !ok || v > 0xffffffff {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	last := vals[len(vals)-1]
	var x uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		x |= v << (24 - 8*i)
	}
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	x |= last
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), true
}

// ParseProto parses -p's argument as conntrack does: the name of one of
// its protocol extensions (any case), a number 0–255 (strtoul base 0), or
// an /etc/protocols name.
func ParseProto(s string) (int, error) {
	for _, p := range []uint8{ProtoTCP, ProtoUDP, ProtoUDPLite, ProtoICMP, ProtoICMPv6, ProtoSCTP, ProtoGRE, ProtoDCCP} {
		if strings.EqualFold(s, ProtoName(p)) {
			return int(p), nil
		}
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	if t != "" && t[0] != '-' && t[0] != '+' {
		if v, ok := strtoul(t); ok {
			if v <= 255 {
				return int(v), nil
			}
			return 0, errorf("`%s' unsupported protocol", s)
		}
	}
	if n, ok := iptables.LookupProtocol(s); ok {
		return n, nil
	}
	return 0, errorf("`%s' unsupported protocol", s)
}

// ParseTCPState returns the TCP state named s (exact case; LISTEN is the
// older name of SYN_SENT2's number), or -1.
func ParseTCPState(s string) int {
	if s == "LISTEN" {
		return 9
	}
	for i, n := range TCPStates {
		if n == s {
			return i
		}
	}
	return -1
}

// strtoul parses all of s as C's strtoul with base 0 does (0x hex, 0 octal,
// else decimal; no sign).
func strtoul(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, base, 64)
	return v, err == nil
}

// atoi is C's atoi: optional white space and sign, then the leading
// digits; 0 when there are none.
func atoi(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int64(c-'0')
		if v > 1<<40 {
			break
		}
	}
	if neg {
		v = -v
	}
	return v
}
