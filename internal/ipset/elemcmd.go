package ipset

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// elemOp is a parsed add, del or test: the elements the argument stands
// for (ranges expanded) and the entry options given.
type elemOp struct {
	kind    cmdKind
	setName string
	text    string // the element as written (test's messages)
	elems   []Elem
	full    bool // expansion was cut at the set's maxelem: adding must fail

	timeout        *uint32
	packets, bytes *uint64
	comment        *string
	nomatch        bool
	before, after  string // list:set position
	lineno         int
	exist          bool
	// deferred is an error the kernel reports for the element after it
	// checked the extensions (an invalid prefix length).
	deferred *Error
}

// parseElemOp parses "SET ELEMENT [options]" for add, del and test against
// the set s.
func parseElemOp(kind cmdKind, s *Set, args []string) (*elemOp, *Error) {
	op := &elemOp{kind: kind, setName: s.Name, text: testText(s, args[1])}
	args, err := listSetPosition(op, s, args)
	if err != nil {
		return nil, err
	}
	elems, full, err := parseOpElement(kind, s, args[1])
	if err != nil && err.kind == errKernel {
		op.deferred, err = err, nil
	}
	if err != nil {
		err.Msg = strings.ReplaceAll(err.Msg, "%CMD%", commandName(kind))
		return nil, err
	}
	if kind == cmdTest {
		if err := checkTestRange(s, args[1]); err != nil {
			err.noLine = true
			return nil, err
		}
	}
	op.elems, op.full = elems, full
	if err := parseElemOptions(op, s.Type, kind, args[2:]); err != nil {
		return nil, err
	}
	return op, nil
}

// listSetPosition rewrites a list:set element NAME,before|after,REF as
// NAME before|after REF, and gives op the text ipset prints for it.
func listSetPosition(op *elemOp, s *Set, args []string) ([]string, *Error) {
	if s.Type == ListSet && strings.Contains(args[1], ",") {
		// NAME,before|after,REF is NAME before|after REF.
		parts := strings.Split(args[1], ",")
		if len(parts) != 3 || (parts[1] != "before" && parts[1] != "after") {
			return nil, plainSyntaxErr("you must specify elements as setname,[before|after],setname")
		}
		args = append([]string{args[0], parts[0], parts[1], parts[2]}, args[2:]...)
	}
	if s.Type == ListSet && len(args) >= 4 && (args[2] == "before" || args[2] == "after") {
		// ipset 7.17 prints "after" for both.
		op.text = args[1] + " after " + args[3]
	}
	return args, nil
}

// parseOpElement parses the element of an add, del or test (parseElement,
// but a test of hash:ip takes the address written).
func parseOpElement(kind cmdKind, s *Set, text string) ([]Elem, bool, *Error) {
	elems, full, err := parseElement(s, text)
	if (err == nil || err.kind == errKernel) && kind == cmdTest && s.Type == HashIP {
		// hash:ip tests the address written (netmask-ed), ignoring a
		// prefix length or range end.
		if r, perr := parseAddrPart(strings.Split(text, ",")[0], s.Options.Family); perr == nil {
			mask := s.Options.Family.bits()
			if s.Options.Netmask != 0 {
				mask = int(s.Options.Netmask)
			}
			p, _ := r.from.Prefix(mask)
			elems, err = []Elem{{Prefix: p}}, nil
		}
	}
	return elems, full, err
}

// parseElemOptions parses the entry options of an add, del or test of a
// set of type t into op.
func parseElemOptions(op *elemOp, t Type, kind cmdKind, opts []string) *Error {
	seen := map[string]bool{}
	for i := 0; i < len(opts); i++ {
		key := opts[i]
		if !elemOptionAllowed(t, kind, key) {
			return usageErr("Unknown argument: `%s'", key)
		}
		if key != "nomatch" {
			slot := key
			if key == "after" {
				slot = "before" // one reference attribute for both
			}
			if seen[slot] {
				return syntaxErr("%s already specified", key)
			}
			seen[slot] = true
		}
		if key == "nomatch" {
			op.nomatch = true
			continue
		}
		if i+1 >= len(opts) {
			return usageErr("Missing mandatory argument of option `%s'", key)
		}
		i++
		if err := elemOptionValue(op, key, opts[i]); err != nil {
			return err
		}
	}
	return nil
}

