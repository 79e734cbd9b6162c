package ipset

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// headerField is one create option of a set's header: a name with a
// value, or a flag (Value "").
type headerField struct {
	Name, Value string
}

// headerFields lists a set's create options in ipset's order.
func headerFields(s *Set) []headerField {
	o := s.Options
	var f []headerField
	add := func(name, format string, args ...any) {
		f = append(f, headerField{name, fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Type.IsHash():
		add("family", "%s", o.Family)
		add("hashsize", "%d", o.HashSize)
		add("maxelem", "%d", o.MaxElem)
		if o.Netmask != 0 {
			add("netmask", "%d", o.Netmask)
		}
	case s.Type == BitmapPort:
		add("range", "%d-%d", o.PortFrom, o.PortTo)
	case s.Type == ListSet:
		add("size", "%d", o.Size)
	}
	if o.HasTimeout {
		add("timeout", "%d", o.Timeout)
	}
	if o.Counters {
		f = append(f, headerField{Name: "counters"})
	}
	if o.Comment {
		f = append(f, headerField{Name: "comment"})
	}
	if s.Type.IsHash() {
		add("bucketsize", "%d", o.BucketSize)
		add("initval", "0x%08x", o.InitVal)
	}
	return f
}

// header renders a set's create options as ipset's "Header:" line and
// save's create line show them.
func header(s *Set) string { return fieldsText(headerFields(s), false) }

// fieldsText renders fields as "name value" words separated by spaces,
// with a leading space when lead is set.
func fieldsText(fields []headerField, lead bool) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 || lead {
			b.WriteByte(' ')
		}
		b.WriteString(f.Name)
		if f.Value != "" {
			b.WriteString(" " + f.Value)
		}
	}
	return b.String()
}

// fieldsXML renders fields as XML elements ("<name>value</name>", or
// "<name/>" for a flag).
func fieldsXML(fields []headerField) string {
	var b strings.Builder
	for _, f := range fields {
		if f.Value == "" {
			fmt.Fprintf(&b, "<%s/>", f.Name)
		} else {
			fmt.Fprintf(&b, "<%s>%s</%s>", f.Name, f.Value, f.Name)
		}
	}
	return b.String()
}

// elemText renders a member as ipset prints it.
func elemText(s *Set, e Elem) string {
	ti := types[s.Type]
	switch s.Type {
	case ListSet:
		return e.SetName
	case BitmapPort:
		return strconv.Itoa(int(e.Port))
	}
	var b strings.Builder
	addr := e.Prefix.Addr().String()
	b.WriteString(addr)
	if ti.isNet && e.Prefix.Bits() != s.Options.Family.bits() {
		fmt.Fprintf(&b, "/%d", e.Prefix.Bits())
	}
	switch {
	case ti.hasPort:
		b.WriteByte(',')
		b.WriteString(portText(e.Proto, e.Port))
	case ti.hasIface:
		b.WriteByte(',')
		if e.Physdev {
			b.WriteString("physdev:")
		}
		b.WriteString(e.Iface)
	}
	return b.String()
}

// portText renders proto:port.
func portText(proto uint8, port uint16) string {
	switch proto {
	case ProtoICMP:
		return protocolName(proto) + ":" + icmpText(port, icmpTypes)
	case ProtoICMPv6:
		return protocolName(proto) + ":" + icmpText(port, icmp6Types)
	}
	return protocolName(proto) + ":" + strconv.Itoa(int(port))
}

// extensionFields lists a member's extensions in ipset's order, as
// headerFields does a set's options.
func extensionFields(s *Set, e *Entry, now time.Time) []headerField {
	o := s.Options
	var f []headerField
	if o.HasTimeout {
		f = append(f, headerField{"timeout", strconv.FormatInt(remaining(e, now), 10)})
	}
	if e.Nomatch {
		f = append(f, headerField{Name: "nomatch"})
	}
	if o.Counters {
		f = append(f, headerField{"packets", strconv.FormatUint(e.Packets, 10)},
			headerField{"bytes", strconv.FormatUint(e.Bytes, 10)})
	}
	if o.Comment && e.Comment != "" {
		f = append(f, headerField{"comment", "\"" + e.Comment + "\""})
	}
	return f
}

