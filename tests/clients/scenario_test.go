package clients

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// probeTimeout bounds one probe connection: a dropped SYN shows as a
// time-out (the same on both firewalls; nothing asserts on timing).
const probeTimeout = 1500 * time.Millisecond

// Where a probe comes from: the client's main address, or its second one
// (the address the scenarios ban or deny).
const (
	fromClient = iota
	fromOther
)

// probe is one TCP connection from the client namespace to a server in fw.
type probe struct {
	from int
	fam  int
	port uint16
	want nettest.Outcome
}

func (p probe) String() string {
	who := "client"
	if p.from == fromOther {
		who = "other"
	}
	return fmt.Sprintf("%s -> IPv%d port %d", who, p.fam, p.port)
}

// step is client commands, then the probes, then the rulesets compared.
type step struct {
	name   string
	run    func(s *stack) error
	probes []probe
}

// scenario is one client's run: what each stack needs mounted, the
// daemons it starts, the steps, the families whose rulesets are compared.
type scenario struct {
	name string
	// prepare returns the binds of a stack's mount namespace (copies of the
	// client's configuration in dir).
	prepare func(t testing.TB, kind, dir string) []bind
	// start starts the client's daemons in the stack, if it has any.
	start func(t testing.TB, s *stack) error
	steps []step
	fams  []int
	// sets: `ipset save` is compared too; nat: the IPv4 nat table too.
	sets  bool
	nat   bool
	ports []uint16
}

// stepResult is what a step gave on one stack.
type stepResult struct {
	err      error
	outcomes []nettest.Outcome
	saves    map[int]string
}

// runScenario builds a stack for the kernel and one for xfw, runs the
// steps on both at once, and compares: every probe must end as the kernel's
// (and as the scenario expects), every ruleset must be the kernel's.
func runScenario(t *testing.T, sc scenario) {
	requirePackages(t)
	xfw := xfwPath(t)
	stacks := map[string]*stack{}
	for _, kind := range []string{kindKernel, kindXFW} {
		dir := t.TempDir()
		var binds []bind
		if sc.prepare != nil {
			binds = sc.prepare(t, kind, dir)
		}
		s := newStack(t, kind, xfw, binds)
		s.confDir = dir
		addOtherAddress(t, s)
		for _, port := range sc.ports {
			for _, fam := range sc.fams {
				nettest.StartTCPServer(t, s.topo.FwNS, netip.AddrPortFrom(fwAddr(s, fam), port))
			}
		}
		stacks[kind] = s
	}
	if sc.start != nil {
		errs := each(stacks, func(s *stack) error { return sc.start(t, s) })
		if errs[kindKernel] != nil {
			t.Fatalf("%s with the kernel's iptables did not start (the test's premise): %v", sc.name, errs[kindKernel])
		}
		if errs[kindXFW] != nil {
			t.Fatalf("%s with xfw did not start: %v", sc.name, errs[kindXFW])
		}
	}
	for _, st := range sc.steps {
		results := map[string]*stepResult{}
		var mu sync.Mutex
		each(stacks, func(s *stack) error {
			r := runStep(s, sc, st)
			mu.Lock()
			results[s.kind] = r
			mu.Unlock()
			return nil
		})
		if !compareStep(t, sc, st, stacks, results) {
			return
		}
	}
}

// each runs fn on both stacks at once and returns their errors.
func each(stacks map[string]*stack, fn func(s *stack) error) map[string]error {
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for kind, s := range stacks {
		wg.Add(1)
		go func(kind string, s *stack) {
			defer wg.Done()
			err := fn(s)
			mu.Lock()
			errs[kind] = err
			mu.Unlock()
		}(kind, s)
	}
	wg.Wait()
	return errs
}

// runStep runs one step of scenario sc on one stack.
func runStep(s *stack, sc scenario, st step) *stepResult {
	r := &stepResult{saves: map[int]string{}}
	if st.run != nil {
		if r.err = st.run(s); r.err != nil {
			return r
		}
	}
	for _, p := range st.probes {
		src := netip.AddrPortFrom(clientAddr(s, p.from, p.fam), 0)
		dst := netip.AddrPortFrom(fwAddr(s, p.fam), p.port)
		a := nettest.TCPConnect(s.topo.GenNS, dst, nettest.WithSource(src), nettest.WithTimeout(probeTimeout))
		r.outcomes = append(r.outcomes, a.Outcome)
	}
	for _, fam := range sc.fams {
		save, err := s.savedRuleset(fam)
		if err != nil {
			r.err = err
			return r
		}
		r.saves[fam] = subnetNeutral(s, save)
	}
	if sc.nat {
		save, err := s.savedTable(4, "nat")
		if err != nil {
			r.err = err
			return r
		}
		r.saves[natKey] = subnetNeutral(s, save)
	}
	if sc.sets {
		out, err := s.run("ipset", "save")
		if err != nil {
			r.err = err
			return r
		}
		r.saves[setsKey] = subnetNeutral(s, setInitval.ReplaceAllString(out, ""))
	}
	return r
}

