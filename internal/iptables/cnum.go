package iptables

import "math"

// This file reproduces the C library's number parsing as iptables uses it:
// strtoul (with base detection, leading blanks, signs and wrap-around),
// libxtables' range-checked wrappers, and sscanf("%llu"). Accepting exactly
// the spellings iptables accepts ("0x16" or "026" for port 22, " 5", "+5")
// requires the same rules.

// Field limits, address sizes and number bases used by the parsers.
const (
	maxUint8    = 0xff   // protocol, ICMP type and code, TTL and hop limit fields
	maxUint16   = 0xffff // port and packet length fields
	ipv4Bits    = 32     // bits in an IPv4 address
	ipv6Bits    = 128    // bits in an IPv6 address
	ipv4Len     = 4      // bytes in an IPv4 address
	ipv6Len     = 16     // bytes in an IPv6 address
	ipv6Words   = 8      // 16-bit groups in an IPv6 address
	decimal     = 10
	hexadecimal = 16
)

// isCSpace reports whether c is a blank for isspace() in the C locale.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// digitVal returns the value of c as a digit in bases up to 36, or 99.
func digitVal(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 99
}

// cStrtoul is glibc's strtoul(s, &end, base) on a 64-bit system. It returns
// the value, the number of bytes consumed (0 when no conversion was
// performed, even if blanks or a sign were skipped) and whether the value
// overflowed (errno ERANGE; the value is then math.MaxUint64).
func cStrtoul(s string, base int) (v uint64, n int, overflow bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	hasHexPrefix := i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X')
	if base == 0 {
		switch {
		case hasHexPrefix:
			base = hexadecimal
		case i < len(s) && s[i] == '0':
			base = 8 // octal
		default:
			base = decimal
		}
	}
	start := i
	if base == hexadecimal && hasHexPrefix {
		if i+2 < len(s) && digitVal(s[i+2]) < hexadecimal {
			i += 2
			start = i
		} else {
			// "0x" without hex digits converts the "0" only.
			return 0, i + 1, false
		}
	}
	for i < len(s) {
		d := digitVal(s[i])
		if d >= uint64(base) {
			break
		}
		if !overflow {
			if v > (math.MaxUint64-d)/uint64(base) {
				overflow = true
			} else {
				v = v*uint64(base) + d
			}
		}
		i++
	}
	if i == start {
		return 0, 0, false
	}
	if overflow {
		return math.MaxUint64, i, true
	}
	if neg {
		v = -v
	}
	return v, i, false
}

// xtStrtoul is libxtables' xtables_strtoul_base: a non-negative number in
// [min, max] (max 0 meaning no upper limit). When whole is set the number
// must span the entire string, as when iptables passes a NULL end pointer;
// otherwise end is the index after the number.
func xtStrtoul(s string, base int, min, max uint64, whole bool) (v uint64, end int, ok bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && s[i] == '-' {
		return 0, 0, false
	}
	v, n, overflow := cStrtoul(s, base)
	if n == 0 || overflow || v < min || (max != 0 && v > max) {
		return 0, 0, false
	}
	if whole && n != len(s) {
		return 0, 0, false
	}
	return v, n, true
}

// xtStrtoui is xtables_strtoui(s, NULL, &v, min, max): the whole string is
// a number in base 0 (decimal, 0x hex or 0 octal) within [min, max].
func xtStrtoui(s string, min, max uint64) (uint64, bool) {
	v, _, ok := xtStrtoul(s, 0, min, max, true)
	return v, ok
}

// xtStrtouiPrefix is xtables_strtoui(s, &end, &v, min, max): a number at the
// start of s; end is the index after it.
func xtStrtouiPrefix(s string, min, max uint64) (v uint64, end int, ok bool) {
	return xtStrtoul(s, 0, min, max, false)
}

// scanULL is sscanf(s, "%llu", &v) == 1.
func scanULL(s string) (uint64, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	v, n, _ := cStrtoul(s[i:], decimal)
	return v, n > 0
}
