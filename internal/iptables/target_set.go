package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The SET target (libxt_SET revision 3, the one iptables-legacy 1.8.9
// uses): --add-set and --del-set, --exist and --timeout, parsed, checked
// and printed as libxt_SET does. --map-set is parsed and checked as
// iptables does, then refused: xfw does not implement it.

// Old-style option ids of the SET target (set_target_opts_v3).
const (
	setTgOptAdd = iota
	setTgOptDel
	setTgOptExist
	setTgOptTimeout
	setTgOptMap
	setTgOptMapMark
	setTgOptMapPrio
	setTgOptMapQueue
)

// setTgMaxTimeout is the largest --timeout libxt_SET accepts
// (UINT32_MAX - 1; UINT32_MAX means "the set's default").
const setTgMaxTimeout = math.MaxUint32 - 1

// setTargetExt is the SET target module.
var setTargetExt = registerTarget(&extension{
	name: "SET",
	opts: []*optDef{
		{name: "add-set", hasArg: argRequired, id: setTgOptAdd},
		{name: "del-set", hasArg: argRequired, id: setTgOptDel},
		{name: "exist", hasArg: argNone, id: setTgOptExist},
		{name: "timeout", hasArg: argRequired, id: setTgOptTimeout},
		{name: "map-set", hasArg: argRequired, id: setTgOptMap},
		{name: "map-mark", hasArg: argNone, id: setTgOptMapMark},
		{name: "map-prio", hasArg: argNone, id: setTgOptMapPrio},
		{name: "map-queue", hasArg: argNone, id: setTgOptMapQueue},
	},
	newTarget: func(*parseCtx) targetState {
		return &setTargetState{t: ir.SetTarget{Timeout: ir.SetTimeoutDefault}}
	},
})

// setTargetState is the SET target being parsed: flags are the options
// seen (bit = option id), as libxt_SET's SET_TARGET_* flags.
type setTargetState struct {
	t       ir.SetTarget
	mapDirs ir.SetDirs
	flags   uint32
}

// parse implements targetState (set_target_parse_v3). "!" is accepted and
// ignored, as libxt_SET ignores it.
func (s *setTargetState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	var dirs *ir.SetDirs
	switch o.id {
	case setTgOptAdd:
		dirs = &s.t.AddDirs
	case setTgOptDel:
		dirs = &s.t.DelDirs
	case setTgOptMap:
		dirs = &s.mapDirs
	case setTgOptTimeout:
		v, ok := xtStrtoui(arg, 0, setTgMaxTimeout)
		if !ok {
			return paramErr("Invalid value for option --timeout or out of range 0-%d", uint64(setTgMaxTimeout))
		}
		s.t.Timeout = uint32(v)
	case setTgOptExist:
		s.t.Exist = true
	}
	if dirs != nil {
		if dirs.Dim != 0 {
			return paramErr("--%s can be specified only once", o.name)
		}
		d, f := parseSetArgs(c, o.name, arg)
		if f != nil {
			return f
		}
		*dirs = d
		switch o.id {
		case setTgOptAdd:
			s.t.AddName = arg
		case setTgOptDel:
			s.t.DelName = arg
		}
	}
	s.flags |= 1 << o.id
	return nil
}

// has reports whether option id was given.
func (s *setTargetState) has(id int) bool { return s.flags&(1<<id) != 0 }

// final implements targetState (set_target_check_v3), then refuses
// --map-set.
func (s *setTargetState) final(*parseCtx) *failure {
	if !s.has(setTgOptAdd) && !s.has(setTgOptDel) && !s.has(setTgOptMap) {
		return paramErr("You must specify either `--add-set' or `--del-set' or `--map-set'")
	}
	if !s.has(setTgOptAdd) {
		if s.has(setTgOptExist) {
			return paramErr("Flag `--exist' can be used with `--add-set' only")
		}
		if s.has(setTgOptTimeout) {
			return paramErr("Option `--timeout' can be used with `--add-set' only")
		}
	}
	if !s.has(setTgOptMap) {
		for _, o := range []struct {
			id   int
			name string
		}{{setTgOptMapMark, "map-mark"}, {setTgOptMapPrio, "map-prio"}, {setTgOptMapQueue, "map-queue"}} {
			if s.has(o.id) {
				return paramErr("Flag `--%s' can be used with `--map-set' only", o.name)
			}
		}
	}
	if s.has(setTgOptMap) {
		if !s.has(setTgOptMapMark) && !s.has(setTgOptMapPrio) && !s.has(setTgOptMapQueue) {
			return paramErr("You must specify flags `--map-mark' or '--map-prio` or `--map-queue'")
		}
		return paramErr("SET: --map-set is%s", notSupported)
	}
	return nil
}

// build implements targetState.
func (s *setTargetState) build(t *ir.Target) {
	st := s.t
	*t = ir.Target{Kind: ir.TargetSet, Set: &st}
}

// setTargetText is set_target_save_v3 (dashes "--") and
// set_target_print_v3 (dashes ""): the options, each with a leading space.
func setTargetText(t *ir.SetTarget, dashes string) string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	if t.AddDirs.Dim != 0 {
		fmt.Fprintf(&b, " %sadd-set %s %s", dashes, t.AddName, t.AddDirs)
	}
	if t.Exist {
		fmt.Fprintf(&b, " %sexist", dashes)
	}
	if t.Timeout != ir.SetTimeoutDefault {
		fmt.Fprintf(&b, " %stimeout %d", dashes, t.Timeout)
	}
	if t.DelDirs.Dim != 0 {
		fmt.Fprintf(&b, " %sdel-set %s %s", dashes, t.DelName, t.DelDirs)
	}
	return b.String()
}
