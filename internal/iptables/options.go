package iptables

import "math/bits"

// Global options of iptables 1.8.9 (iptables.c original_opts and the option
// string IPT_OPTSTRING), and the option and command bit sets of xshared.c.

// iptShorts is IPT_OPTSTRING without its leading "-:".
const iptShorts = ":A:C:D:E:F::I:L::M:N:P:VX::Z::c:d:i:j:o:p:s:t:R:S::W::46bfg:h::m:nvw::x"

// globalOptTable is iptables' long options; parsers share it and never
// modify it (merging extension options makes a new slice).
var globalOptTable = buildGlobalOpts()

// buildGlobalOpts returns iptables' long options.
func buildGlobalOpts() []*optDef {
	defs := []struct {
		name   string
		hasArg int
		val    byte
	}{
		{"append", argRequired, 'A'},
		{"delete", argRequired, 'D'},
		{"check", argRequired, 'C'},
		{"insert", argRequired, 'I'},
		{"replace", argRequired, 'R'},
		{"list", argOptional, 'L'},
		{"list-rules", argOptional, 'S'},
		{"flush", argOptional, 'F'},
		{"zero", argOptional, 'Z'},
		{"new-chain", argRequired, 'N'},
		{"delete-chain", argOptional, 'X'},
		{"rename-chain", argRequired, 'E'},
		{"policy", argRequired, 'P'},
		{"source", argRequired, 's'},
		{"destination", argRequired, 'd'},
		{"src", argRequired, 's'},
		{"dst", argRequired, 'd'},
		{"protocol", argRequired, 'p'},
		{"in-interface", argRequired, 'i'},
		{"jump", argRequired, 'j'},
		{"table", argRequired, 't'},
		{"match", argRequired, 'm'},
		{"numeric", argNone, 'n'},
		{"out-interface", argRequired, 'o'},
		{"verbose", argNone, 'v'},
		{"wait", argOptional, 'w'},
		{"wait-interval", argOptional, 'W'},
		{"exact", argNone, 'x'},
		{"fragments", argNone, 'f'},
		{"version", argNone, 'V'},
		{"help", argOptional, 'h'},
		{"line-numbers", argNone, '0'},
		{"modprobe", argRequired, 'M'},
		{"set-counters", argRequired, 'c'},
		{"goto", argRequired, 'g'},
		{"ipv4", argNone, '4'},
		{"ipv6", argNone, '6'},
	}
	out := make([]*optDef, len(defs))
	for i, d := range defs {
		out[i] = &optDef{name: d.name, hasArg: d.hasArg, val: int(d.val)}
	}
	return out
}

// Option bits (OPT_*), in the order of xshared.c's optflags.
const (
	optNumeric uint32 = 1 << iota
	optSource
	optDestination
	optProtocol
	optJump
	optVerbose
	optExpanded
	optViaIn
	optViaOut
	optLineNumbers
	optCounters
	optFragment
)

// optChars are the letters of the option bits, for messages (optflags).
const optChars = "nsdpjvxio0cf"

// optInvertible is the set of options "!" may precede (inverse_for_options).
const optInvertible = optSource | optDestination | optProtocol | optViaIn | optViaOut | optFragment

// Command bits (CMD_*), in xshared.h order.
const (
	cmdInsert uint32 = 1 << iota
	cmdDelete
	cmdDeleteNum
	cmdReplace
	cmdAppend
	cmdList
	cmdFlush
	cmdZero
	cmdNewChain
	cmdDeleteChain
	cmdSetPolicy
	cmdRenameChain
	cmdListRules
	cmdZeroNum
	cmdCheck
)

// cmdChars are the letters of the command bits (cmd2char).
const cmdChars = "IDDRALFZNXPESZC"

// commandsVsOptions is xshared.c's commands_v_options for the options above:
// 'x' illegal, ' ' optional (no option is compulsory for any command).
var commandsVsOptions = [...]string{
	/*            nsdpjvxio0cf */
	/* INSERT */ "x     x  x  ",
	/* DELETE */ "x     x  xx ",
	/* DELETE_NUM */ "xxxxx xxxxxx",
	/* REPLACE */ "x     x  x  ",
	/* APPEND */ "x     x  x  ",
	/* LIST */ " xxxx  xx xx",
	/* FLUSH */ "xxxxx xxxxxx",
	/* ZERO */ "xxxxx xxxxxx",
	/* NEW_CHAIN */ "xxxxx xxxxxx",
	/* DEL_CHAIN */ "xxxxx xxxxxx",
	/* SET_POLICY */ "xxxxx xxxx x",
	/* RENAME */ "xxxxx xxxxxx",
	/* LIST_RULES */ "xxxxx xxxxxx",
	/* ZERO_NUM */ "xxxxx xxxxxx",
	/* CHECK */ "x     x  xx ",
}

// highBit returns the index of the highest set bit (for cmd2char/opt2char,
// which shift until one bit is left).
func highBit(v uint32) int {
	i := 0
	for v > 1 {
		v >>= 1
		i++
	}
	return i
}

// cmdChar is cmd2char.
func cmdChar(cmd uint32) byte { return cmdChars[highBit(cmd)] }

// optChar is opt2char.
func optChar(opt uint32) byte { return optChars[highBit(opt)] }

// genericOptCheck is xshared.c's generic_opt_check: an option is legal when
// any of the given commands allows it, illegal when one of them forbids it
// and none allows it; the first illegal option (in optChars' order) is
// reported. The table is read as masks (optionMasks).
func genericOptCheck(command, options uint32) *failure {
	var allowed, forbidden uint32
	for j := range commandsVsOptions {
		if command&(1<<j) != 0 {
			allowed |= optionMasks[j].allowed
			forbidden |= optionMasks[j].forbidden
		}
	}
	if bad := options & forbidden &^ allowed; bad != 0 {
		return paramErr("Illegal option `-%c' with this command", optChars[bits.TrailingZeros32(bad)])
	}
	return nil
}

// optionMask is one command's row of commandsVsOptions as bit masks of
// the options (1<<i for optChars[i]) it allows and forbids.
type optionMask struct{ allowed, forbidden uint32 }

// optionMasks are the rows of commandsVsOptions as masks.
var optionMasks = func() (m [len(commandsVsOptions)]optionMask) {
	for j, row := range commandsVsOptions {
		for i := 0; i < len(optChars); i++ {
			if row[i] == 'x' {
				m[j].forbidden |= 1 << i
			} else {
				m[j].allowed |= 1 << i
			}
		}
	}
	return m
}()
