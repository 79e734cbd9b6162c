package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The help text of -h/--help: iptables 1.8.9's usage (xtables' exit_printhelp)
// and, after -p icmp or -p ipv6-icmp, the icmp match's help with its list of
// type names, which firewalld parses to learn the ICMP types it may use.
// Other extensions' help texts are not printed.

// helpProgram stands for the program's name in helpUsage.
const helpProgram = "PROGRAM"

// The lines that differ between iptables and ip6tables.
const (
	ipv4Line4    = "    --ipv4\t-4\t\tNothing (line is ignored by ip6tables-restore)"
	ipv6Line4    = "    --ipv6\t-6\t\tError (line is ignored by iptables-restore)"
	ipv4Line6    = "    --ipv4\t-4\t\tError (line is ignored by ip6tables-restore)"
	ipv6Line6    = "    --ipv6\t-6\t\tNothing (line is ignored by iptables-restore)"
	fragmentLine = "[!] --fragment\t-f\t\tmatch second or further fragments only"
	// noLine marks a line the family does not print.
	noLine = "\x00"
)

// helpUsage returns the usage lines of the family's program.
func helpUsage(fam ir.Family) []string {
	ipv4Line, ipv6Line, fragment := ipv4Line4, ipv6Line4, fragmentLine
	if fam == ir.IPv6 {
		ipv4Line, ipv6Line, fragment = ipv4Line6, ipv6Line6, noLine
	}
	return helpUsageLines(ipv4Line, ipv6Line, fragment)
}

// helpUsageLines is the usage text, line by line, with the family's lines
// filled in.
func helpUsageLines(ipv4Line, ipv6Line, fragmentLine string) []string {
	return []string{
		"Usage: PROGRAM -[ACD] chain rule-specification [options]",
		"       PROGRAM -I chain [rulenum] rule-specification [options]",
		"       PROGRAM -R chain rulenum rule-specification [options]",
		"       PROGRAM -D chain rulenum [options]",
		"       PROGRAM -[LS] [chain [rulenum]] [options]",
		"       PROGRAM -[FZ] [chain] [options]",
		"       PROGRAM -[NX] chain",
		"       PROGRAM -E old-chain-name new-chain-name",
		"       PROGRAM -P chain target [options]",
		"       PROGRAM -h (print this help information)",
		"",
		"Commands:",
		"Either long or short options are allowed.",
		"  --append  -A chain\t\tAppend to chain",
		"  --check   -C chain\t\tCheck for the existence of a rule",
		"  --delete  -D chain\t\tDelete matching rule from chain",
		"  --delete  -D chain rulenum",
		"\t\t\t\tDelete rule rulenum (1 = first) from chain",
		"  --insert  -I chain [rulenum]",
		"\t\t\t\tInsert in chain as rulenum (default 1=first)",
		"  --replace -R chain rulenum",
		"\t\t\t\tReplace rule rulenum (1 = first) in chain",
		"  --list    -L [chain [rulenum]]",
		"\t\t\t\tList the rules in a chain or all chains",
		"  --list-rules -S [chain [rulenum]]",
		"\t\t\t\tPrint the rules in a chain or all chains",
		"  --flush   -F [chain]\t\tDelete all rules in  chain or all chains",
		"  --zero    -Z [chain [rulenum]]",
		"\t\t\t\tZero counters in chain or all chains",
		"  --new     -N chain\t\tCreate a new user-defined chain",
		"  --delete-chain",
		"            -X [chain]\t\tDelete a user-defined chain",
		"  --policy  -P chain target",
		"\t\t\t\tChange policy on chain to target",
		"  --rename-chain",
		"            -E old-chain new-chain",
		"\t\t\t\tChange chain name, (moving any references)",
		"",
		"Options:",
		ipv4Line,
		ipv6Line,
		"[!] --protocol\t-p proto\tprotocol: by number or name, eg. `tcp'",
		"[!] --source\t-s address[/mask][...]",
		"\t\t\t\tsource specification",
		"[!] --destination -d address[/mask][...]",
		"\t\t\t\tdestination specification",
		"[!] --in-interface -i input name[+]",
		"\t\t\t\tnetwork interface name ([+] for wildcard)",
		" --jump\t-j target",
		"\t\t\t\ttarget for rule (may load target extension)",
		"  --goto      -g chain",
		"\t\t\t       jump to chain with no return",
		"  --match\t-m match",
		"\t\t\t\textended match (may load extension)",
		"  --numeric\t-n\t\tnumeric output of addresses and ports",
		"[!] --out-interface -o output name[+]",
		"\t\t\t\tnetwork interface name ([+] for wildcard)",
		"  --table\t-t table\ttable to manipulate (default: `filter')",
		"  --verbose\t-v\t\tverbose mode",
		"  --wait\t-w [seconds]\tmaximum wait to acquire xtables lock before give up",
		"  --line-numbers\t\tprint line numbers when listing",
		"  --exact\t-x\t\texpand numbers (display exact values)",
		fragmentLine,
		"  --modprobe=<command>\t\ttry to insert modules using this command",
		"  --set-counters -c PKTS BYTES\tset the counter during insert/append",
		"[!] --version\t-V\t\tprint package version.",
	}
}

