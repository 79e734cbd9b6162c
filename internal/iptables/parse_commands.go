package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// do_parse's handling of the command options (-A, -D, -N, -P, …).

// parseRuleNumber is parse_rulenumber: 1 to INT_MAX.
func parseRuleNumber(s string) (int, *failure) {
	const intMax = 1<<31 - 1
	v, ok := xtStrtoui(s, 1, intMax)
	if !ok {
		return 0, paramErr("Invalid rule number `%s'", s)
	}
	return int(v), nil
}

// assertValidChainName is xshared.c's assert_valid_chain_name (for -N).
func (p *parser) assertValidChainName(name string) *failure {
	if len(name) >= maxNameLen {
		return paramErr("chain name `%s' too long (must be under %d chars)", name, maxNameLen)
	}
	if name != "" && (name[0] == '-' || name[0] == '!') {
		return paramErr("chain name not allowed to start with `%c'", name[0])
	}
	if clashesWithTarget(p.fam, name) {
		return paramErr("chain name may not clash with target name")
	}
	if strings.IndexFunc(name, isSpaceRune) >= 0 {
		return paramErr("Invalid chain name `%s'", name)
	}
	return nil
}

// clashesWithTarget reports whether a chain name is also a target name.
func clashesWithTarget(fam ir.Family, name string) bool {
	e, std := findTarget(fam, name)
	if shipped(otherTargets, fam, name) {
		return true
	}
	return e != nil || std
}

// isSpaceRune is isspace() for the bytes iptables checks.
func isSpaceRune(r rune) bool { return r < 0x80 && isCSpace(byte(r)) }

// chainArg returns the optional chain argument of -L, -S, -F, -Z, -X.
func (p *parser) chainArg() {
	if p.g.hasOptarg {
		p.cmd.Chain = p.g.optarg
	} else if p.g.hasArg() {
		p.cmd.Chain = p.g.args[p.g.optind]
		p.g.optind++
	}
}

// commandOption handles the command options (-A, -C, -D, -R, -I, -L, -S,
// -F, -Z, -N, -X, -E, -P); handled is false for any other option.
func (p *parser) commandOption(c int, optarg string, invert bool) (handled bool, f *failure) {
	switch c {
	case 'A':
		if f = p.addCommand(cmdAppend, 0, invert); f == nil {
			p.cmd.Chain = optarg
		}
	case 'C':
		if f = p.addCommand(cmdCheck, 0, invert); f == nil {
			p.cmd.Chain = optarg
		}
	case 'D':
		if f = p.addCommand(cmdDelete, 0, invert); f == nil {
			p.cmd.Chain = optarg
			if p.g.hasArg() {
				p.cmd.RuleNum, f = parseRuleNumber(p.g.args[p.g.optind])
				p.g.optind++
				p.command = cmdDeleteNum
			}
		}
	case 'R':
		if f = p.addCommand(cmdReplace, 0, invert); f == nil {
			p.cmd.Chain = optarg
			if p.g.hasArg() {
				p.cmd.RuleNum, f = parseRuleNumber(p.g.args[p.g.optind])
				p.g.optind++
			} else {
				f = paramErr("-%c requires a rule number", cmdChar(cmdReplace))
			}
		}
	case 'I':
		if f = p.addCommand(cmdInsert, 0, invert); f == nil {
			p.cmd.Chain = optarg
			p.cmd.RuleNum = 1
			if p.g.hasArg() {
				p.cmd.RuleNum, f = parseRuleNumber(p.g.args[p.g.optind])
				p.g.optind++
			}
		}
	case 'L', 'S':
		bit := cmdList
		if c == 'S' {
			bit = cmdListRules
		}
		if f = p.addCommand(bit, cmdZero|cmdZeroNum, invert); f == nil {
			p.chainArg()
			if p.g.hasArg() {
				p.cmd.RuleNum, f = parseRuleNumber(p.g.args[p.g.optind])
				p.g.optind++
			}
		}
	case 'F':
		if f = p.addCommand(cmdFlush, 0, invert); f == nil {
			p.chainArg()
		}
	case 'Z':
		if f = p.addCommand(cmdZero, cmdList|cmdListRules, invert); f == nil {
			p.chainArg()
			if p.g.hasArg() {
				p.cmd.RuleNum, f = parseRuleNumber(p.g.args[p.g.optind])
				p.g.optind++
				p.command = cmdZeroNum
			}
		}
	case 'N':
		if f = p.assertValidChainName(optarg); f == nil {
			if f = p.addCommand(cmdNewChain, 0, invert); f == nil {
				p.cmd.Chain = optarg
			}
		}
	case 'X':
		if f = p.addCommand(cmdDeleteChain, 0, invert); f == nil {
			p.chainArg()
		}
	case 'E':
		if f = p.addCommand(cmdRenameChain, 0, invert); f == nil {
			p.cmd.Chain = optarg
			if p.g.hasArg() {
				p.cmd.NewName = p.g.args[p.g.optind]
				p.g.optind++
			} else {
				f = paramErr("-%c requires old-chain-name and new-chain-name", cmdChar(cmdRenameChain))
			}
		}
	case 'P':
		if f = p.addCommand(cmdSetPolicy, 0, invert); f == nil {
			p.cmd.Chain = optarg
			if p.g.hasArg() {
				p.cmd.Policy = p.g.args[p.g.optind]
				p.g.optind++
			} else {
				f = paramErr("-%c requires a chain and a policy", cmdChar(cmdSetPolicy))
			}
		}
	default:
		return false, nil
	}
	return true, f
}
