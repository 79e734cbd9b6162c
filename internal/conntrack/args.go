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
	// State is a TCP state (index of TCPStates) or, with Proto SCTP, an
	// SCTP state (index of SCTPStates), or -1 (any).
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
// and --dport/--orig-port-dst, after -p gre, --srckey/--orig-key-src and
// --dstkey/--orig-key-dst, and after -p tcp, --state. Errors are *Error.
func ParseArgs(args []string) (Options, error) {
	p := &argParser{args: args, o: Options{Filter: NewFilter()}}
	for p.i = 0; p.i < len(args); p.i++ {
		a := args[p.i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue // getopt permutes stray words to the end; unused
		}
		p.splitOption(a)
		stop, err := p.option(a)
		if err != nil {
			return p.o, err
		}
		if stop {
			return p.o, nil
		}
	}
	err := p.finish()
	return p.o, err
}

// argParser is ParseArgs' state: the words, the one being read, the
// options parsed so far and the option bits seen.
type argParser struct {
	args []string
	i    int // the word being read
	o    Options
	seen int

	// The option being read: its name, and its attached argument, if any
	// ("--opt=val", "-oval").
	name, val string
	hasVal    bool
}

// splitOption splits option word a into its name and attached argument.
func (p *argParser) splitOption(a string) {
	name, val, hasVal := a, "", false
	if strings.HasPrefix(a, "--") {
		if k := strings.IndexByte(a, '='); k >= 0 {
			name, val, hasVal = a[:k], a[k+1:], true
		}
	} else if len(a) > 2 {
		name, val, hasVal = a[:2], a[2:], true
	}
	p.name, p.val, p.hasVal = name, val, hasVal
}

// option parses option word a (already split); stop is true for the
// options that end parsing (-h, -V).
func (p *argParser) option(a string) (stop bool, err error) {
	switch p.name {
	case "-L", "--dump":
		err = p.command(CmdList)
	case "-D", "--delete":
		err = p.command(CmdDelete)
	case "-F", "--flush":
		err = p.command(CmdFlush)
	case "-C", "--count":
		err = p.command(CmdCount)
	case "-h", "--help":
		p.o.Cmd = CmdHelp
		return true, nil
	case "-V", "--version":
		p.o.Cmd = CmdVersion
		return true, nil
	case "-s", "--src", "--orig-src", "-d", "--dst", "--orig-dst":
		err = p.addrOption()
	case "-f", "--family":
		err = p.familyOption()
	case "-p", "--protonum":
		err = p.protoOption()
	case "-o", "--output":
		err = p.outputOption()
	case "--sport", "--orig-port-src", "--dport", "--orig-port-dst":
		err = p.portOption()
	case "--srckey", "--orig-key-src", "--dstkey", "--orig-key-dst", "--reply-key-src", "--reply-key-dst":
		err = p.greKeyOption()
	case "--state":
		err = p.stateOption()
	default:
		if unsupported[p.name] {
			err = errorf("option `%s' is not supported by xfw", p.name)
		} else {
			err = errorf("unknown option `%s'", a)
		}
	}
	return false, err
}

// finish applies the checks that need the whole command line.
func (p *argParser) finish() error {
	if p.o.Cmd == CmdNone && len(p.args) == 0 {
		p.o.Cmd = CmdHelp
		return nil
	}
	if bad := p.seen &^ legal[p.o.Cmd]; bad != 0 {
		for _, n := range optNames {
			if bad&n.bit != 0 {
				return errorf("Illegal option `--%s' with this command", n.name)
			}
		}
	}
	return nil
}

// arg returns the option's argument (attached or the next word).
func (p *argParser) arg() (string, error) {
	if p.hasVal {
		return p.val, nil
	}
	if p.i+1 >= len(p.args) {
		return "", errorf("option `%s' requires an argument", p.name)
	}
	p.i++
	return p.args[p.i], nil
}

// command sets the command c and takes its optional table name.
func (p *argParser) command(c Command) error {
	if err := p.setCmd(c); err != nil {
		return err
	}
	return p.table()
}

func (p *argParser) setCmd(c Command) error {
	if p.o.Cmd != CmdNone {
		return errorf("Invalid commands combination")
	}
	p.o.Cmd = c
	return nil
}

// table takes a command's optional table name.
func (p *argParser) table() error {
	t := ""
	if p.hasVal {
		t = p.val
	} else if p.i+1 < len(p.args) && !strings.HasPrefix(p.args[p.i+1], "-") {
		p.i++
		t = p.args[p.i]
	}
	switch t {
	case "", "conntrack":
		return nil
	case "expect", "dying", "unconfirmed":
		return errorf("table `%s' is not supported by xfw", t)
	}
	return errorf("unknown type `%s'", t)
}