// compareStep reports how xfw's step differs from the kernel's; it returns
// false when the scenario cannot go on.
func compareStep(t *testing.T, sc scenario, st step, stacks map[string]*stack, results map[string]*stepResult) bool {
	t.Helper()
	k, x := results[kindKernel], results[kindXFW]
	if k.err != nil {
		t.Fatalf("%s, step %q with the kernel's iptables failed (the test's premise): %v", sc.name, st.name, k.err)
	}
	if x.err != nil {
		var why []string
		for _, fam := range sc.fams {
			why = append(why, fmt.Sprintf("IPv%d: %s", fam, whyRefused(stacks[kindKernel], stacks[kindXFW], fam)))
		}
		t.Errorf("%s, step %q with xfw failed: %v\nxfw on the kernel's ruleset after this step:\n%s",
			sc.name, st.name, x.err, strings.Join(why, "\n"))
		return false
	}
	for i, p := range st.probes {
		if k.outcomes[i] != p.want {
			t.Errorf("%s, step %q: %v: the kernel's iptables gave %s, the scenario expects %s", sc.name, st.name, p, k.outcomes[i], p.want)
		}
		if x.outcomes[i] != k.outcomes[i] {
			t.Errorf("%s, step %q: %v: xfw gave %s, the kernel's iptables %s", sc.name, st.name, p, x.outcomes[i], k.outcomes[i])
		}
	}
	ok := true
	for _, fam := range sc.fams {
		if k.saves[fam] == x.saves[fam] {
			continue
		}
		ok = false
		t.Errorf("%s, step %q: IPv%d ruleset differs from the kernel's:\n%s\nxfw on the kernel's ruleset: %s",
			sc.name, st.name, fam, lineDiff(k.saves[fam], x.saves[fam]), whyRefused(stacks[kindKernel], stacks[kindXFW], fam))
	}
	if sc.nat && k.saves[natKey] != x.saves[natKey] {
		ok = false
		t.Errorf("%s, step %q: the IPv4 nat table differs from the kernel's:\n%s", sc.name, st.name, lineDiff(k.saves[natKey], x.saves[natKey]))
	}
	if sc.sets && k.saves[setsKey] != x.saves[setsKey] {
		ok = false
		t.Errorf("%s, step %q: the sets (ipset save) differ from the kernel's:\n%s", sc.name, st.name, lineDiff(k.saves[setsKey], x.saves[setsKey]))
	}
	return ok
}

// setsKey and natKey are the keys of `ipset save`'s output and of the
// IPv4 nat table among a step's saves (the families' filter tables are
// under 4 and 6).
const (
	setsKey = 0
	natKey  = -4
)

// setInitval is the random hash seed in `ipset save`.
var setInitval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

// subnetNeutral writes the stack's addresses with "N" for the topology's
// subnet number, which differs between the two stacks.
func subnetNeutral(s *stack, text string) string {
	x := s.topo.Subnet
	text = strings.ReplaceAll(text, fmt.Sprintf("10.%d.", x), "10.N.")
	return strings.ReplaceAll(text, fmt.Sprintf("fd00:%d:", x), "fd00:N:")
}

// lineDiff lists the lines only the kernel's text has ("-") and those only
// xfw's has ("+").
func lineDiff(kernel, xfw string) string {
	count := map[string]int{}
	for _, l := range strings.Split(xfw, "\n") {
		count[l]++
	}
	var b strings.Builder
	for _, l := range strings.Split(kernel, "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		b.WriteString("- " + l + "\n")
	}
	for _, l := range strings.Split(xfw, "\n") {
		if count[l] > 0 {
			count[l]--
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// otherHost is the host number of the client's second address.
const otherHost = 3

// addOtherAddress gives the client namespace a second address on its link.
func addOtherAddress(t testing.TB, s *stack) {
	t.Helper()
	for _, fam := range []int{4, 6} {
		a := otherAddr(s, fam)
		bits := 24
		if fam == 6 {
			bits = 64
		}
		args := []string{"-n", s.topo.GenNS, "addr", "add", fmt.Sprintf("%s/%d", a, bits), "dev", s.topo.Gen.Ifname}
		if fam == 6 {
			args = append(args, "nodad")
		}
		if out, err := runIP(args...); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
}

// otherAddr is the client's second address of the family.
func otherAddr(s *stack, fam int) netip.Addr {
	if fam == 6 {
		b := s.topo.Gen.IPv6.As16()
		b[15] = otherHost
		return netip.AddrFrom16(b)
	}
	b := s.topo.Gen.IPv4.As4()
	b[3] = otherHost
	return netip.AddrFrom4(b)
}

// clientAddr is the source address of a probe.
func clientAddr(s *stack, from, fam int) netip.Addr {
	if from == fromOther {
		return otherAddr(s, fam)
	}
	if fam == 6 {
		return s.topo.Gen.IPv6
	}
	return s.topo.Gen.IPv4
}

// fwAddr is fw's address facing the client.
func fwAddr(s *stack, fam int) netip.Addr {
	if fam == 6 {
		return s.topo.FwIn.IPv6
	}
	return s.topo.FwIn.IPv4
}
