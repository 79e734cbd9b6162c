package difftest

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the generator's stateful matches (GenOptions.Conntrack):
// -m conntrack and -m state, and the usual stateful rule shapes.

// ctStates are the --ctstate names (SNAT and DNAT never hold here: no
// NAT), with the spellings conntrack_ps_state accepts (any case, any
// prefix: "E" is ESTABLISHED).
var ctStates = []string{"INVALID", "NEW", "ESTABLISHED", "RELATED", "UNTRACKED", "SNAT", "DNAT"}

// ctStatuses are the --ctstatus names.
var ctStatuses = []string{"NONE", "EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED"}

// nameList returns a comma list of one or more of names (the first n of
// them only), sometimes in lower case.
func (g *rgen) nameList(names []string, n int) string {
	var out []string
	for _, i := range g.rng.Perm(n)[:1+g.rng.Intn(min(n, 3))] {
		out = append(out, names[i])
	}
	s := strings.Join(out, ",")
	if g.chance(10) {
		s = strings.ToLower(s)
	}
	return s
}

// ctSpec returns a conntrack or state match.
func (g *rgen) ctSpec() []string {
	if g.chance(35) {
		s := []string{"-m", "state"}
		s = append(s, g.neg(15)...)
		return append(s, "--state", g.nameList(ctStates, 5))
	}
	s := []string{"-m", "conntrack"}
	opts := 0
	for opts == 0 {
		if g.chance(75) {
			s = append(s, g.neg(20)...)
			n := 5
			if g.chance(10) {
				n = len(ctStates)
			}
			s = append(s, "--ctstate", g.nameList(ctStates, n))
			opts++
		}
		if g.chance(20) {
			s = append(s, g.neg(25)...)
			protos := []string{"tcp", "udp", "icmp", "6", "17", "47"}
			if g.fam == ir.IPv6 {
				protos = []string{"tcp", "udp", "ipv6-icmp", "58", "6", "17"}
			}
			s = append(s, "--ctproto", pick(g.rng, protos))
			opts++
		}
		if g.chance(20) {
			s = append(s, g.neg(25)...)
			s = append(s, "--ctstatus", g.nameList(ctStatuses, len(ctStatuses)))
			opts++
		}
		if g.chance(20) {
			s = append(s, "--ctdir", pick(g.rng, []string{"ORIGINAL", "REPLY"}))
			opts++
		}
		if g.chance(25) {
			s = append(s, g.ctTupleSpec()...)
			opts++
		}
	}
	return s
}

// ctTupleSpec returns one or two options on the connection's tuple:
// addresses (prefix, netmask or non-contiguous mask) and ports or port
// ranges, some inverted. ICMP connections' "ports" are the identifier and
// type << 8 | code: the echo types' values (0x0000, 0x0800, 0x8000,
// 0x8100) come up among the ports.
func (g *rgen) ctTupleSpec() []string {
	var s []string
	used := map[string]bool{} // iptables takes each option once
	for n := 0; n == 0 || (n < 2 && g.chance(30)); n++ {
		if g.chance(55) {
			opt := pick(g.rng, []string{"--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst"})
			if used[opt] {
				continue
			}
			used[opt] = true
			s = append(s, g.neg(25)...)
			s = append(s, opt, g.addrSpec(false))
			continue
		}
		opt := pick(g.rng, []string{"--ctorigsrcport", "--ctorigdstport", "--ctreplsrcport", "--ctrepldstport"})
		if used[opt] {
			continue
		}
		used[opt] = true
		s = append(s, g.neg(25)...)
		port := func() int {
			if g.chance(15) {
				return pick(g.rng, []int{0, 0x0800, 0x8000, 0x8100})
			}
			return g.port()
		}
		a, b := port(), port()
		if a > b {
			a, b = b, a
		}
		if g.chance(50) {
			s = append(s, opt, fmt.Sprint(a))
		} else {
			s = append(s, opt, fmt.Sprintf("%d:%d", a, b))
		}
	}
	return s
}

// statefulShapes returns the rules stateful rulesets usually start their
// base chains with: accept what belongs to known connections (the fast
// path xfw takes for a chain's first such rule, compiler.CtFastPath), drop
// what conntrack calls INVALID.
func (g *rgen) statefulShapes() []*grule {
	var out []*grule
	for ci := range ir.BuiltinChains {
		if g.chance(60) {
			var spec []string
			switch g.rng.Intn(4) {
			case 0:
				spec = []string{"-m", "state", "--state", "RELATED,ESTABLISHED"}
			case 1:
				spec = []string{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED"}
			case 2:
				spec = []string{"-m", "conntrack", "--ctstate", "ESTABLISHED"}
			default:
				spec = []string{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "--ctstatus", "SEEN_REPLY"}
			}
			out = append(out, &grule{chain: ci, target: "ACCEPT", fixed: true, spec: append(spec, "-j", "ACCEPT")})
		}
		if g.chance(35) {
			spec := []string{"-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"}
			if g.chance(30) {
				spec = []string{"-m", "state", "--state", "INVALID", "-j", pick(g.rng, []string{"DROP", "LOG"})}
			}
			out = append(out, &grule{chain: ci, target: spec[len(spec)-1], fixed: true, spec: spec})
		}
	}
	return out
}
