package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Address parsing and printing as libxtables does it. Host and network names
// (DNS, /etc/hosts, /etc/networks) are deliberately not resolved: a firewall
// ruleset must not depend on name service answers, so every name fails the
// way an unresolvable one does in iptables.

// numericBufLen is the size of the buffer __numeric_to_ipaddr copies its
// argument into; anything past the first numericBufLen-1 bytes is ignored.
const numericBufLen = 20

// numericToIPv4 is libxtables' __numeric_to_ipaddr: up to four dot-separated
// numbers in base 0 (so "010" is octal); a network address may omit trailing
// parts ("10.1" is 10.1.0.0), a mask may not.
func numericToIPv4(s string, isMask bool) ([ipv4Len]byte, bool) {
	var a [ipv4Len]byte
	if len(s) > numericBufLen-1 {
		s = s[:numericBufLen-1]
	}
	// The parts of strings.SplitN(s, ".", ipv4Len), without the slice.
	n := 0
	for {
		part, dot := s, -1
		if n < ipv4Len-1 {
			dot = strings.IndexByte(s, '.')
		}
		if dot >= 0 {
			part = s[:dot]
		}
		v, ok := xtStrtoui(part, 0, maxUint8)
		if !ok {
			return a, false
		}
		a[n] = byte(v)
		n++
		if dot < 0 {
			break
		}
		s = s[dot+1:]
	}
	if n < ipv4Len && isMask {
		return a, false
	}
	return a, true
}

// addrPair is one address and its netmask, both of the rule's family.
type addrPair struct {
	addr, mask netip.Addr
}

// parseIPv4Mask is libxtables' parse_ipmask for the text after "/".
func parseIPv4Mask(s string) ([ipv4Len]byte, *failure) {
	if m, ok := numericToIPv4(s, true); ok {
		return m, nil
	}
	bits, ok := xtStrtoui(s, 0, ipv4Bits)
	if !ok {
		return [ipv4Len]byte{}, paramErr("invalid mask `%s' specified", s)
	}
	return prefixMask4(int(bits)), nil
}

// prefixMask4 returns the IPv4 netmask of a prefix length.
func prefixMask4(bits int) [ipv4Len]byte {
	var m [ipv4Len]byte
	setPrefix(m[:], bits)
	return m
}

// prefixMask6 returns the IPv6 netmask of a prefix length.
func prefixMask6(bits int) [ipv6Len]byte {
	var m [ipv6Len]byte
	setPrefix(m[:], bits)
	return m
}

// setPrefix sets the first bits bits of m, most significant bit first.
func setPrefix(m []byte, bits int) {
	for i := 0; i < bits; i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
}

// maxHostLen is the longest list element xtables_ipparse_multiple accepts
// (its buffer is 256 bytes).
const maxHostLen = 255

// splitHostList splits a -s/-d argument at commas, skipping leading blanks
// of each element, as xtables_ipparse_multiple does.
func splitHostList(s string) ([]string, *failure) {
	var out []string
	for {
		i := 0
		for i < len(s) && isCSpace(s[i]) {
			i++
		}
		s = s[i:]
		elem, rest, more := strings.Cut(s, ",")
		if len(elem) > maxHostLen {
			return nil, paramErr("Hostname too long")
		}
		out = append(out, elem)
		if !more {
			return out, nil
		}
		s = rest
	}
}

// parseHostList parses a -s/-d argument: comma-separated addresses with
// optional /mask, each masked, as xtables_ipparse_multiple and
// xtables_ip6parse_multiple do.
// The addresses are appended to out.
func parseHostList(fam ir.Family, s string, out []addrPair) ([]addrPair, *failure) {
	if !strings.Contains(s, ",") {
		// One element, as splitHostList would cut it, without its slice.
		i := 0
		for i < len(s) && isCSpace(s[i]) {
			i++
		}
		elem := s[i:]
		if len(elem) > maxHostLen {
			return nil, paramErr("Hostname too long")
		}
		p, f := parseHostElem(fam, elem)
		if f != nil {
			return nil, f
		}
		return append(out, p), nil
	}
	elems, f := splitHostList(s)
	if f != nil {
		return nil, f
	}
	for _, e := range elems {
		p, f := parseHostElem(fam, e)
		if f != nil {
			return nil, f
		}
		out = append(out, p)
	}
	return out, nil
}

