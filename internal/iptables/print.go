package iptables

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The printer: rules, chains and whole tables exactly as iptables-save and
// "iptables -S" print them.

// now is the clock used for the comment lines of Save (replaced in tests).
var now = time.Now

// FormatRule returns the line iptables-save prints for rule in chain, such as
// "-A INPUT -s 10.0.0.1/32 -p tcp -m tcp --dport 22 -j ACCEPT". With
// withCounters it is prefixed with "[packets:bytes] ", as "iptables-save -c"
// prints it.
func FormatRule(fam ir.Family, chain string, rule *ir.Rule, withCounters bool) string {
	var b strings.Builder
	if withCounters {
		fmt.Fprintf(&b, "[%d:%d] ", rule.Counters.Packets, rule.Counters.Bytes)
	}
	b.WriteString("-A ")
	b.WriteString(chain)
	writeRule(&b, fam, rule, false)
	return b.String()
}

// FormatRuleSpec returns the rule specification as iptables prints it after
// "-A CHAIN " (empty for a rule without conditions or target).
func FormatRuleSpec(fam ir.Family, rule *ir.Rule) string {
	var b strings.Builder
	writeRule(&b, fam, rule, false)
	return strings.TrimPrefix(b.String(), " ")
}

// writeRule appends the rule's options, each preceded by a space. With
// verboseCounters the counters are printed as " -c P B" before the target,
// as "iptables -S -v" does.
func writeRule(b *strings.Builder, fam ir.Family, r *ir.Rule, verboseCounters bool) {
	writeAddr(b, 's', r.Src)
	writeAddr(b, 'd', r.Dst)
	writeIface(b, 'i', r.InIface)
	writeIface(b, 'o', r.OutIface)
	if r.Proto.Num > 0 {
		if r.Proto.Invert {
			b.WriteString(" !")
		}
		b.WriteString(" -p ")
		b.WriteString(protoString(r.Proto.Num))
	}
	if fam == ir.IPv4 && r.Fragment.Set {
		if r.Fragment.Invert {
			b.WriteString(" !")
		}
		b.WriteString(" -f")
	}
	for _, m := range r.Matches {
		b.WriteString(" -m ")
		b.WriteString(m.ModuleName())
		writeMatch(b, fam, m)
	}
	if verboseCounters {
		fmt.Fprintf(b, " -c %d %d", r.Counters.Packets, r.Counters.Bytes)
	}
	writeTarget(b, fam, r.Target)
}

// writeAddr prints -s or -d (save_ipv4_addr / save_ipv6_addr).
func writeAddr(b *strings.Builder, letter byte, a ir.AddrMatch) {
	if !a.Set || !a.Mask.IsValid() {
		return
	}
	if !a.Invert && maskBits(a.Mask) == 0 {
		return
	}
	if a.Invert {
		b.WriteString(" !")
	}
	fmt.Fprintf(b, " -%c %s/%s", letter, formatAddr(a.Addr), formatMask(a.Mask))
}

// writeIface prints -i or -o.
func writeIface(b *strings.Builder, letter byte, m ir.IfaceMatch) {
	if !m.Set || m.Name == "" {
		return
	}
	if m.Name == "+" && !m.Invert {
		return
	}
	if m.Invert {
		b.WriteString(" !")
	}
	fmt.Fprintf(b, " -%c %s", letter, m.Name)
}

// writePorts prints a tcp/udp --sport or --dport option. Deviation from
// 1.8.9: an inverted full range is printed ("! --sport 0:65535"); 1.8.9
// dropped it, changing the rule's meaning.
func writePorts(b *strings.Builder, name string, p ir.PortMatch) {
	if p.Range == fullPortRange && !p.Invert {
		return
	}
	writeSCTPPorts(b, name, p)
}

// tcpFlagString prints a TCP flag set as libxt_tcp's print_tcpf does.
func tcpFlagString(v uint8) string {
	var names []string
	const printable = 6 // FIN … URG; ALL and NONE are never printed as parts
	for _, f := range tcpFlagNames[:printable] {
		if v&f.bits != 0 {
			names = append(names, f.name)
		}
	}
	if len(names) == 0 {
		return "NONE"
	}
	return strings.Join(names, ",")
}

