package ipset

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
)

// Defaults of the kernel's set types.
const (
	defaultHashSize   = 1024
	minHashSize       = 64
	defaultMaxElem    = 65536
	defaultBucketSize = 12
	defaultListSize   = 8
	minListSize       = 4
	maxTimeout        = 2147483 // UINT_MAX/1000, as ipset checks it
	maxNameLen        = 31
)

// typeAliases are the type names of ipset 6's predecessors ipset still takes.
var typeAliases = map[string]string{
	"iphash": "hash:ip", "nethash": "hash:net", "ipporthash": "hash:ip,port",
	"portmap": "bitmap:port", "setlist": "list:set",
}

// parseCreate parses "NAME TYPE [options]" into a new set.
func parseCreate(args []string) (*Set, *Error) {
	name, typeName := args[0], args[1]
	if a, ok := typeAliases[typeName]; ok {
		typeName = a
	}
	t, ok := parseType(typeName)
	if !ok {
		if slices.Contains(knownUnsupported, typeName) {
			return nil, kernelErr(msgTypeNotSupported)
		}
		return nil, syntaxErr("typename '%s' is unknown", args[1])
	}
	s := &Set{Name: name, Type: t}
	o := &s.Options
	setCreateDefaults(o, t)
	hasRange, err := parseCreateOptions(o, t, args[2:])
	if err != nil {
		return nil, err
	}
	if err := checkNetmask(o); err != nil {
		return nil, err
	}
	if t == BitmapPort && !hasRange {
		return nil, usageErr("Mandatory option `range' is missing")
	}
	normalizeCreate(o, t)
	return s, nil
}

// setCreateDefaults sets the options of a new set of type t that have a
// default other than zero.
func setCreateDefaults(o *Options, t Type) {
	if t.IsHash() {
		o.Family, o.HashSize, o.MaxElem, o.BucketSize = Inet, defaultHashSize, defaultMaxElem, defaultBucketSize
		o.InitVal = rand.Uint32()
	}
	if t == ListSet {
		o.Size = defaultListSize
	}
}

// parseCreateOptions parses create's options into o and reports whether
// they gave a range.
func parseCreateOptions(o *Options, t Type, opts []string) (bool, *Error) {
	hasRange := false
	seen := map[string]bool{}
	for i := 0; i < len(opts); i++ {
		key := opts[i]
		allowed := createOptionAllowed(t, key)
		if !allowed {
			return false, usageErr("Unknown argument: `%s'", key)
		}
		if key != "counters" && key != "comment" && key != "forceadd" && key != "-4" && key != "-6" {
			if seen[key] {
				return false, syntaxErr("%s already specified", key)
			}
			seen[key] = true
		}
		isFlag, err := createFlag(o, key, seen)
		if err != nil {
			return false, err
		}
		if isFlag {
			continue
		}
		if i+1 >= len(opts) {
			return false, usageErr("Missing mandatory argument of option `%s'", key)
		}
		i++
		isRange, err := createValue(o, key, opts[i])
		if err != nil {
			return false, err
		}
		hasRange = hasRange || isRange
	}
	return hasRange, nil
}

// createFlag sets the create option key when it takes no argument and
// reports whether it was one.
func createFlag(o *Options, key string, seen map[string]bool) (bool, *Error) {
	switch key {
	case "-4", "-6":
		if seen["family"] {
			return true, syntaxErr("%s already specified", key)
		}
		seen["family"] = true
		o.Family = Inet
		if key == "-6" {
			o.Family = Inet6
		}
	case "counters":
		o.Counters = true
	case "comment":
		o.Comment = true
	case "forceadd":
		o.ForceAdd = true
	default:
		return false, nil
	}
	return true, nil
}