// elemOptionValue sets entry option key to val.
func elemOptionValue(op *elemOp, key, val string) *Error {
	switch key {
	case "timeout":
		n, err := parseUint(val, 0, maxTimeout)
		if err != nil {
			return err
		}
		t := uint32(n)
		op.timeout = &t
	case "packets", "bytes":
		n, err := parseUint(val, 0, 1<<64-1)
		if err != nil {
			return err
		}
		if key == "packets" {
			op.packets = &n
		} else {
			op.bytes = &n
		}
	case "comment":
		if strings.Contains(val, `"`) {
			return syntaxErr(`" character is not permitted in comments`)
		}
		if len(val) > 255 {
			val = val[:255]
		}
		op.comment = &val
	case "before", "after":
		if len(val) > maxNameLen {
			return syntaxErr("setname '%s' is longer than 31 characters", val)
		}
		if key == "before" {
			op.before = val
		} else {
			op.after = val
		}
	}
	return nil
}

// elemOptionAllowed reports whether an add/del/test of the type takes the
// option.
func elemOptionAllowed(t Type, kind cmdKind, key string) bool {
	switch key {
	case "timeout", "packets", "bytes", "comment":
		return kind == cmdAdd
	case "nomatch":
		return types[t].isNet && kind == cmdAdd
	case "before", "after":
		return t == ListSet
	}
	return false
}

// parseElement parses an element of set s into the members it stands for.
func parseElement(s *Set, text string) ([]Elem, bool, *Error) {
	ti := types[s.Type]
	fam := s.Options.Family
	limit := int(s.Options.MaxElem)
	switch s.Type {
	case ListSet:
		if name, _, ok := strings.Cut(text, ","); ok {
			text = name
		}
		if len(text) > maxNameLen {
			return nil, false, syntaxErr("setname '%s' is longer than 31 characters", text)
		}
		return []Elem{{SetName: text}}, false, nil
	case BitmapPort:
		pr, err := parseBitmapPort(text)
		if err != nil {
			return nil, false, err
		}
		var out []Elem
		for p := uint32(pr.from); p <= uint32(pr.to); p++ {
			out = append(out, Elem{Port: uint16(p)})
		}
		return out, false, nil
	}
	addrText, second, hasSecond := strings.Cut(text, ",")
	if (ti.hasPort || ti.hasIface) && (!hasSecond || second == "") {
		return nil, false, syntaxErr("Second element is missing from %s.", text)
	}
	if (ti.hasPort || ti.hasIface) && strings.Contains(second, ",") {
		return nil, false, syntaxErr("Two elem separators in %s, but settype %s supports one.", text, s.Type)
	}
	if !ti.hasPort && !ti.hasIface && hasSecond {
		return nil, false, syntaxErr("Elem separator in %s, but settype %s supports none.", text, s.Type)
	}
	if fam == Inet6 {
		if err := checkIPv6Form(s, addrText); err != nil {
			return nil, false, err
		}
	}
	r, err := parseAddrPart(addrText, fam)
	if err != nil {
		if ti.isNet {
			err.Msg = strings.Replace(err.Msg, "%RANGE6%", "IP address or IP/cidr must be specified", 1)
		} else {
			err.Msg = strings.Replace(err.Msg, "%RANGE6%", "plain IP address must be supplied", 1)
		}
		return nil, false, err
	}
	var prefixes []netip.Prefix
	if ti.isNet {
		prefixes, err = netBlocks(r, fam)
	} else {
		if fam == Inet6 && r.hasCIDR && r.bits != 128 {
			return nil, false, syntaxErr("plain IP address must be supplied: %s", addrText)
		}
		prefixes, err = ipBlocks(r, fam, s.Options.Netmask, limit)
	}
	if err != nil {
		return nil, false, err
	}
	var out []Elem
	switch {
	case ti.hasPort:
		pr, err := parsePortPart(second, fam)
		if err != nil {
			return nil, false, err
		}
		for _, p := range prefixes {
			for port := uint32(pr.from); port <= uint32(pr.to); port++ {
				out = append(out, Elem{Prefix: p, Proto: pr.proto, Port: uint16(port)})
				if len(out) > limit {
					return out, true, nil
				}
			}
		}
	case ti.hasIface:
		iface, physdev := second, false
		if name, ok := strings.CutPrefix(second, "physdev:"); ok {
			iface, physdev = name, true
		}
		if len(iface) > 15 {
			return nil, false, syntaxErr("interface name '%s' is longer than 15 characters", iface)
		}
		for _, p := range prefixes {
			out = append(out, Elem{Prefix: p, Iface: iface, Physdev: physdev})
		}
	default:
		for _, p := range prefixes {
			out = append(out, Elem{Prefix: p})
		}
	}
	return out, len(out) > limit, nil
}