// writeMatch prints a match's options (its save function).
func writeMatch(b *strings.Builder, fam ir.Family, m ir.Match) {
	switch m := m.(type) {
	case *ir.LimitMatch:
		writeLimit(b, m)
	case *ir.RecentMatch:
		writeRecent(b, fam, m)
	case *ir.HashLimitMatch:
		b.WriteString(hashLimitText(fam, m, true))
	case *ir.StringMatch:
		writeString(b, m)
	case *ir.U32Match:
		writeU32(b, m)
	case *ir.TimeMatch:
		writeTime(b, m)
	case *ir.ConnlimitMatch:
		writeConnlimit(b, m)
	case *ir.CPUMatch:
		writeCPU(b, m)
	case *ir.StatisticMatch:
		writeStatistic(b, m)
	case *ir.MarkMatch:
		writeMark(b, m)
	case *ir.ConnmarkMatch:
		writeConnmark(b, m)
	case *ir.OwnerMatch:
		writeOwner(b, m)
	case *ir.DevGroupMatch:
		b.WriteString(devGroupText(m, "--", false))
	case *ir.PhysdevMatch:
		b.WriteString(physdevText(m))
	case *ir.TCPMatch:
		writePorts(b, "sport", m.SrcPort)
		writePorts(b, "dport", m.DstPort)
		if m.Option.Kind != 0 || m.Option.Invert {
			if m.Option.Invert {
				b.WriteString(" !")
			}
			fmt.Fprintf(b, " --tcp-option %d", m.Option.Kind)
		}
		if m.Flags.Mask != 0 || m.Flags.Invert {
			if m.Flags.Invert {
				b.WriteString(" !")
			}
			fmt.Fprintf(b, " --tcp-flags %s %s", tcpFlagString(m.Flags.Mask), tcpFlagString(m.Flags.Comp))
		}
	case *ir.UDPMatch:
		writePorts(b, "sport", m.SrcPort)
		writePorts(b, "dport", m.DstPort)
	case *ir.MultiportMatch:
		writeMultiport(b, m)
	case *ir.ICMPMatch:
		writeICMP(b, m)
	case *ir.IPRangeMatch:
		writeRange(b, "src-range", m.Src)
		writeRange(b, "dst-range", m.Dst)
	case *ir.CommentMatch:
		b.WriteString(" --comment")
		writeSaveString(b, m.Text)
	case *ir.LengthMatch:
		if m.Invert {
			b.WriteString(" !")
		}
		if m.Min == m.Max {
			fmt.Fprintf(b, " --length %d", m.Min)
		} else {
			fmt.Fprintf(b, " --length %d:%d", m.Min, m.Max)
		}
	case *ir.TTLMatch:
		name := "ttl"
		if m.HL {
			name = "hl"
		}
		switch m.Op {
		case ir.CmpEq:
			fmt.Fprintf(b, " --%s-eq", name)
		case ir.CmpNe:
			fmt.Fprintf(b, " ! --%s-eq", name)
		case ir.CmpLt:
			fmt.Fprintf(b, " --%s-lt", name)
		case ir.CmpGt:
			fmt.Fprintf(b, " --%s-gt", name)
		}
		fmt.Fprintf(b, " %d", m.Value)
	case *ir.SetMatch:
		writeSetMatch(b, m, "--")
	case *ir.ConntrackMatch:
		writeConntrack(b, m, "--", true)
	case *ir.MACMatch:
		if m.Invert {
			b.WriteString(" !")
		}
		a := m.Addr
		fmt.Fprintf(b, " --mac-source %02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
	case *ir.AddrTypeMatch:
		writeAddrType(b, m)
	case *ir.PktTypeMatch:
		writePktType(b, m)
	case *ir.DSCPMatch:
		writeDSCP(b, m)
	case *ir.TOSMatch:
		writeTOS(b, m)
	case *ir.ECNMatch:
		writeECN(b, m)
	case *ir.TCPMSSMatch:
		writeTCPMSS(b, m)
	default:
		if !writeIP6Ext(b, m) {
			writeHdr4(b, m)
		}
	}
}

// writeMultiport prints the multiport match.
func writeMultiport(b *strings.Builder, m *ir.MultiportMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	switch m.Dir {
	case ir.MultiportSource:
		b.WriteString(" --sports ")
	case ir.MultiportDestination:
		b.WriteString(" --dports ")
	default:
		b.WriteString(" --ports ")
	}
	for i, p := range m.Ports {
		if i > 0 {
			b.WriteByte(',')
		}
		if p.First == p.Last {
			fmt.Fprintf(b, "%d", p.First)
		} else {
			fmt.Fprintf(b, "%d:%d", p.First, p.Last)
		}
	}
}

// writeICMP prints the icmp or icmp6 match. Deviation from 1.8.9: type 255
// with a code prints as "255/CODE" (later releases); only type 255 with all
// codes prints as "any".
func writeICMP(b *strings.Builder, m *ir.ICMPMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	allCodes := m.CodeMin == 0 && m.CodeMax == 0xff
	if m.V6 {
		fmt.Fprintf(b, " --icmpv6-type %d", m.Type)
	} else if m.Type == icmpAnyType && allCodes {
		b.WriteString(" --icmp-type any")
		return
	} else {
		fmt.Fprintf(b, " --icmp-type %d", m.Type)
	}
	if !allCodes {
		fmt.Fprintf(b, "/%d", m.CodeMin)
	}
}

// writeRange prints one direction of the iprange match.
func writeRange(b *strings.Builder, name string, r ir.AddrRange) {
	if !r.Set {
		return
	}
	if r.Invert {
		b.WriteString(" !")
	}
	fmt.Fprintf(b, " --%s %s-%s", name, formatAddr(r.From), formatAddr(r.To))
}

// saveSafeChars are the characters xtables_save_string prints unquoted.
const saveSafeChars = "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// writeSaveString is xtables_save_string: a space, then the value bare if it
// consists of safe characters only, else double-quoted with ", \ and '
// escaped by a backslash.
func writeSaveString(b *strings.Builder, v string) {
	safe := v != ""
	for i := 0; i < len(v) && safe; i++ {
		safe = strings.IndexByte(saveSafeChars, v[i]) >= 0
	}
	if safe {
		b.WriteString(" ")
		b.WriteString(v)
		return
	}
	b.WriteString(" \"")
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteString("\"")
}

// writeTarget prints -j/-g and the target's options.
func writeTarget(b *strings.Builder, fam ir.Family, t ir.Target) {
	if isNatTarget(t.Kind) {
		b.WriteString(" -j " + targetName(t) + natTargetText(fam, t, true))
		return
	}
	switch t.Kind {
	case ir.TargetAccept:
		b.WriteString(" -j ACCEPT")
	case ir.TargetDrop:
		b.WriteString(" -j DROP")
	case ir.TargetReturn:
		b.WriteString(" -j RETURN")
	case ir.TargetJump:
		b.WriteString(" -j " + t.Chain)
	case ir.TargetGoto:
		b.WriteString(" -g " + t.Chain)
	case ir.TargetReject:
		b.WriteString(" -j REJECT --reject-with " + t.RejectWith)
	case ir.TargetMark:
		b.WriteString(" -j MARK" + markTargetSave(t.Mark))
	case ir.TargetConnmark:
		b.WriteString(" -j CONNMARK" + connmarkTargetSave(t.Connmark))
	case ir.TargetTCPMSS, ir.TargetDSCP, ir.TargetTOS, ir.TargetTTL, ir.TargetHL,
		ir.TargetCTNotrack, ir.TargetNotrack:
		b.WriteString(mangleTargetSave(t))
	case ir.TargetNFLog:
		b.WriteString(" -j NFLOG" + nflogOptionsText(t.NFLog, "--"))
	case ir.TargetSet:
		b.WriteString(" -j SET" + setTargetText(t.Set, "--"))
	case ir.TargetLog:
		b.WriteString(" -j LOG")
		if t.Log == nil {
			return
		}
		if t.Log.Prefix != "" {
			b.WriteString(" --log-prefix")
			writeSaveString(b, t.Log.Prefix)
		}
		if t.Log.Level != DefaultLogLevel {
			fmt.Fprintf(b, " --log-level %d", t.Log.Level)
		}
		flags := []struct {
			bit  uint8
			name string
		}{
			{ir.LogFlagTCPSeq, "--log-tcp-sequence"},
			{ir.LogFlagTCPOpt, "--log-tcp-options"},
			{ir.LogFlagIPOpt, "--log-ip-options"},
			{ir.LogFlagUID, "--log-uid"},
			{ir.LogFlagMACDecode, "--log-macdecode"},
		}
		for _, f := range flags {
			if t.Log.Flags&f.bit != 0 {
				b.WriteString(" " + f.name)
			}
		}
	}
}

// OrderedChains returns the chains in the order iptables-save, iptables -S
// and this package's printers use (libiptc's order): the built-in chains in
// hook order, then the user-defined chains sorted by name (byte order).
// Restoring printed output therefore yields this order, whatever order the
// chains were created in.
func OrderedChains(rs *ir.Ruleset) []*ir.Chain {
	var builtins, user []*ir.Chain
	for _, name := range ir.TableBuiltins(rs.Table) {
		if c := rs.Chain(name); c != nil {
			builtins = append(builtins, c)
		}
	}
	for _, c := range rs.Chains {
		if !ir.IsTableBuiltin(rs.Table, c.Name) {
			user = append(user, c)
		}
	}
	sort.SliceStable(user, func(i, j int) bool { return user[i].Name < user[j].Name })
	return append(builtins, user...)
}

// ctimeLayout is C's ctime() format.
const ctimeLayout = "Mon Jan _2 15:04:05 2006"

// Save prints the filter table as iptables-save prints a table: comment
// lines naming xfw, "*filter", a ":CHAIN POLICY [packets:bytes]" line per
// chain, the rules (with "[packets:bytes] " prefixes when counters is set)
// and "COMMIT".
func Save(rs *ir.Ruleset, counters bool) string {
	var b strings.Builder
	stamp := now().Format(ctimeLayout)
	fmt.Fprintf(&b, "# Generated by xfw on %s\n", stamp)
	b.WriteString(SaveTable(rs, counters))
	fmt.Fprintf(&b, "# Completed on %s\n", stamp)
	return b.String()
}

// SaveAll prints every table of rs as iptables-save without -t does, each
// between its comment lines: the tables newest first and filter last, the
// order of the kernel's list of tables (a table registers at its head).
// table, when not "", prints only that table (iptables-save -t), empty if
// no command used it yet (iptables-save would create it).
func SaveAll(rs *ir.Ruleset, table string, counters bool) string {
	var b strings.Builder
	stamp := now().Format(ctimeLayout)
	tables := SaveOrder(rs)
	if table != "" {
		t := rs.TableByName(table)
		if t == nil {
			t = ir.NewTable(rs.Family, table)
		}
		tables = []*ir.Ruleset{t}
	}
	for _, t := range tables {
		fmt.Fprintf(&b, "# Generated by xfw on %s\n", stamp)
		b.WriteString(SaveTable(t, counters))
		fmt.Fprintf(&b, "# Completed on %s\n", stamp)
	}
	return b.String()
}

// SaveOrder returns the tables of rs in iptables-save's order: the other
// tables newest first, then filter.
func SaveOrder(rs *ir.Ruleset) []*ir.Ruleset {
	var out []*ir.Ruleset
	for i := len(rs.Tables) - 1; i >= 0; i-- {
		out = append(out, rs.Tables[i])
	}
	return append(out, rs)
}

// SaveTable is Save without the comment lines: from "*TABLE" to "COMMIT\n".
func SaveTable(rs *ir.Ruleset, counters bool) string {
	var b strings.Builder
	b.WriteString("*" + rs.Name() + "\n")
	chains := OrderedChains(rs)
	for _, c := range chains {
		if c.Builtin {
			fmt.Fprintf(&b, ":%s %s [%d:%d]\n", c.Name, c.Policy, c.Counters.Packets, c.Counters.Bytes)
		} else {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c.Name)
		}
	}
	for _, c := range chains {
		for _, r := range c.Rules {
			b.WriteString(FormatRule(rs.Family, c.Name, r, counters))
			b.WriteString("\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// ListRules prints what "iptables -S [CHAIN [RULENUM]]" prints (with
// verbose, "iptables -S -v": counters as "-c P B"). chain "" lists all
// chains; rulenum 0 lists every rule.
func ListRules(rs *ir.Ruleset, chain string, rulenum int, verbose bool) (string, error) {
	out, f := listRules(rs, chain, rulenum, verbose)
	if f != nil {
		return "", f.render(ProgramName(rs.Family), 0)
	}
	return out, nil
}

// listRules implements ListRules.
func listRules(rs *ir.Ruleset, chain string, rulenum int, verbose bool) (string, *failure) {
	chains := OrderedChains(rs)
	if chain != "" {
		c := rs.Chain(chain)
		if c == nil {
			return "", iptcErr(errNoChain)
		}
		chains = []*ir.Chain{c}
	}
	var b strings.Builder
	if rulenum == 0 {
		for _, c := range chains {
			if c.Builtin {
				fmt.Fprintf(&b, "-P %s %s", c.Name, c.Policy)
				if verbose {
					fmt.Fprintf(&b, " -c %d %d", c.Counters.Packets, c.Counters.Bytes)
				}
				b.WriteString("\n")
			} else {
				fmt.Fprintf(&b, "-N %s\n", c.Name)
			}
		}
	}
	for _, c := range chains {
		for i, r := range c.Rules {
			if rulenum != 0 && i+1 != rulenum {
				continue
			}
			b.WriteString("-A " + c.Name)
			writeRule(&b, rs.Family, r, verbose)
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}