// createValue sets the create option key to val and reports whether it
// was the range.
func createValue(o *Options, key, val string) (bool, *Error) {
	var err *Error
	var n uint64
	switch key {
	case "family":
		switch val {
		case "inet", "ipv4", "-4":
			o.Family = Inet
		case "inet6", "ipv6", "-6":
			o.Family = Inet6
		default:
			return false, syntaxErr("unknown inet family %s", val)
		}
	case "hashsize":
		n, err = parseUint(val, 0, 1<<32-1)
		o.HashSize = uint32(n)
	case "maxelem":
		n, err = parseUint(val, 0, 1<<32-1)
		o.MaxElem = uint32(n)
	case "bucketsize":
		n, err = parseUint(val, 0, 255)
		o.BucketSize = uint8(n)
	case "initval":
		n, err = parseUint(val, 0, 1<<32-1)
		o.InitVal = uint32(n)
	case "timeout":
		n, err = parseUint(val, 0, maxTimeout)
		o.HasTimeout, o.Timeout = true, uint32(n)
	case "size":
		n, err = parseUint(val, 0, 1<<32-1)
		o.Size = uint32(n)
	case "netmask":
		// Checked against the family by checkNetmask, once it is known.
		n, err = parseUint(val, 0, 255)
		o.Netmask = uint8(n)
		if err == nil && n == 0 {
			o.Netmask = 255
		}
	case "range":
		if err := parsePortRangeOption(o, val); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, err
}

// parsePortRangeOption parses bitmap:port's "range FROM-TO".
func parsePortRangeOption(o *Options, val string) *Error {
	from, to, ok := strings.Cut(val, "-")
	if !ok {
		return usageErr("Mandatory option `to' is missing")
	}
	a, e := parsePort(from, "tcp", false)
	if e != nil {
		return e
	}
	b := a
	if to != "" {
		if b, e = parsePort(to, "tcp", false); e != nil {
			return e
		}
	}
	if b < a {
		a, b = b, a
	}
	o.PortFrom, o.PortTo = a, b
	return nil
}

// checkNetmask checks a netmask option against the set's family (255
// stands for netmask 0) and drops one that covers the whole address.
func checkNetmask(o *Options) *Error {
	if o.Netmask != 0 {
		max := o.Family.bits()
		if o.Netmask > uint8(max) {
			v := int(o.Netmask)
			if o.Netmask == 255 {
				v = 0
			}
			return plainSyntaxErr("Syntax error: '%d' is out of range 1-%d\nSyntax error: netmask is out of the inclusive range of 1-%d", v, max, max)
		}
		if int(o.Netmask) == max {
			o.Netmask = 0
		}
	}
	return nil
}

// normalizeCreate rounds and bounds the sizes as the kernel does.
func normalizeCreate(o *Options, t Type) {
	if t.IsHash() {
		o.HashSize = roundHashSize(o.HashSize)
		if o.BucketSize < 2 {
			o.BucketSize = 2
		}
		if o.BucketSize > defaultBucketSize {
			o.BucketSize = defaultBucketSize
		}
		if o.BucketSize%2 == 1 {
			o.BucketSize++
		}
	}
	if t == ListSet && o.Size < minListSize {
		o.Size = minListSize
	}
}

// createOptionAllowed reports whether the type takes the create option.
func createOptionAllowed(t Type, key string) bool {
	switch key {
	case "timeout", "counters", "comment":
		return true
	case "family", "-4", "-6", "hashsize", "maxelem", "bucketsize", "initval", "forceadd":
		return t.IsHash()
	case "netmask":
		return t == HashIP
	case "range":
		return t == BitmapPort
	case "size":
		return t == ListSet
	}
	return false
}

// roundHashSize rounds up to a power of two, at least 64, as the kernel does.
func roundHashSize(n uint32) uint32 {
	if n < minHashSize {
		return minHashSize
	}
	if n&(n-1) == 0 {
		return n
	}
	if n > 1<<31 {
		return 1 << 31
	}
	return 1 << (32 - bits.LeadingZeros32(n))
}

// sameCreate reports whether two sets were created alike, so that
// create -exist of the second is not an error.
func sameCreate(a, b *Set) bool {
	if a.Type != b.Type {
		return false
	}
	// The kernel ignores what a resize changes and the hash parameters.
	x, y := a.Options, b.Options
	x.InitVal, y.InitVal = 0, 0
	x.BucketSize, y.BucketSize = 0, 0
	x.HashSize, y.HashSize = 0, 0
	x.ForceAdd, y.ForceAdd = false, false
	// The kernel compares the type's family, which is the same for both
	// families of a hash type.
	x.Family, y.Family = 0, 0
	return x == y
}