// entryText renders a member with its extensions.
func entryText(s *Set, e *Entry, now time.Time) string {
	return elemText(s, e.Elem) + fieldsText(extensionFields(s, e, now), true)
}

// sizeInMemory estimates the kernel's "Size in memory". The kernel's figure
// depends on its allocator and hash layout; this is a plausible number of
// the same magnitude (it matches an inet hash:ip without extensions).
func sizeInMemory(s *Set) int {
	per := 40
	o := s.Options
	if o.Family == Inet6 {
		per += 24
	}
	if o.HasTimeout {
		per += 8
	}
	if o.Counters {
		per += 16
	}
	if o.Comment {
		per += 8
	}
	switch s.Type {
	case BitmapPort:
		return 200 + int(o.PortTo-o.PortFrom+1)/8*(per/40)
	case ListSet:
		return 128 + 16*s.Len()
	}
	return 216 + per*s.Len()
}

// listOptions select list's output.
type listOptions struct {
	save, xml, terse, names bool
	members                 bool // print the members
}

// writeList renders sets as ipset list (or save) does.
func writeList(b *strings.Builder, sets []*Set, refs func(*Set) int, lo listOptions, now time.Time) {
	if lo.xml {
		writeXML(b, sets, refs, lo, now)
		return
	}
	for i, s := range sets {
		if lo.names {
			b.WriteString(s.Name)
			b.WriteByte('\n')
			continue
		}
		if lo.save {
			fmt.Fprintf(b, "create %s %s %s\n", s.Name, s.Type, header(s))
			if !lo.members {
				continue
			}
			for _, e := range s.Entries() {
				fmt.Fprintf(b, "add %s %s\n", s.Name, entryText(s, &e, now))
			}
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(b, "Name: %s\nType: %s\nRevision: %d\nHeader: %s\nSize in memory: %d\nReferences: %d\nNumber of entries: %d\n",
			s.Name, s.Type, s.Type.Revision(), header(s), sizeInMemory(s), refs(s), s.Len())
		if !lo.terse {
			b.WriteString("Members:\n")
		}
		if !lo.members {
			continue
		}
		for _, e := range s.Entries() {
			b.WriteString(entryText(s, &e, now))
			b.WriteByte('\n')
		}
	}
}

// writeXML renders sets as ipset -o xml does.
func writeXML(b *strings.Builder, sets []*Set, refs func(*Set) int, lo listOptions, now time.Time) {
	b.WriteString("<ipsets>\n")
	for _, s := range sets {
		if lo.names {
			fmt.Fprintf(b, "<ipset name=\"%s\"/>\n", s.Name)
			continue
		}
		fmt.Fprintf(b, "<ipset name=\"%s\">\n<type>%s</type>\n<revision>%d</revision>\n<header>%s\n",
			s.Name, s.Type, s.Type.Revision(), headerXML(s))
		fmt.Fprintf(b, "<memsize>%d</memsize>\n<references>%d</references>\n<numentries>%d</numentries>\n</header>\n",
			sizeInMemory(s), refs(s), s.Len())
		if lo.members {
			b.WriteString("<members>\n")
			for _, e := range s.Entries() {
				fmt.Fprintf(b, "<member><elem>%s</elem>%s</member>\n", elemText(s, e.Elem), extensionsXML(s, &e, now))
			}
			b.WriteString("</members>\n")
		}
		b.WriteString("</ipset>\n")
	}
	b.WriteString("</ipsets>\n")
}

// headerXML is header in XML elements.
func headerXML(s *Set) string { return fieldsXML(headerFields(s)) }

// extensionsXML is a member's extensions in XML elements.
func extensionsXML(s *Set, e *Entry, now time.Time) string {
	return fieldsXML(extensionFields(s, e, now))
}

// remaining is the whole seconds left of an entry's timeout.
func remaining(e *Entry, now time.Time) int64 {
	if e.Expires.IsZero() {
		return 0
	}
	return max(int64(e.Expires.Sub(now)/time.Second), 0)
}