// parseHostElem parses one element of a -s/-d list: an address or name
// with an optional /mask.
func parseHostElem(fam ir.Family, e string) (addrPair, *failure) {
	host, maskText, hasMask := e, "", false
	if i := strings.LastIndexByte(e, '/'); i >= 0 {
		host, maskText, hasMask = e[:i], e[i+1:], true
	}
	if fam == ir.IPv6 {
		return parseHost6(host, maskText, hasMask)
	}
	return parseHost4(host, maskText, hasMask)
}

// parseHost4 parses one IPv4 list element.
func parseHost4(host, maskText string, hasMask bool) (addrPair, *failure) {
	mask := prefixMask4(ipv4Bits)
	if hasMask {
		m, f := parseIPv4Mask(maskText)
		if f != nil {
			return addrPair{}, f
		}
		mask = m
	}
	if mask == [ipv4Len]byte{} {
		// "if a null mask is given, the name is ignored, like in any/0"
		host = "0.0.0.0"
	}
	a, ok := numericToIPv4(host, false)
	if !ok {
		return addrPair{}, paramErr("host/network `%s' not found", host)
	}
	for i := range a {
		a[i] &= mask[i]
	}
	return addrPair{addr: netip.AddrFrom4(a), mask: netip.AddrFrom4(mask)}, nil
}

// parseHost6 parses one IPv6 list element.
func parseHost6(host, maskText string, hasMask bool) (addrPair, *failure) {
	mask := prefixMask6(ipv6Bits)
	if hasMask {
		if m, ok := inetPton6(maskText); ok {
			mask = m
		} else {
			bits, ok := xtStrtoui(maskText, 0, ipv6Bits)
			if !ok {
				return addrPair{}, paramErr("invalid mask `%s' specified", maskText)
			}
			mask = prefixMask6(int(bits))
		}
	}
	if mask == [ipv6Len]byte{} {
		host = "::"
	}
	a, ok := inetPton6(host)
	if !ok {
		return addrPair{}, paramErr("host/network `%s' not found", host)
	}
	for i := range a {
		a[i] &= mask[i]
	}
	return addrPair{addr: netip.AddrFrom16(a), mask: netip.AddrFrom16(mask)}, nil
}

// hexDigit returns the value of a hexadecimal digit, or -1.
func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// inetPton4 is glibc's strict inet_pton for IPv4: exactly four decimal
// numbers without leading zeros.
func inetPton4(s string) ([ipv4Len]byte, bool) {
	var out [ipv4Len]byte
	octets, sawDigit, cur := 0, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if sawDigit && out[cur] == 0 {
				return out, false
			}
			v := int(out[cur])*decimal + int(c-'0')
			if v > maxUint8 {
				return out, false
			}
			out[cur] = byte(v)
			if !sawDigit {
				octets++
				if octets > ipv4Len {
					return out, false
				}
				sawDigit = true
			}
		case c == '.' && sawDigit:
			if octets == ipv4Len {
				return out, false
			}
			cur++
			sawDigit = false
		default:
			return out, false
		}
	}
	return out, octets == ipv4Len
}