// checkIPv6Form rejects ranges (and prefixes in the ip types) of IPv6
// elements before the address is parsed, as ipset does.
func checkIPv6Form(s *Set, addrText string) *Error {
	host, cidr, hasCIDR := strings.Cut(addrText, "/")
	msg := "plain IP address must be supplied"
	if types[s.Type].isNet {
		msg = "IP address or IP/cidr must be specified"
	}
	if strings.Contains(host, "-") && host[0] != '-' {
		return syntaxErr("%s: %s", msg, addrText)
	}
	if hasCIDR && !types[s.Type].isNet && cidr != "" {
		if n, err := parseUint(cidr, 0, 128); err != nil {
			return err
		} else if n != 128 {
			return syntaxErr("%s: %s", msg, addrText)
		}
	}
	return nil
}

// parseBitmapPort parses a bitmap:port element: [proto:]port[-port].
func parseBitmapPort(text string) (portRange, *Error) {
	if strings.Contains(text, ",") {
		return portRange{}, syntaxErr("Elem separator in %s, but settype bitmap:port supports none.", text)
	}
	proto := "tcp"
	if p, port, ok := strings.Cut(text, ":"); ok && p != "" && port != "" {
		if _, known := protocolNumber(p); !known {
			return portRange{}, syntaxErr("cannot parse '%s' as a protocol", p)
		}
		proto, text = p, port
	}
	return parsePortRange(text, proto)
}

// parsePortRange parses port[-port] (ipset reads the upper end first).
func parsePortRange(text, proto string) (portRange, *Error) {
	from, to, isRange := strings.Cut(text, "-")
	var b uint16
	var err *Error
	if isRange {
		if b, err = parsePort(to, proto, false); err != nil {
			return portRange{}, err
		}
	}
	a, err := parsePort(from, proto, false)
	if err != nil {
		return portRange{}, err
	}
	if !isRange {
		b = a
	}
	if b < a {
		a, b = b, a
	}
	return portRange{from: a, to: b}, nil
}

// applyAdd adds the op's members to s, stopping at the first failure as
// the kernel does (what was added before stays).
func (ss *Sets) applyAdd(op *elemOp, now time.Time) *Error {
	s := ss.Get(op.setName)
	if s == nil {
		return kernelErr(msgSetNotExist)
	}
	o := s.Options
	if s.Type == BitmapPort {
		for _, e := range op.elems {
			if e.Port < o.PortFrom || e.Port > o.PortTo {
				return kernelErr(msgOutOfRange)
			}
		}
	}
	if op.timeout != nil && !o.HasTimeout {
		return kernelErr(msgNoTimeout)
	}
	if (op.packets != nil || op.bytes != nil) && !o.Counters {
		return kernelErr(msgNoCounters)
	}
	if op.comment != nil && !o.Comment {
		return kernelErr(msgNoComment)
	}
	if op.deferred != nil {
		return op.deferred
	}
	if err := ss.checkListMembers(s, op); err != nil {
		return err
	}
	pos := -1
	if s.Type == ListSet {
		ref := op.before + op.after
		if ref != "" {
			i := indexOfMember(s, ref)
			if i < 0 {
				return kernelErr(msgRefNotInList)
			}
			pos = i
			if op.after != "" {
				pos = i + 1
			}
		}
	}
	for _, e := range op.elems {
		if nullElem(s, e) {
			return kernelErr(msgNullElem)
		}
		entry := Entry{Elem: e, Nomatch: op.nomatch}
		if o.HasTimeout {
			t := o.Timeout
			if op.timeout != nil {
				t = *op.timeout
			}
			if t > 0 {
				entry.Expires = now.Add(time.Duration(t) * time.Second)
			}
		}
		if op.comment != nil {
			entry.Comment = *op.comment
		}
		if old, exists := s.get(e); exists {
			if !op.exist {
				return kernelErr(msgElemExists)
			}
			entry.Packets, entry.Bytes = old.Packets, old.Bytes
		} else if s.Type.IsHash() && s.Len() >= s.capacity() {
			// The kernel does not enforce a list:set's size. forceadd
			// evicts only from the new entry's hash bucket, which is
			// usually empty: xfw reports the set full as the kernel
			// then does.
			return kernelErr(msgHashFull)
		}
		if op.packets != nil {
			entry.Packets = *op.packets
		}
		if op.bytes != nil {
			entry.Bytes = *op.bytes
		}
		s.put(entry, pos)
		if pos >= 0 {
			pos++
		}
		s.growHash()
	}
	if op.full {
		return kernelErr(msgHashFull)
	}
	return nil
}

