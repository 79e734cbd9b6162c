package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Printing the hashlimit match as libxt_hashlimit's print (iptables -L) and
// save (-S, iptables-save) functions of revision 3 do.

// hashLimitRates are print_rate's units of revision 3, longest first, with
// their period in 1/HashLimitScale seconds.
var hashLimitRates = []struct {
	name string
	mult uint64
}{
	{"day", ir.HashLimitScale * 24 * 60 * 60},
	{"hour", ir.HashLimitScale * 60 * 60},
	{"min", ir.HashLimitScale * 60},
	{"sec", ir.HashLimitScale},
}

// hashLimitRateString is print_rate: the period as " N/unit" and the
// unit in milliseconds (the default expiry it stands for).
func hashLimitRateString(period uint64) (string, uint64) {
	if period == 0 {
		return fmt.Sprintf(" %f", math.Inf(1)), 0
	}
	i := 1
	for ; i < len(hashLimitRates); i++ {
		m := hashLimitRates[i].mult
		if period > m || m/period < m%period {
			break
		}
	}
	u := hashLimitRates[i-1]
	return fmt.Sprintf(" %d/%s", u.mult/period, u.name), u.mult / ir.HashLimitScale * msPerSecond
}

// hashLimitUnits are print_bytes' units.
var hashLimitUnits = []struct {
	name   string
	thresh uint32
}{{"m", 1 << 20}, {"k", 1 << 10}, {"", 1}}

// hashLimitBytesString is print_bytes: the byte rate of cost avg and, with
// a burst, " PREFIXburst N" in bytes; and the default expiry in ms.
func hashLimitBytesString(avg, burst uint64, prefix string) (string, uint64) {
	var b strings.Builder
	r := hashLimitCostToBytes(avg)
	i := 0
	for ; i < len(hashLimitUnits)-1; i++ {
		t := hashLimitUnits[i].thresh
		// ~(thresh - 1) is a 32-bit mask: the high bits go.
		if r >= uint64(t) && hashLimitBytesToCost(r&uint64(^(t-1))) == avg {
			break
		}
	}
	fmt.Fprintf(&b, " %d%sb/s", r/uint64(hashLimitUnits[i].thresh), hashLimitUnits[i].name)
	if burst == 0 {
		return b.String(), hlByteExpire * msPerSecond
	}
	r *= burst
	for i = 0; i < len(hashLimitUnits)-1; i++ {
		if r >= uint64(hashLimitUnits[i].thresh) {
			break
		}
	}
	fmt.Fprintf(&b, " %sburst %d%sb", prefix, r/uint64(hashLimitUnits[i].thresh), hashLimitUnits[i].name)
	return b.String(), hlByteExpireBurst * msPerSecond
}

// hashLimitModeString is print_mode: the key's parts joined by sep.
func hashLimitModeString(mode uint32, sep string) string {
	var parts []string
	for _, p := range []struct {
		bit  uint32
		name string
	}{{ir.HashLimitSrcIP, "srcip"}, {ir.HashLimitSrcPort, "srcport"}, {ir.HashLimitDstIP, "dstip"}, {ir.HashLimitDstPort, "dstport"}} {
		if mode&p.bit != 0 {
			parts = append(parts, p.name)
		}
	}
	return " " + strings.Join(parts, sep)
}

// hashLimitText is hashlimit_mt_print (save false: iptables -L) or
// hashlimit_mt_save (save true) of family fam; opt names an option as the
// output spells it.
func hashLimitText(fam ir.Family, m *ir.HashLimitMatch, save bool) string {
	var b strings.Builder
	opt := func(name string) string {
		if save {
			return " --hashlimit-" + name
		}
		return " " + name
	}
	switch {
	case save && m.Mode&ir.HashLimitInvert != 0:
		b.WriteString(" --hashlimit-above")
	case save:
		b.WriteString(" --hashlimit-upto")
	case m.Mode&ir.HashLimitInvert != 0:
		b.WriteString(" limit: above")
	default:
		b.WriteString(" limit: up to")
	}
	var text string
	var quantum uint64
	if m.Mode&ir.HashLimitBytes != 0 {
		prefix := ""
		if save {
			prefix = "--hashlimit-"
		}
		text, quantum = hashLimitBytesString(m.Avg, m.Burst, prefix)
		b.WriteString(text)
	} else {
		period := m.Avg
		if !save && m.Interval != 0 {
			period *= uint64(m.Interval)
		}
		text, quantum = hashLimitRateString(period)
		b.WriteString(text)
		fmt.Fprintf(&b, "%s %d", opt("burst"), m.Burst)
	}
	if m.Mode&ir.HashLimitKeyBits != 0 {
		sep := "-"
		if save {
			sep = ","
		}
		b.WriteString(opt("mode") + hashLimitModeString(m.Mode, sep))
	}
	if save {
		b.WriteString(" --hashlimit-name " + m.Name)
	}
	writeHashLimitTable(&b, m, quantum, opt)
	dmask := uint8(fam.AddrBits())
	if m.SrcMask != dmask {
		fmt.Fprintf(&b, "%s %d", opt("srcmask"), m.SrcMask)
	}
	if m.DstMask != dmask {
		fmt.Fprintf(&b, "%s %d", opt("dstmask"), m.DstMask)
	}
	if m.Mode&ir.HashLimitRateMatch != 0 {
		b.WriteString(opt("rate-match"))
		if m.Interval != 1 {
			fmt.Fprintf(&b, "%s %d", opt("rate-interval"), m.Interval)
		}
	}
	return b.String()
}

// writeHashLimitTable prints the --hashlimit-htable-* options that differ
// from the defaults (the expiry's default is the rate's unit, quantum).
func writeHashLimitTable(b *strings.Builder, m *ir.HashLimitMatch, quantum uint64, opt func(string) string) {
	if m.Size != 0 {
		fmt.Fprintf(b, "%s %d", opt("htable-size"), m.Size)
	}
	if m.Max != 0 {
		fmt.Fprintf(b, "%s %d", opt("htable-max"), m.Max)
	}
	if m.GCInterval != hlDefaultGCInterval {
		fmt.Fprintf(b, "%s %d", opt("htable-gcinterval"), m.GCInterval)
	}
	if uint64(m.Expire) != quantum {
		fmt.Fprintf(b, "%s %d", opt("htable-expire"), m.Expire)
	}
}
