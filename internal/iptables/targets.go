package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The REJECT (libipt_REJECT, libip6t_REJECT) and LOG (libxt_LOG) targets.

// rejectName is one --reject-with type: the canonical name iptables-save
// prints and the alias it also accepts.
type rejectName struct {
	name, alias string
}

// rejectTypes4 and rejectTypes6 are the reject tables, in iptables' order
// (an abbreviation picks the first entry it is a prefix of).
var (
	rejectTypes4 = []rejectName{
		{"icmp-net-unreachable", "net-unreach"},
		{"icmp-host-unreachable", "host-unreach"},
		{"icmp-proto-unreachable", "proto-unreach"},
		{"icmp-port-unreachable", "port-unreach"},
		{"icmp-net-prohibited", "net-prohib"},
		{"icmp-host-prohibited", "host-prohib"},
		{"tcp-reset", "tcp-rst"},
		{"icmp-admin-prohibited", "admin-prohib"},
	}
	rejectTypes6 = []rejectName{
		{"icmp6-no-route", "no-route"},
		{"icmp6-adm-prohibited", "adm-prohibited"},
		{"icmp6-addr-unreachable", "addr-unreach"},
		{"icmp6-port-unreachable", "port-unreach"},
		{"tcp-reset", "tcp-reset"},
		{"icmp6-policy-fail", "policy-fail"},
		{"icmp6-reject-route", "reject-route"},
	}
)

// RejectTCPReset is the --reject-with type that answers with a TCP RST.
const RejectTCPReset = "tcp-reset"

// DefaultRejectWith returns the reply REJECT sends when --reject-with is not
// given: icmp-port-unreachable or icmp6-port-unreachable.
func DefaultRejectWith(fam ir.Family) string {
	if fam == ir.IPv6 {
		return "icmp6-port-unreachable"
	}
	return "icmp-port-unreachable"
}

// hasPrefixFold reports whether prefix is a case-insensitive prefix of s
// (strncasecmp(s, prefix, strlen(prefix)) == 0).
func hasPrefixFold(s, prefix string) bool {
	return len(prefix) <= len(s) && strings.EqualFold(s[:len(prefix)], prefix)
}

// rejectExt is the REJECT target module.
var rejectExt = registerTarget(&extension{
	name: "REJECT",
	x6: []x6opt{
		{name: "reject-with", id: 0, typ: xtString},
	},
	newTarget: func(c *parseCtx) targetState { return &rejectState{with: DefaultRejectWith(c.fam)} },
})

// rejectState is the REJECT target being parsed.
type rejectState struct {
	with  string
	flags x6flags
}

// parse implements targetState.
func (s *rejectState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(rejectExt, o.id, invert); f != nil {
		return f
	}
	table := rejectTypes4
	if c.fam == ir.IPv6 {
		table = rejectTypes6
	}
	for _, r := range table {
		if hasPrefixFold(r.name, arg) || hasPrefixFold(r.alias, arg) {
			s.with = r.name
			s.flags.done(o.id)
			return nil
		}
	}
	f := paramErr("unknown reject type \"%s\"", arg)
	if c.fam == ir.IPv4 && (hasPrefixFold("echo-reply", arg) || hasPrefixFold("echoreply", arg)) {
		f.notice = "--reject-with echo-reply no longer supported\n"
	}
	return f
}

// final implements targetState.
func (s *rejectState) final(*parseCtx) *failure { return s.flags.fcheck(rejectExt) }

// build implements targetState.
func (s *rejectState) build(t *ir.Target) {
	*t = ir.Target{Kind: ir.TargetReject, RejectWith: s.with}
}

// LOG guided option ids.
const (
	logOptLevel = iota
	logOptPrefix
	logOptTCPSeq
	logOptTCPOpt
	logOptIPOpt
	logOptUID
	logOptMAC
)

// logPrefixSize is the size of the LOG prefix field, with its NUL: longer
// prefixes are cut to logPrefixSize-1 bytes.
const logPrefixSize = 30

// DefaultLogLevel is the syslog level LOG uses without --log-level
// (warning); iptables-save omits it.
const DefaultLogLevel = 4

// logExt is the LOG target module.
var logExt = registerTarget(&extension{
	name: "LOG",
	x6: []x6opt{
		{name: "log-level", id: logOptLevel, typ: xtSyslogLevel},
		{name: "log-prefix", id: logOptPrefix, typ: xtString, min: 1, size: logPrefixSize},
		{name: "log-tcp-sequence", id: logOptTCPSeq, typ: xtNone},
		{name: "log-tcp-options", id: logOptTCPOpt, typ: xtNone},
		{name: "log-ip-options", id: logOptIPOpt, typ: xtNone},
		{name: "log-uid", id: logOptUID, typ: xtNone},
		{name: "log-macdecode", id: logOptMAC, typ: xtNone},
	},
	newTarget: func(*parseCtx) targetState {
		return &logState{o: ir.LogOptions{Level: DefaultLogLevel}}
	},
})

// syslogLevels are the level names libxtables accepts (xtopt_parse_sysloglevel).
var syslogLevels = map[string]uint8{
	"alert": 1, "crit": 2, "debug": 7, "emerg": 0, "error": 3,
	"info": 6, "notice": 5, "panic": 0, "warning": 4,
}

// logState is the LOG target being parsed.
type logState struct {
	o     ir.LogOptions
	flags x6flags
}

// parse implements targetState.
func (s *logState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	const maxLevel = 7
	x, f := s.flags.begin(logExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case logOptLevel:
		v, ok := xtStrtoui(arg, 0, maxLevel)
		if !ok {
			lv, known := syslogLevels[arg]
			if !known {
				return paramErr("log level \"%s\" unknown\n", arg)
			}
			v = uint64(lv)
		}
		s.o.Level, s.o.LevelSet = uint8(v), true
	case logOptPrefix:
		p, f := parseLogPrefix(x, arg)
		if f != nil {
			return f
		}
		s.o.Prefix = p
	case logOptTCPSeq:
		s.o.Flags |= ir.LogFlagTCPSeq
	case logOptTCPOpt:
		s.o.Flags |= ir.LogFlagTCPOpt
	case logOptIPOpt:
		s.o.Flags |= ir.LogFlagIPOpt
	case logOptUID:
		s.o.Flags |= ir.LogFlagUID
	case logOptMAC:
		s.o.Flags |= ir.LogFlagMACDecode
	}
	s.flags.done(o.id)
	return nil
}

// parseLogPrefix parses LOG's --log-prefix or NFLOG's --nflog-prefix (x):
// the guided string checks and truncation, then no newline (both modules
// say --log-prefix).
func parseLogPrefix(x *x6opt, arg string) (string, *failure) {
	p, f := x.parseString(arg)
	if f != nil {
		return "", f
	}
	if strings.Contains(arg, "\n") {
		return "", paramErr("Newlines not allowed in --log-prefix")
	}
	return p, nil
}

// final implements targetState.
func (s *logState) final(*parseCtx) *failure { return s.flags.fcheck(logExt) }

// build implements targetState.
func (s *logState) build(t *ir.Target) {
	o := s.o
	*t = ir.Target{Kind: ir.TargetLog, Log: &o}
}