// growHash doubles a hash set's hashsize as the kernel resizes it. The
// kernel grows when a bucket (bucketsize entries) overflows, which depends
// on its hash function and seed; xfw grows when the average bucket holds
// more than four entries, about the load at which an overflow of a
// 12-entry bucket becomes likely.
func (s *Set) growHash() {
	if !s.Type.IsHash() {
		return
	}
	for uint64(s.count) > 4*uint64(s.Options.HashSize) && s.Options.HashSize < 1<<31 {
		s.Options.HashSize *= 2
	}
}

// checkListMembers checks a list:set op's member and reference sets as the
// kernel does before it looks at the list.
func (ss *Sets) checkListMembers(s *Set, op *elemOp) *Error {
	if s.Type != ListSet {
		return nil
	}
	for _, e := range op.elems {
		m := ss.Get(e.SetName)
		if m == nil {
			return kernelErr(msgMemberNotExist)
		}
		if m.Type == ListSet {
			return kernelErr(msgListLoop)
		}
	}
	if ref := op.before + op.after; ref != "" && ss.Get(ref) == nil {
		return kernelErr(msgRefNotExist)
	}
	return nil
}

// nullElem reports whether e is hash:ip's all-zero address, which the
// kernel cannot store.
func nullElem(s *Set, e Elem) bool {
	return s.Type == HashIP && e.Prefix.Addr().IsUnspecified()
}

// listAdjacent reports whether name stands right before the member before
// (or right after the member after) in the list s.
func listAdjacent(s *Set, name, before, after string) bool {
	i := indexOfMember(s, name)
	if i < 0 {
		return false
	}
	if before != "" {
		return i+1 < len(s.order) && s.order[i+1].SetName == before
	}
	return i > 0 && s.order[i-1].SetName == after
}

// capacity is how many members the set may hold.
func (s *Set) capacity() int {
	switch s.Type {
	case ListSet:
		return int(s.Options.Size)
	case BitmapPort:
		return int(s.Options.PortTo-s.Options.PortFrom) + 1
	}
	return int(s.Options.MaxElem)
}

func indexOfMember(s *Set, name string) int {
	for i, e := range s.order {
		if e.SetName == name {
			return i
		}
	}
	return -1
}

// applyDel deletes the op's members from s, stopping at the first failure.
func (ss *Sets) applyDel(op *elemOp) *Error {
	s := ss.Get(op.setName)
	if s == nil {
		return kernelErr(msgSetNotExist)
	}
	if op.deferred != nil {
		return op.deferred
	}
	if err := ss.checkListMembers(s, op); err != nil {
		return err
	}
	if s.Type == BitmapPort {
		for _, e := range op.elems {
			if e.Port < s.Options.PortFrom || e.Port > s.Options.PortTo {
				return kernelErr(msgOutOfRange)
			}
		}
	}
	if ref := op.before + op.after; s.Type == ListSet && ref != "" {
		if len(op.elems) == 1 && !listAdjacent(s, op.elems[0].SetName, op.before, op.after) {
			return kernelErr(msgRefNotInList)
		}
	}
	for _, e := range op.elems {
		if nullElem(s, e) {
			return kernelErr(msgNullElem)
		}
		if _, ok := s.get(e); !ok {
			if op.exist {
				continue
			}
			return kernelErr(msgElemMissing)
		}
		s.remove(e)
	}
	return nil
}