// inetPton6 is glibc's inet_pton(AF_INET6, …).
func inetPton6(s string) ([ipv6Len]byte, bool) {
	const maxGroupDigits = 4 // hex digits in a 16-bit group
	var tmp [ipv6Len]byte
	tp, colonp := 0, -1
	i := 0
	if s == "" {
		return tmp, false
	}
	if s[0] == ':' {
		i++
		if i == len(s) || s[i] != ':' {
			return tmp, false
		}
	}
	curtok := i
	seen, val := 0, 0
	for i < len(s) {
		c := s[i]
		i++
		if d := hexDigit(c); d >= 0 {
			if seen == maxGroupDigits {
				return tmp, false
			}
			val = val<<4 | d
			seen++
			continue
		}
		if c == ':' {
			curtok = i
			if seen == 0 {
				if colonp >= 0 {
					return tmp, false
				}
				colonp = tp
				continue
			} else if i == len(s) {
				return tmp, false
			}
			if tp+2 > ipv6Len {
				return tmp, false
			}
			tmp[tp], tmp[tp+1] = byte(val>>8), byte(val)
			tp += 2
			seen, val = 0, 0
			continue
		}
		if c == '.' && tp+ipv4Len <= ipv6Len {
			if v4, ok := inetPton4(s[curtok:]); ok {
				copy(tmp[tp:], v4[:])
				tp += ipv4Len
				seen = 0
				break
			}
		}
		return tmp, false
	}
	if seen > 0 {
		if tp+2 > ipv6Len {
			return tmp, false
		}
		tmp[tp], tmp[tp+1] = byte(val>>8), byte(val)
		tp += 2
	}
	if colonp >= 0 {
		if tp == ipv6Len {
			return tmp, false
		}
		n := tp - colonp
		var out [ipv6Len]byte
		copy(out[:colonp], tmp[:colonp])
		copy(out[ipv6Len-n:], tmp[colonp:tp])
		return out, true
	}
	return tmp, tp == ipv6Len
}

// inetNtop6 is glibc's inet_ntop(AF_INET6, …): the longest run of two or
// more zero words (the first on a tie) becomes "::", and IPv4-compatible and
// IPv4-mapped addresses end in dotted decimal.
func inetNtop6(a [ipv6Len]byte) string {
	var words [ipv6Words]int
	for i := range words {
		words[i] = int(a[2*i])<<8 | int(a[2*i+1])
	}
	bestBase, bestLen, curBase, curLen := -1, 0, -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase < 0 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase >= 0 {
			if bestBase < 0 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase >= 0 && (bestBase < 0 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase >= 0 && bestLen < 2 {
		bestBase = -1
	}
	var b strings.Builder
	for i := 0; i < ipv6Words; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		// An IPv4-compatible (::a.b.c.d) or IPv4-mapped (::ffff:a.b.c.d)
		// address prints its last 32 bits in dotted decimal.
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff)) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", a[12], a[13], a[14], a[15])
			break
		}
		b.WriteString(strconv.FormatInt(int64(words[i]), hexadecimal))
	}
	if bestBase >= 0 && bestBase+bestLen == ipv6Words {
		b.WriteByte(':')
	}
	return b.String()
}

// formatAddr prints an address as iptables does (inet_ntop).
func formatAddr(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	return inetNtop6(a.As16())
}

// maskBits returns the prefix length of a contiguous netmask, or -1.
func maskBits(m netip.Addr) int {
	// The address's bytes without a slice of the heap: every rule's
	// addresses go through here.
	a16 := m.As16()
	b := a16[:]
	if m.Is4() {
		b = b[12:]
	} else if !m.Is6() {
		b = nil // the zero Addr, as AsSlice
	}
	return maskBytesBits(b)
}

// maskBytesBits returns the prefix length of the contiguous netmask b (its
// bytes in network order), or -1.
func maskBytesBits(b []byte) int {
	n := 0
	for n < len(b)*8 && b[n/8]&(0x80>>(n%8)) != 0 {
		n++
	}
	for i := n; i < len(b)*8; i++ {
		if b[i/8]&(0x80>>(i%8)) != 0 {
			return -1
		}
	}
	return n
}

// formatMask prints a netmask as iptables-save does: the prefix length when
// contiguous, the mask itself otherwise.
func formatMask(m netip.Addr) string {
	if n := maskBits(m); n >= 0 {
		return strconv.Itoa(n)
	}
	return formatAddr(m)
}

// addrMatchOf builds the IR form of a parsed -s/-d element.
func addrMatchOf(p addrPair, invert bool) ir.AddrMatch {
	if !invert && maskBits(p.mask) == 0 {
		return ir.AddrMatch{}
	}
	return ir.AddrMatch{Set: true, Invert: invert, Addr: p.addr, Mask: p.mask}
}
