package iptables

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// do_parse's checks after the option loop, and the construction of the IR.

// finish performs do_parse's checks after the option loop and builds the
// command.
func (p *parser) finish(invert bool) *failure {
	if p.wait == 0 && p.waitIntSet {
		return paramErr("--wait-interval only makes sense with --wait\n")
	}
	for _, m := range p.matches {
		if f := m.state.final(&p.ctx); f != nil {
			return f
		}
	}
	if p.target != nil {
		if f := p.target.final(&p.ctx); f != nil {
			return f
		}
	}
	if p.g.optind < len(p.g.args) {
		return paramErr("unknown arguments found on commandline")
	}
	if p.command == 0 {
		return paramErr("no command specified")
	}
	if invert {
		return paramErr("nothing appropriate following !")
	}
	kind := kindOf(p.command)
	srcs, dsts, f := p.parseAddresses(kind)
	if f != nil {
		return f
	}
	if kind == CmdReplace && (len(srcs) != 1 || len(dsts) != 1) {
		return paramErr("Replacement rule does not specify a unique address")
	}
	if f := genericOptCheck(p.command, p.options); f != nil {
		return f
	}
	if len(p.cmd.Chain) >= maxNameLen {
		return paramErr("chain name `%s' too long (must be under %d chars)", p.cmd.Chain, maxNameLen)
	}
	if kind.isRuleCommand() || kind == CmdDeleteNum {
		switch p.cmd.Chain {
		case "PREROUTING", ir.ChainInput:
			if p.options&optViaOut != 0 {
				return paramErr("Can't use -%c with %s\n", optChar(optViaOut), p.cmd.Chain)
			}
		case "POSTROUTING", ir.ChainOutput:
			if p.options&optViaIn != 0 {
				return paramErr("Can't use -%c with %s\n", optChar(optViaIn), p.cmd.Chain)
			}
		}
	}
	if f := natDropInhibited(p.table, p.cmd.Policy, p.jumpto); f != nil {
		return f
	}
	if f := checkTable(p.fam, p.table); f != nil {
		return f
	}
	p.cmd.Kind = kind
	p.cmd.Table = p.table
	if p.command&(cmdList|cmdListRules) != 0 && p.command&cmdZero != 0 {
		p.cmd.Zero = true
	}
	if p.options&optCounters != 0 {
		c := p.counters
		p.cmd.Counters = &c
	}
	p.cmd.target, p.cmd.gotoSet = p.jumpto, p.gotoSet
	if kind.isRuleCommand() {
		p.buildRules(srcs, dsts)
	}
	return nil
}

// checkTable is iptc_init's verdict on -t: the kernel's tables (filter,
// nat, mangle, raw, security) exist, others are refused as iptables
// refuses them.
func checkTable(fam ir.Family, table string) *failure {
	if ir.IsTable(table) {
		return nil
	}
	return &failure{kind: failXT, status: StatusVersion,
		msg: fmt.Sprintf("can't initialize %s table `%s': Table does not exist (do you need to insmod?)", ProgramName(fam), table)}
}

// parseAddresses is the address part of ipv4_post_parse/ipv6_post_parse.
func (p *parser) parseAddresses(kind CommandKind) (srcs, dsts []addrPair, f *failure) {
	shost, dhost := p.shost, p.dhost
	if kind.isRuleCommand() {
		any := "0.0.0.0/0"
		if p.fam == ir.IPv6 {
			any = "::0/0"
		}
		if p.options&optSource == 0 {
			shost = any
		}
		if p.options&optDestination == 0 {
			dhost = any
		}
	}
	if shost != "" || p.options&optSource != 0 {
		if srcs, f = p.hostList(shost, p.addrBuf[:0:1]); f != nil {
			return nil, nil, f
		}
	}
	if dhost != "" || p.options&optDestination != 0 {
		if dsts, f = p.hostList(dhost, p.addrBuf[1:1:2]); f != nil {
			return nil, nil, f
		}
	}
	if (len(srcs) > 1 || len(dsts) > 1) && p.invflags&(optSource|optDestination) != 0 {
		return nil, nil, paramErr("! not allowed with multiple source or destination IP addresses")
	}
	return srcs, dsts, nil
}