// test reports whether the op's (first) element is in the set: exact for
// the ip types and for networks given with a prefix length, longest-prefix
// match for a host address in a net type (a nomatch entry answers no).
func (ss *Sets) test(op *elemOp) (bool, *Error) {
	s := ss.Get(op.setName)
	if s == nil {
		return false, kernelErr(msgSetNotExist)
	}
	if op.deferred == msgProtocolErr {
		return false, op.deferred
	}
	if op.deferred != nil {
		// A /0 prefix matches nothing in a test.
		return false, nil
	}
	if len(op.elems) == 0 {
		return false, nil
	}
	e := op.elems[0]
	if s.Type == ListSet {
		if ss.Get(e.SetName) == nil {
			return false, nil
		}
	}
	if s.Type == ListSet && op.before+op.after != "" {
		return listAdjacent(s, e.SetName, op.before, op.after), nil
	}
	if s.Type == BitmapPort && (e.Port < s.Options.PortFrom || e.Port > s.Options.PortTo) {
		return false, nil
	}
	return s.Contains(e), nil
}

// Contains reports whether e matches the set as the kernel's test (and a
// packet's match) decides: exact for the ip types, bitmap:port, list:set
// names and networks given with a shorter prefix; longest-prefix match for
// a full-length address in a net type, where a nomatch entry answers no.
func (s *Set) Contains(e Elem) bool {
	full := s.Options.Family.bits()
	if types[s.Type].isNet && e.Prefix.Bits() == full {
		for b := full; b >= 1; b-- {
			k := e
			k.Prefix, _ = e.Prefix.Addr().Prefix(b)
			if got, ok := s.get(k); ok {
				return !got.Nomatch
			}
		}
		return false
	}
	got, ok := s.get(e)
	return ok && !got.Nomatch
}

// testText is the element as test's messages show it: what ipset parsed,
// printed back (address normalised, proto:port, an interface without its
// physdev: prefix, as ipset 7.17 prints it).
func testText(s *Set, text string) string {
	ti := types[s.Type]
	if s.Type == BitmapPort {
		if _, port, ok := strings.Cut(text, ":"); ok {
			return port
		}
	}
	if !ti.hasIP {
		return text
	}
	addrText, second, hasSecond := strings.Cut(text, ",")
	r, err := parseAddrPart(addrText, s.Options.Family)
	if err != nil {
		return text
	}
	out := r.from.String()
	if r.isRange {
		out += "-" + r.to.String()
	}
	if r.hasCIDR && r.bits != s.Options.Family.bits() {
		out += "/" + strconv.Itoa(r.bits)
	}
	if !hasSecond {
		return out
	}
	switch {
	case ti.hasPort:
		if pr, err := parsePortPart(second, s.Options.Family); err == nil {
			return out + "," + portText(pr.proto, pr.from)
		}
	case ti.hasIface:
		return out + "," + strings.TrimPrefix(second, "physdev:")
	}
	return out + "," + second
}

// checkTestRange rejects ranges in test as ipset does.
func checkTestRange(s *Set, text string) *Error {
	ti := types[s.Type]
	if s.Type == BitmapPort && strings.Contains(text, "-") {
		return plainSyntaxErr("FROM-TO port range is not allowed in command test with set type bitmap:port and family unspec")
	}
	if !ti.hasIP {
		return nil
	}
	addrText, second, _ := strings.Cut(text, ",")
	r, err := parseAddrPart(addrText, s.Options.Family)
	if err != nil {
		return nil
	}
	if s.Type == HashIP {
		// hash:ip tests the first address of a range.
		return nil
	}
	where := fmt.Sprintf("in command test with set type %s and family %s", s.Type, s.Options.Family)
	if r.isRange {
		return plainSyntaxErr("FROM-TO IP range is not allowed %s", where)
	}
	if !ti.isNet && r.hasCIDR && r.bits != s.Options.Family.bits() {
		return plainSyntaxErr("IP/CIDR range is not allowed %s", where)
	}
	if ti.hasPort {
		if pr, err := parsePortPart(second, s.Options.Family); err == nil && pr.from != pr.to {
			return plainSyntaxErr("FROM-TO port range is not allowed %s", where)
		}
	}
	return nil
}
