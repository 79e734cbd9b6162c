package difftest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file decides which differences are the documented ones of xfw's
// REJECT replies (docs/differences.md), and nothing else. It is only asked
// about a case whose differences all vanish when every REJECT is replaced by
// DROP on both sides (Outcome.RejectOnly): the verdicts, LOG lines, counters
// and deliveries of everything else are then proven equal. Of the replies
// themselves, only these are accepted:
//
//   - xfw's replies sent back at once (without XDP metadata) pass no
//     chain (the kernel's REJECT sends its reply through ip_local_out):
//     a reply xfw sends where the kernel's OUTPUT dropped its own, or
//     where the kernel sends none (a first fragment, whose checksum it
//     cannot verify), counted in xfw's OUTPUT when a probe shows such a
//     reply; kernel-only LOG lines about its replies (for such a probe,
//     or one whose reply passes the kernel's chains alone);
//   - IPv4 options are neither echoed nor recorded in xfw's replies to a
//     packet fw sent itself (REJECT in OUTPUT; those to packets from gen
//     and sink are the kernel's): for such a packet with options, the
//     same reply but for the options (sameButOptions), logged in
//     OUTPUT without the options, counted with fewer bytes;
//   - a packet from gen or sink with a (spoofed) source of fw's own IPv6
//     link-local address: the kernel delivers its reply to fw's own
//     sockets; xfw sends none (replies to fw's other addresses and its
//     subnet-router anycast addresses go through OUTPUT and lo as the
//     kernel's, and are not excused: tests/e2e
//     TestRejectOwnSourceAgainstKernel; IPv4 drops such a packet as a
//     martian before INPUT and FORWARD, in both); counters higher in the
//     kernel only when the corpus has such a packet (the kernel's reply
//     passed its OUTPUT, where it may have been dropped);
//   - xfw's replies leave by the interface the packet came in on; the
//     kernel routes them: the same reply, byte for byte from the IP header
//     on, seen at gen by one and at sink by the other.
//
// Replies are paired in known_reply.go: every field the item does not
// explain must be the same.
//
// A reply the kernel sends and xfw does not, a reply whose bytes differ
// (but for options), a counter higher in xfw but in OUTPUT's chains with
// such a reply shown: none of these is accepted. (Replies to packets fw
// sends itself through lo pass OUTPUT and lo's INPUT as the kernel's do,
// bpf/reject_send.h: INPUT counters higher in xfw are not accepted.)

// replyRe matches an observation of a reply fw sent (to gen, to sink, or
// to its own sockets for a packet it sent itself): where, what, and the
// bytes in hex.
var replyRe = regexp.MustCompile(`^(?:at (gen|sink)|fw's sockets got) ?:? ?(ICMP error quoting it|answer)(?:: [^\n]*\n\s*|: .*?, \d+ bytes: )([0-9a-f]+)$`)

// countsRe matches a counter pair "[packets:bytes]".
var countsRe = regexp.MustCompile(`^\[(\d+):(\d+)\]$`)

// logReplyRe matches a LOG line about a probe's reply rather than the
// probe itself: attribution puts "ID=?" (IPv4) or "FLOWLBL=?" (IPv6) in
// the outer header of those (normLogLine). The outer header begins at
// " IN=" (the log prefix before it may hold any text, "[UFW BLOCK] " too)
// and ends where the quoted packet's "[SRC=" begins.
var logReplyRe = regexp.MustCompile(`^LOG: .*?\bIN=[^\[]*\b(ID|FLOWLBL)=\? `)

// isLogOfReply reports whether obs is a LOG line about a reply to a probe:
// in the kernel, REJECT's replies pass OUTPUT (and INPUT, through lo, when
// they are for fw itself), so rules there log them; xfw's replies sent
// back at once pass no chain, and fw's own stack's replies pass OUTPUT on
// both sides alike.
func isLogOfReply(obs string) bool {
	return logReplyRe.MatchString(obs)
}

// optionsNotEchoed reports whether xfw's replies to probe p differ from the
// kernel's in IPv4 options: fw sent the packet itself (REJECT in OUTPUT),
// with options. (Replies to packets from gen and sink echo them as the
// kernel's do, bpf/reject_opts.h.)
func optionsNotEchoed(p Probe) bool {
	return p.From == FromFw && hasIPv4Options(p)
}

// hasIPv4Options reports whether the probe's first packet carries IPv4
// options.
func hasIPv4Options(p Probe) bool {
	if len(p.Frames) == 0 {
		return false
	}
	b := p.Frames[0]
	if p.From != FromFw {
		b = b[min(l3Offset(b), len(b)):]
	}
	return len(b) > 0 && b[0]>>4 == 4 && b[0]&0xf > 5
}