// HelpText is what `iptables [-p PROTO] -h` prints after its version line:
// the usage and, for the icmp protocols, the icmp match's help. protocol is
// the -p argument given before -h (lower-cased), or "".
func HelpText(fam ir.Family, protocol string) string {
	program := "iptables"
	if fam == ir.IPv6 {
		program = "ip6tables"
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, line := range helpUsage(fam) {
		if line == noLine {
			continue
		}
		b.WriteString(strings.Replace(line, helpProgram, program, 1))
		b.WriteString("\n")
	}
	switch {
	case fam == ir.IPv4 && protocol == "icmp":
		b.WriteString("\nicmp match options:\n" +
			"[!] --icmp-type typename\tmatch icmp type\n" +
			"[!] --icmp-type type[/code]\t(or numeric type or type/code)\n" +
			"Valid ICMP Types:")
		writeICMPTypes(&b, icmpCodes)
	case fam == ir.IPv6 && (protocol == "ipv6-icmp" || protocol == "icmpv6"):
		b.WriteString("\nicmpv6 match options:\n" +
			"[!] --icmpv6-type typename\tmatch icmpv6 type\n" +
			"\t\t\t\t(or numeric type or type/code)\n" +
			"Valid ICMPv6 Types:")
		writeICMPTypes(&b, icmpv6HelpCodes())
	}
	return b.String()
}

// writeICMPTypes lists type names as libxt_icmp.h's xt_print_icmp_types: a
// name with the type and codes of the one before it in parentheses after it,
// a code of the type before it indented, every other name on a line.
func writeICMPTypes(b *strings.Builder, codes []icmpName) {
	for i, c := range codes {
		switch {
		case i > 0 && c.typ == codes[i-1].typ && c.codeMin == codes[i-1].codeMin && c.codeMax == codes[i-1].codeMax:
			b.WriteString(" (" + c.name + ")")
		case i > 0 && c.typ == codes[i-1].typ:
			b.WriteString("\n   " + c.name)
		default:
			b.WriteString("\n" + c.name)
		}
	}
	b.WriteString("\n")
}

// The MLD types (130-132) xfw accepts beyond 1.8.9's table, which 1.8.9's
// help does not list.
const (
	icmpv6FirstMLD = 130
	icmpv6LastMLD  = 132
)

// icmpv6HelpCodes are icmpv6Codes as 1.8.9 lists them: without the MLD names.
func icmpv6HelpCodes() []icmpName {
	var out []icmpName
	for _, c := range icmpv6Codes {
		if c.typ >= icmpv6FirstMLD && c.typ <= icmpv6LastMLD {
			continue
		}
		out = append(out, c)
	}
	return out
}
