package iptables

import "github.com/xfw-dev/xfw/internal/ir"

// The parsed form of an iptables command line.

// CommandKind is the iptables command of a command line.
type CommandKind uint8

const (
	// CmdAppend is -A CHAIN rule.
	CmdAppend CommandKind = iota + 1
	// CmdCheck is -C CHAIN rule.
	CmdCheck
	// CmdDelete is -D CHAIN rule.
	CmdDelete
	// CmdDeleteNum is -D CHAIN N.
	CmdDeleteNum
	// CmdInsert is -I CHAIN [N] rule.
	CmdInsert
	// CmdReplace is -R CHAIN N rule.
	CmdReplace
	// CmdList is -L [CHAIN [N]].
	CmdList
	// CmdListRules is -S [CHAIN [N]].
	CmdListRules
	// CmdFlush is -F [CHAIN].
	CmdFlush
	// CmdZero is -Z [CHAIN].
	CmdZero
	// CmdZeroNum is -Z CHAIN N.
	CmdZeroNum
	// CmdNewChain is -N CHAIN.
	CmdNewChain
	// CmdDeleteChain is -X [CHAIN].
	CmdDeleteChain
	// CmdRenameChain is -E OLD NEW.
	CmdRenameChain
	// CmdSetPolicy is -P CHAIN POLICY.
	CmdSetPolicy
	// CmdVersion is -V: print the version.
	CmdVersion
	// CmdHelp is -h: print the help text.
	CmdHelp
	// CmdNone is a command line without command; only iptables-restore
	// produces it (a line ignored for the other family).
	CmdNone
)

// Command is one parsed iptables command line.
type Command struct {
	Kind CommandKind
	// Family is the family the command was parsed for.
	Family ir.Family
	// Table is the -t table ("filter" unless given).
	Table string
	// Chain is the chain operated on ("" when the command applies to all
	// chains).
	Chain string
	// RuleNum is the 1-based rule number of -I, -R, -D N, -Z CHAIN N and of
	// -L/-S CHAIN N; 0 when not given.
	RuleNum int
	// NewName is the new chain name of -E.
	NewName string
	// Policy is the policy of -P as given.
	Policy string
	// Rules are the rules of -A, -C, -D, -I and -R: one per combination of
	// the -s and -d addresses, sources outermost, as iptables expands them.
	Rules []*ir.Rule
	// Counters is set when -c was given (rule counters are also in each
	// rule; -P uses it for the policy counters).
	Counters *ir.Counters
	// Zero is set when -Z accompanies -L or -S.
	Zero bool
	// Verbose counts -v; Numeric, Exact and LineNumbers are -n, -x and
	// --line-numbers (listing options).
	Verbose                     int
	Numeric, Exact, LineNumbers bool
	// Notices are warnings iptables prints on standard error while
	// accepting the command (without trailing newlines).
	Notices []string
	// HelpProtocol is the -p argument given before -h (lower-cased): the
	// help text then includes that protocol's match help (HelpText).
	HelpProtocol string

	// target is the -j/-g name as given; resolved against the ruleset's
	// chains by Apply.
	target  string
	gotoSet bool
	// skip is set by iptables-restore for a line meant for the other
	// family (-6 in iptables-restore): rule commands then do nothing.
	skip bool
	// ownsRules is set by iptables-restore, which applies each parsed
	// command once and drops it: its Rules go into the ruleset as they
	// are, not copied (a kube-proxy restore has hundreds of thousands).
	ownsRules bool
	// chains, when set, serves the lookups of the rule command's chain
	// and jump target (iptables-restore's chainMemo).
	chains *chainMemo
	// oneRule holds Rules when there is one: no slice of its own.
	oneRule [1]*ir.Rule
}

// kindOf maps command bits to a CommandKind.
func kindOf(cmd uint32) CommandKind {
	switch {
	case cmd&cmdAppend != 0:
		return CmdAppend
	case cmd&cmdCheck != 0:
		return CmdCheck
	case cmd&cmdDeleteNum != 0:
		return CmdDeleteNum
	case cmd&cmdDelete != 0:
		return CmdDelete
	case cmd&cmdInsert != 0:
		return CmdInsert
	case cmd&cmdReplace != 0:
		return CmdReplace
	case cmd&cmdList != 0:
		return CmdList
	case cmd&cmdListRules != 0:
		return CmdListRules
	case cmd&cmdFlush != 0:
		return CmdFlush
	case cmd&cmdZeroNum != 0:
		return CmdZeroNum
	case cmd&cmdZero != 0:
		return CmdZero
	case cmd&cmdNewChain != 0:
		return CmdNewChain
	case cmd&cmdDeleteChain != 0:
		return CmdDeleteChain
	case cmd&cmdRenameChain != 0:
		return CmdRenameChain
	case cmd&cmdSetPolicy != 0:
		return CmdSetPolicy
	}
	return CmdNone
}

// isRuleCommand reports whether the command takes a rule specification.
func (k CommandKind) isRuleCommand() bool {
	switch k {
	case CmdAppend, CmdCheck, CmdDelete, CmdInsert, CmdReplace:
		return true
	}
	return false
}