// knownContext is what the explanation of one difference needs to know
// of the whole case.
type knownContext struct {
	// outputSide holds the chains a packet can pass from OUTPUT.
	outputSide map[string]bool
	// ipv4: the case is IPv4.
	ipv4 bool
	// xfwReplies: some probe shows a reply only xfw sent (its counters
	// may then be higher in xfw in the chains OUTPUT reaches).
	xfwReplies bool
}

// knownRejectDifference explains d as a documented difference of xfw's
// REJECT replies, or returns "" when it is not one.
func knownRejectDifference(d Difference, c *Corpus, k knownContext) string {
	switch d.Kind {
	case DiffCounters:
		return knownCountersDifference(d, k.outputSide, k.ipv4, k.xfwReplies)
	case DiffProbe:
		if d.Probe < 0 || d.Probe >= len(c.Probes) {
			return ""
		}
		return knownProbeDifference(d, c.Probes[d.Probe], k)
	default:
		return ""
	}
}

// knownProbeDifference explains a probe's difference d (DiffProbe; p is
// the probe) as documented ones of xfw's REJECT replies, or returns "".
func knownProbeDifference(d Difference, p Probe, k knownContext) string {
	kOnly, xOnly := oneSided(d.Kernel, d.XFW)
	xOnly, optionLogs := pairOptionLogs(p, kOnly, xOnly)
	xOnly, ownReply := withoutOwnReplyLogs(p, kOnly, xOnly)
	r, ok := tallyXFWReplies(xOnly)
	if !ok {
		return ""
	}
	var why []string
	if optionLogs > 0 {
		why = append(why, fmt.Sprintf("%d LOG line of a reply to a packet with IPv4 options, options not echoed", optionLogs))
	}
	if ownReply > 0 {
		why = append(why, fmt.Sprintf("%d LOG line of xfw's reply passing OUTPUT, where the kernel sent none", ownReply))
	}
	t, ok := matchKernelReplies(p, kOnly, r, optionLogs)
	if !ok {
		return ""
	}
	why = append(why, t.why...)
	if t.optioned > 0 {
		why = append(why, fmt.Sprintf("%d reply to a packet with IPv4 options, options not echoed", t.optioned))
	}
	if t.routed > 0 {
		why = append(why, fmt.Sprintf("%d reply routed by the kernel, sent back by the input interface by xfw", t.routed))
	}
	if n := len(xOnly) - t.routed - t.optioned; n > 0 {
		why = append(why, fmt.Sprintf("%d reply the kernel did not send (dropped in its OUTPUT, or none for this packet)", n))
	}
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, "; ")
}

// knownCountersDifference explains a counter difference (DiffCounters)
// as a documented one of xfw's REJECT replies, or returns "".
func knownCountersDifference(d Difference, outputSide map[string]bool, ipv4, xfwReplies bool) string {
	if len(d.Kernel) != 1 || len(d.XFW) != 1 {
		return ""
	}
	k, x := countsRe.FindStringSubmatch(d.Kernel[0]), countsRe.FindStringSubmatch(d.XFW[0])
	if k == nil || x == nil {
		return ""
	}
	kp, _ := strconv.ParseUint(k[1], 10, 64)
	kb, _ := strconv.ParseUint(k[2], 10, 64)
	xp, _ := strconv.ParseUint(x[1], 10, 64)
	xb, _ := strconv.ParseUint(x[2], 10, 64)
	// Nothing makes a counter higher in the kernel but the echoed
	// options below: xfw's replies pass the same chains, those to
	// spoofed sources of fw's own included (a counter difference alone
	// once hid a reply xfw sent and the kernel did not, another one
	// the answer to a reply REJECTed in OUTPUT: IPv4 seed 16).
	// The same replies counted, the kernel's longer: they echo the
	// IPv4 options of a packet fw sent, xfw's do not.
	if ipv4 && kp == xp && kb > xb {
		return "the kernel's REJECT replies echo IPv4 options (more bytes counted), xfw's do not"
	}
	// xfw's replies pass OUTPUT as the kernel's do: a reply xfw sends
	// and the kernel does not (a known probe difference, which must be
	// there: a counter alone says nothing of where its packet came
	// from) is counted in the chains OUTPUT reaches.
	if xfwReplies && outputSide[subjectChain(d.Subject)] && xp > kp && xb > kb {
		return "xfw's replies the kernel does not send counted in OUTPUT"
	}
	return ""
}

// oneSided returns the observations only the kernel has and those only
// xfw has (each observation counted as often as it occurs).
func oneSided(kernel, xfw []string) (kOnly, xOnly []string) {
	count := map[string]int{}
	for _, o := range kernel {
		count[o]++
	}
	for _, o := range xfw {
		if count[o] > 0 {
			count[o]--
		} else {
			xOnly = append(xOnly, o)
		}
	}
	for _, o := range kernel {
		if count[o] > 0 {
			count[o]--
			kOnly = append(kOnly, o)
		}
	}
	return kOnly, xOnly
}