// hostList is parseHostList with the address that stands for any
// address ("0.0.0.0/0", "::0/0": a rule without -s or -d) parsed once.
// The addresses are appended to out.
func (p *parser) hostList(s string, out []addrPair) ([]addrPair, *failure) {
	switch {
	case s == "0.0.0.0/0" && p.fam == ir.IPv4:
		return append(out, anyAddr4), nil
	case s == "::0/0" && p.fam == ir.IPv6:
		return append(out, anyAddr6), nil
	}
	return parseHostList(p.fam, s, out)
}

// anyAddr4 and anyAddr6 are what parseHostList makes of "0.0.0.0/0" and
// "::0/0".
var anyAddr4, anyAddr6 = mustHost(ir.IPv4, "0.0.0.0/0"), mustHost(ir.IPv6, "::0/0")

// mustHost returns the one address of list s, which must parse.
func mustHost(fam ir.Family, s string) addrPair {
	l, f := parseHostList(fam, s, nil)
	if f != nil || len(l) != 1 {
		panic("bad built-in address " + s)
	}
	return l[0]
}

// buildRules assembles the IR rules, one per source × destination.
func (p *parser) buildRules(srcs, dsts []addrPair) {
	base := newRuleWithMatches(len(p.matches))
	base.InIface, base.OutIface, base.Counters = p.inIface, p.outIface, p.counters
	if p.protoSet {
		base.Proto = ir.ProtoMatch{Set: true, Invert: p.invflags&optProtocol != 0, Num: p.ctx.proto, Spelling: p.protoSpelling}
	}
	if p.frag {
		base.Fragment = ir.FlagMatch{Set: true, Invert: p.invflags&optFragment != 0}
	}
	for _, m := range p.matches {
		base.Matches = append(base.Matches, m.state.build())
	}
	p.buildTarget(&base.Target)
	if n := len(srcs) * len(dsts); n == 1 {
		p.cmd.Rules = p.cmd.oneRule[:0:1] // moved with the command (parseArgvInto)
	} else {
		p.cmd.Rules = make([]*ir.Rule, 0, n)
	}
	last := len(srcs)*len(dsts) - 1
	for i, s := range srcs {
		for j, d := range dsts {
			r := base
			if i*len(dsts)+j != last {
				r = base.Clone() // the last rule takes base itself
			}
			r.Src = addrMatchOf(s, p.invflags&optSource != 0)
			r.Dst = addrMatchOf(d, p.invflags&optDestination != 0)
			p.cmd.Rules = append(p.cmd.Rules, r)
		}
	}
}

// buildTarget converts -j/-g into the IR target t (zero on entry),
// before chain resolution.
func (p *parser) buildTarget(t *ir.Target) {
	switch {
	case p.jumpto == "":
	case p.gotoSet:
		*t = ir.Target{Kind: ir.TargetGoto, Chain: p.jumpto}
	case p.target != nil:
		p.target.build(t)
	default:
		switch p.jumpto {
		case "ACCEPT":
			t.Kind = ir.TargetAccept
		case "DROP":
			t.Kind = ir.TargetDrop
		case "RETURN":
			t.Kind = ir.TargetReturn
		default:
			*t = ir.Target{Kind: ir.TargetJump, Chain: p.jumpto}
		}
	}
}

// ruleMatchesInline is how many matches newRuleWithMatches allocates with
// the rule itself (kube-proxy's rules have one to three).
const ruleMatchesInline = 3

// ruleWithMatches is a rule and the array its first matches are kept in:
// one allocation instead of two (a restore builds hundreds of thousands
// of rules).
type ruleWithMatches struct {
	rule    ir.Rule
	matches [ruleMatchesInline]ir.Match
}

// newRuleWithMatches returns a zero rule whose Matches is empty, with room
// for n matches ([] as Rule.Clone makes it, never nil).
func newRuleWithMatches(n int) *ir.Rule {
	switch {
	case n == 0:
		return &ir.Rule{Matches: []ir.Match{}}
	case n > ruleMatchesInline:
		return &ir.Rule{Matches: make([]ir.Match, 0, n)}
	}
	if n == 1 {
		// 352 bytes instead of 384 (Go's size classes): a rule with one
		// match (kube-proxy's KUBE-SEP masquerade marks, -p udp --dport
		// filter rules) does not carry room for three.
		rm := new(ruleWithMatch)
		rm.rule.Matches = rm.matches[:0:1]
		return &rm.rule
	}
	rm := new(ruleWithMatches)
	rm.rule.Matches = rm.matches[:0:n]
	return &rm.rule
}

// ruleWithMatch is ruleWithMatches for a rule of one match.
type ruleWithMatch struct {
	rule    ir.Rule
	matches [1]ir.Match
}