// addrOption parses -s and -d (and their long names).
func (p *argParser) addrOption() error {
	v, err := p.arg()
	if err != nil {
		return err
	}
	pfx, err := parseAddr(v)
	if err != nil {
		return err
	}
	if err := p.o.Filter.setFamily(pfx.Addr()); err != nil {
		return err
	}
	if p.name == "-s" || p.name == "--src" || p.name == "--orig-src" {
		p.o.Filter.Src, p.seen = pfx, p.seen|optSrc
	} else {
		p.o.Filter.Dst, p.seen = pfx, p.seen|optDst
	}
	return nil
}

// familyOption parses -f.
func (p *argParser) familyOption() error {
	v, err := p.arg()
	if err != nil {
		return err
	}
	fam := 0
	switch v {
	case "ipv4":
		fam = 4
	case "ipv6":
		fam = 6
	default:
		return errorf("`%s' unsupported protocol", v)
	}
	if p.o.Filter.Family != 0 && p.o.Filter.Family != fam {
		return errorf("mismatched address family")
	}
	p.o.Filter.Family, p.seen = fam, p.seen|optFamily
	return nil
}

// protoOption parses -p.
func (p *argParser) protoOption() error {
	v, err := p.arg()
	if err != nil {
		return err
	}
	proto, err := ParseProto(v)
	if err == nil {
		p.o.Filter.Proto, p.seen = proto, p.seen|optProto
	}
	return err
}

// outputOption parses -o; of its formats xfw has only "extended".
func (p *argParser) outputOption() error {
	v, err := p.arg()
	if err != nil {
		return err
	}
	for _, w := range strings.Split(v, ",") {
		switch w {
		case "extended":
			p.o.Format.Extended = true
		case "xml", "timestamp", "id", "ktimestamp", "labels", "userspace", "save":
			err = errorf("output `%s' is not supported by xfw", w)
		default:
			err = errorf("Bad parameter `%s'", w)
		}
	}
	p.seen |= optOutput
	return err
}

// portOption parses --sport and --dport (and their long names), known
// only after -p of a protocol with ports.
func (p *argParser) portOption() error {
	if p.o.Filter.Proto < 0 || !hasPorts(uint8(p.o.Filter.Proto)) {
		return errorf("unknown option `%s'", p.name)
	}
	v, err := p.arg()
	if err != nil {
		return err
	}
	port := int(uint16(atoi(v)))
	if p.name == "--sport" || p.name == "--orig-port-src" {
		p.o.Filter.SPort = port
	} else {
		p.o.Filter.DPort = port
	}
	return nil
}

// greKeyOption parses --srckey, --dstkey and --reply-key-src and
// --reply-key-dst (and the long names of the first two), known only after
// -p gre. Like conntrack 1.4.7 on Linux 6.18, it filters nothing: conntrack
// hands the keys to the kernel as the tuple's ports, and the kernel's dump
// filter (ctnetlink_filter_match_tuple) compares the ports of TCP and UDP
// only, so `conntrack -L -p gre --dstkey K` lists, and -D deletes, every
// GRE connection.
func (p *argParser) greKeyOption() error {
	if p.o.Filter.Proto != ProtoGRE {
		return errorf("unknown option `%s'", p.name)
	}
	_, err := p.arg()
	return err
}

// stateOption parses --state, known only after -p tcp or -p sctp (an
// SCTP state by the kernel's names; conntrack-tools 1.4.7 crashes on an
// unknown one, xfw says so).
func (p *argParser) stateOption() error {
	if p.o.Filter.Proto != ProtoTCP && p.o.Filter.Proto != ProtoSCTP {
		return errorf("unknown option `%s'", p.name)
	}
	v, err := p.arg()
	if err != nil {
		return err
	}
	if p.o.Filter.Proto == ProtoSCTP {
		p.o.Filter.State = ParseSCTPState(v)
		if p.o.Filter.State < 0 {
			return errorf("unknown SCTP state `%s'", v)
		}
		return nil
	}
	p.o.Filter.State = ParseTCPState(v)
	if p.o.Filter.State < 0 {
		return errorf("unknown TCP state `%s'", v)
	}
	return nil
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

// ParseSCTPState returns the SCTP state named s (exact case, the
// kernel's names: SCTPStates), or -1.
func ParseSCTPState(s string) int {
	for i, n := range SCTPStates {
		if n == s {
			return i
		}
	}
	return -1
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