// optionRe matches the IP options of a LOG line (--log-ip-options).
var optionRe = regexp.MustCompile(` OPT \([0-9A-F]*\)`)

// outerLenRe matches the outer header's length of a LOG line.
var outerLenRe = regexp.MustCompile(`\bLEN=\d+ `)

// withoutOptions returns a LOG line without its IP options and with its
// first (outer) LEN= field blanked.
func withoutOptions(obs string) string {
	obs = optionRe.ReplaceAllString(obs, "")
	if loc := outerLenRe.FindStringIndex(obs); loc != nil {
		obs = obs[:loc[0]] + "LEN=? " + obs[loc[1]:]
	}
	return obs
}

// pairOptionLogs pairs the LOG lines of xfw's replies to a packet fw sent
// with IPv4 options (optionsNotEchoed) with the kernel's that differ only in the options: the
// kernel's reply echoes them (its header's options and length) and quotes
// the packet with a timestamp or record-route option filled in, xfw's does
// neither (both pass OUTPUT). It returns the rest of xOnly and the pairs.
func pairOptionLogs(p Probe, kOnly, xOnly []string) (rest []string, pairs int) {
	if !optionsNotEchoed(p) {
		return xOnly, 0
	}
	return pairLogsBy(kOnly, xOnly, withoutOptions)
}

// pairLogsBy pairs xOnly's LOG lines about replies with kOnly's that are
// the same once norm has rewritten both, and returns the rest of xOnly
// and the pairs.
func pairLogsBy(kOnly, xOnly []string, norm func(string) string) (rest []string, pairs int) {
	kLogs := map[string]int{}
	for _, o := range kOnly {
		if isLogOfReply(o) {
			kLogs[norm(o)]++
		}
	}
	for _, o := range xOnly {
		if k := norm(o); isLogOfReply(o) && kLogs[k] > 0 {
			kLogs[k]--
			pairs++
			continue
		}
		rest = append(rest, o)
	}
	return rest, pairs
}

// withoutOwnReplyLogs takes out of xOnly xfw's LOG lines about its reply
// to a packet from outside when the kernel logged none of its own: xfw's
// replies pass OUTPUT as the kernel's do, so a reply the kernel does not
// send (options it will not echo, a first fragment) is logged by xfw
// alone. It returns the rest and how many it took.
func withoutOwnReplyLogs(p Probe, kOnly, xOnly []string) (rest []string, own int) {
	if p.From == FromFw {
		return xOnly, 0
	}
	for _, o := range kOnly {
		if isLogOfReply(o) {
			return xOnly, 0
		}
	}
	for _, o := range xOnly {
		if isLogOfReply(o) {
			own++
			continue
		}
		rest = append(rest, o)
	}
	return rest, own
}

// subjectChain returns the chain of a counter difference's subject ("-A
// CHAIN …" or ":CHAIN POLICY …").
func subjectChain(subject string) string {
	f := strings.Fields(subject)
	switch {
	case len(f) >= 2 && f[0] == "-A":
		return f[1]
	case len(f) >= 1 && strings.HasPrefix(f[0], ":"):
		return f[0][1:]
	}
	return ""
}

// jumpRe matches a rule's chain and its jump or goto target.
var jumpRe = regexp.MustCompile(`^-A (\S+) .*(?:-j|--jump|-g|--goto) (\S+)`)

// chainsReachedFrom returns the chains of ruleset (iptables-save text)
// that a packet can pass from chain start, start included.
func chainsReachedFrom(ruleset, start string) map[string]bool {
	edges, declared := map[string][]string{}, map[string]bool{}
	for _, line := range strings.Split(ruleset, "\n") {
		line = strings.TrimSpace(line)
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], ":") {
			declared[f[0][1:]] = true
		}
		if m := jumpRe.FindStringSubmatch(line); m != nil {
			edges[m[1]] = append(edges[m[1]], m[2])
		}
	}
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		ch := queue[0]
		queue = queue[1:]
		for _, next := range edges[ch] {
			if declared[next] && !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
	return seen
}

// explainRejectOnly returns, for each difference of a RejectOnly outcome
// of ruleset, its documented explanation, or the first difference that
// has none.
func explainRejectOnly(diffs []Difference, c *Corpus, ruleset string, plan Plan) (why []string, unexplained *Difference) {
	outputSide := chainsReachedFrom(ruleset, "OUTPUT")
	xfwReplies := false
	for _, d := range diffs {
		if _, xOnly := oneSided(d.Kernel, d.XFW); d.Kind == DiffProbe && len(xOnly) > 0 {
			xfwReplies = true
		}
	}
	k := knownContext{outputSide: outputSide, ipv4: plan.Family == ir.IPv4, xfwReplies: xfwReplies}
	for i, d := range diffs {
		w := knownRejectDifference(d, c, k)
		if w == "" {
			return nil, &diffs[i]
		}
		why = append(why, w)
	}
	return why, nil
}
