package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/logd"
	"github.com/xfw-dev/xfw/internal/metrics"
)

func init() { commands["agent"] = runAgent }

const agentUsage = `usage: xfw agent [--poll DURATION] [--metrics ADDR] [--no-log] [--no-guard] [--no-commands]

Keeps xfw's programs on every interface of the current network namespace,
in the foreground, until SIGINT or SIGTERM (the xfw-agent unit runs it):

  - a new interface gets the programs and the running rulesets (recompiled
    for it, as xfw sync does) as soon as the kernel announces it;
  - an address change brings the local-address table up to date;
  - a route change brings the data plane's copy of the main routing
    table up to date (the routes' mtu for TCPMSS --clamp-mss-to-pmtu);
  - a program removed from an interface (ip link set dev X xdp off, a
    detached TCX program) is put back, and the event is logged;
  - the data plane's LOG lines are written to standard output in the
    kernel's format (to the journal under systemd), unless --no-log;
  - with --metrics ADDR (host:port), Prometheus metrics are served at
    http://ADDR/metrics (xfw metrics' text, with the agent's attach events
    and the guard's drops);
  - while a ruleset is loaded, a namespace-wide guard (netfilter hooks at
    PRE_ROUTING and POST_ROUTING, before every other hook) drops the
    packets of any interface that does not run xfw's programs yet, so a
    new or stripped interface carries nothing unfiltered (--no-guard: no
    guard). Where a bpffs is mounted ($XFW_BPFFS, default /sys/fs/bpf)
    the guard is pinned: an agent that dies leaves it in force and the
    next one takes it over; one told to end removes it, as xfw stop does;
  - the XDP fast path's targets (xfw fastpath) are decided again as soon
    as the kernel announces a change they depend on (tc qdiscs and
    filters, nftables tables and chains, a device's XDP features), and
    within a second of a change of connections tracked by the kernel,
    IPsec policies or another user's TCX programs;
  - the iptables commands run in the namespace (iptables, ip6tables, their
    -save and -restore, by root, of this build) are served in the agent,
    which keeps the running state open between them: they start in a
    fraction of a process's time, with the same output and exit status
    (--no-commands: each runs in its own process).

The checks run on every link event and at least every --poll (default
100ms: a detached TCX program sends no event). Filtering never depends on
the agent: the programs stay attached when it stops or dies.
`

// agentPoll is the default interval of the attachment check.
const agentPoll = 100 * time.Millisecond

// addrSettle batches a burst of address events into one resync.
const addrSettle = 50 * time.Millisecond

// routeSettle batches a burst of route events (a full table's arrival is
// many events) or policy rule events into one copy of the routes: the
// main table's MTUs for TCPMSS --clamp-mss-to-pmtu, IPv6 prefix lengths
// for ICMP rate limits, and the local table copy, which holds main-table
// routes too (-m addrtype and routing see them through it).
const routeSettle = 50 * time.Millisecond

// routeBuffer is the route subscription's receive buffer: an overflow
// loses events, which the next copy of the routes makes up for.
const routeBuffer = 1 << 20

// agent is `xfw agent`'s state.
type agent struct {
	out, errOut io.Writer
	mu          sync.Mutex // serialises the writers of out and errOut
	// seen are the interfaces (by index) the agent has found protected:
	// one of them without the programs had them removed.
	seen map[int]bool
	// protected are the interfaces (by index) protected at the agent's
	// last look (nil before the first): one protected now and not then
	// is logged as attached (announce).
	protected map[int]bool
	// guard is the namespace-wide backstop while xfw is loaded (nil with
	// --no-guard, or while nothing is loaded).
	guard   *dataplane.Guard
	noGuard bool
	// guardMu guards guard against the metrics' readers.
	guardMu sync.Mutex
	// events count the attachments, for the metrics.
	events metrics.Events
	// lastErr is the last error of the periodic check, logged once.
	lastErr string
	// groups are the device groups last seen (agent_groups.go).
	groups map[int]uint32
	// serving: the agent serves the namespace's commands, and keeps the
	// programs loaded and verified ahead while xfw is not loaded
	// (dataplane.KeepLoadReady), for the first command it serves.
	serving bool
	// fpPolled are the fast path's polled facts last seen
	// (agent_fastpath.go).
	fpPolled string
	// fpBlind is set when a notification the fast path's decision
	// follows is not received: it is then decided again every fpRecheck.
	fpBlind atomic.Bool
	// fpPending is why a decision waits for the lock, "" for none.
	fpPending string
	// mcBlind is set when the notifications of multicast groups joined
	// and left are not received: the groups are then read every
	// mcRecheck (agent_mcast.go).
	mcBlind atomic.Bool
	// mcfText is /proc/net/mcfilter as the agent last read it.
	mcfText string
	// inSys are the input sysctls last mirrored (agent_insysctl.go).
	inSys string
	// settled is the attachments' fingerprint at the last check that
	// found everything in order ("" for none), settledLoaded whether xfw
	// was loaded then: a check that reads the same stops there (check).
	settled       string
	settledLoaded bool
}

func (a *agent) logf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.errOut, "xfw agent: "+format+"\n", args...)
}

// runAgent is `xfw agent`.
func runAgent(name string, args []string, env Env) int {
	fs := flag.NewFlagSet("xfw agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	poll := fs.Duration("poll", agentPoll, "")
	noLog := fs.Bool("no-log", false, "")
	noGuard := fs.Bool("no-guard", false, "")
	noCommands := fs.Bool("no-commands", false, "")
	metricsAddr := fs.String("metrics", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *poll <= 0 {
		fmt.Fprint(env.Stderr, agentUsage)
		return exitParameter
	}
	inAgent.Store(true)
	// The input sysctls and source filters read every second (a pread of
	// a kept descriptor each).
	dataplane.KeepProcFiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &agent{out: env.Stdout, errOut: env.Stderr, seen: map[int]bool{}, noGuard: *noGuard}
	defer a.closeGuard()
	var wg sync.WaitGroup
	if !*noLog {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.logLines(ctx)
		}()
	}
	if *metricsAddr != "" {
		c := &metrics.Collector{Events: &a.events, GuardDrops: a.guardDrops,
			Lock: func() (func(), error) { return lock(waitSpec{set: true}) }}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.logf("serving metrics at http://%s%s", *metricsAddr, metrics.MetricsPath)
			if err := c.Serve(ctx, *metricsAddr, a.logf); err != nil {
				a.logf("metrics: %v", err)
				stop()
			}
		}()
	}
	if !*noCommands {
		a.serveCommands(ctx, &wg)
	}
	err := a.follow(ctx, *poll)
	stop()
	wg.Wait()
	dataplane.DropLoadReady()
	if err != nil {
		a.logf("%v", err)
		return exitOther
	}
	return exitOK
}

// logLines copies the data plane's LOG lines to the agent's output until
// ctx ends, starting again after an error.
func (a *agent) logLines(ctx context.Context) {
	w := &lockedWriter{w: a.out, mu: &a.mu}
	for ctx.Err() == nil {
		err := logd.Run(ctx, w, false)
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		a.logf("LOG lines: %v (again in 1s)", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// logOnce logs a message unless it repeats the previous one (a check that
// fails every --poll would flood the journal).
func (a *agent) logOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if msg == a.lastErr {
		return
	}
	a.lastErr = msg
	a.logf("%s", msg)
}

// lockedWriter serialises writes to w with the agent's other output.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// follow watches links and addresses and keeps the programs attached.
func (a *agent) follow(ctx context.Context, poll time.Duration) error {
	done := make(chan struct{})
	defer close(done)
	subErr := make(chan error, 2)
	onErr := func(err error) {
		select {
		case subErr <- err:
		default:
		}
	}
	// The link and address subscriptions end on their own (subscribeLinks)
	// and are made again, each with a done of its own that releases its
	// socket.
	linksDone, addrsDone := make(chan struct{}), make(chan struct{})
	defer func() { close(linksDone); close(addrsDone) }()
	links, err := subscribeLinks(linksDone)
	if err != nil {
		return err
	}
	addrs, err := subscribeAddrs(addrsDone)
	if err != nil {
		return err
	}
	// Routes and IPv4 policy rules: the data plane's copies of the main
	// and local tables (routeSettle).
	rs, err := subscribeRoutes()
	if err != nil {
		return err
	}
	defer func() { rs.stop() }()
	rules := make(chan struct{}, 1)
	if err := subscribeRules(rules, done, onErr); err != nil {
		return fmt.Errorf("subscribe to IPv4 policy rule events: %w", err)
	}
	var routeSettled <-chan time.Time
	fpEvents := make(chan string, 1)
	a.watchFastPathFacts(ctx, fpEvents)
	mcEvents := make(chan struct{}, 1)
	if !a.watchGroups(ctx, mcEvents) {
		a.mcBlind.Store(true)
	}
	var mcAgain <-chan time.Time
	mcTicker := time.NewTicker(mcRecheck)
	defer mcTicker.Stop()
	fpTicker := time.NewTicker(fpRecheck)
	defer fpTicker.Stop()
	var fpSettled <-chan time.Time
	fpWhy := ""
	a.groups = deviceGroups()
	a.check("start")
	a.fpPolled = dataplane.FastPathPolledFacts()
	a.refreshFastPath("start")
	a.refreshInputSysctls()
	// Logged after the first check: from here on, an interface found
	// without the programs had them removed (re-attached), and a caller
	// waiting for this line knows which interfaces the agent has seen.
	a.logf("following the interfaces of this network namespace (check every %v)", poll)
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			return fmt.Errorf("netlink subscription: %w", err)
		case u, ok := <-links:
			if !ok {
				// The subscription ended (its socket's receive failed:
				// ENOBUFS under a burst of events): a new one, and the
				// check below covers the events lost.
				a.logOnce("link events: the subscription ended, events lost (subscribed again)")
				close(linksDone)
				linksDone = make(chan struct{})
				if links, err = subscribeLinks(linksDone); err != nil {
					return err
				}
			} else if u.Header.Type == unix.RTM_DELLINK {
				continue // the kernel removed its attachments with it
			}
			drainLinks(links)
			if a.groupsChanged() {
				// -m devgroup's interface sets are compiled.
				a.resync("device group change")
			}
			a.check("link event")
			// A device's state (up, down, its peer) may change the
			// fast path's targets: decided after the burst, not
			// before the next check.
			if fpSettled == nil {
				fpSettled, fpWhy = time.After(fpSettle), "link event"
			}
		case _, ok := <-addrs:
			if !ok {
				// Ended as a link subscription may: a new one, and the
				// refresh covers the events lost.
				a.logOnce("address events: the subscription ended, events lost (subscribed again)")
				close(addrsDone)
				addrsDone = make(chan struct{})
				if addrs, err = subscribeAddrs(addrsDone); err != nil {
					return err
				}
			}
			// The local-address table at once (a new address would
			// otherwise pass as "not for this host" until the sync);
			// the recompile after the burst.
			if err := dataplane.RefreshLocal(); err != nil {
				a.logf("address change: refresh the local addresses: %v", err)
			}
			settle = time.After(addrSettle)
		case <-settle:
			settle = nil
			a.resync("address change")
		case _, ok := <-rs.updates:
			if !ok {
				// The subscription ended (its socket failed, events
				// lost): a new one, and the copy covers what was lost.
				rs.stop()
				if rs, err = subscribeRoutes(); err != nil {
					return err
				}
			}
			if routeSettled == nil {
				routeSettled = time.After(routeSettle)
			}
		case <-rs.failed:
			// Maybe events lost: a copy covers them.
			if routeSettled == nil {
				routeSettled = time.After(routeSettle)
			}
		case <-rules:
			if routeSettled == nil {
				routeSettled = time.After(routeSettle)
			}
		case <-routeSettled:
			routeSettled = nil
			// RefreshLocal copies the main table's routes too, from
			// the same route dump as the local table.
			if err := dataplane.RefreshLocal(); err != nil {
				a.logf("route change: refresh the local table and the routes: %v", err)
			}
		case <-mcEvents:
			mcAgain = a.refreshGroups()
		case <-mcTicker.C:
			// Source filters change without a notification.
			if mcAgain == nil && (a.mcBlind.Load() || a.sourceFiltersChanged()) {
				mcAgain = a.refreshGroups()
			}
		case <-mcAgain:
			mcAgain = a.refreshGroups()
		case <-ticker.C:
			a.check("")
			if a.fpPending != "" {
				a.refreshFastPath(a.fpPending)
			}
		case why := <-fpEvents:
			if fpSettled == nil {
				fpSettled, fpWhy = time.After(fpSettle), why+" notification"
			}
		case <-fpSettled:
			fpSettled = nil
			a.refreshFastPath(fpWhy)
		case <-fpTicker.C:
			a.refreshInputSysctls()
			if f := dataplane.FastPathPolledFacts(); f != a.fpPolled || a.fpBlind.Load() {
				a.fpPolled = f
				// The served commands' decision too (fastpath_watch.go).
				dataplane.ForgetFastPathDecision()
				a.refreshFastPath("periodic check")
			}
		}
	}
}

// routeSub is a subscription to route events: updates (closed when the
// subscription ends: its socket failed), and failed on each error.
type routeSub struct {
	updates chan netlink.RouteUpdate
	failed  chan struct{}
	done    chan struct{}
}

// subscribeRoutes subscribes to both families' route events.
func subscribeRoutes() (*routeSub, error) {
	rs := &routeSub{updates: make(chan netlink.RouteUpdate, 256), failed: make(chan struct{}, 1),
		done: make(chan struct{})}
	onErr := func(error) {
		select {
		case rs.failed <- struct{}{}:
		default:
		}
	}
	if err := netlink.RouteSubscribeWithOptions(rs.updates, rs.done, netlink.RouteSubscribeOptions{
		ErrorCallback: onErr, ReceiveBufferSize: routeBuffer}); err != nil {
		return nil, fmt.Errorf("subscribe to route events: %w", err)
	}
	return rs, nil
}

// stop ends the subscription (nil: none).
func (rs *routeSub) stop() {
	if rs != nil {
		close(rs.done)
	}
}

// subscribeRules signals ch at every IPv4 policy rule change until done
// closes: the first rule configured splits the kernel's merged local and
// main tables, which changes what the local table copy holds
// (internal/dataplane/hostroutes.go).
func subscribeRules(ch chan<- struct{}, done <-chan struct{}, onErr func(error)) error {
	s, err := nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_RULE)
	if err != nil {
		return err
	}
	go func() {
		<-done
		s.Close()
	}()
	go func() {
		for {
			if _, _, err := s.Receive(); err != nil {
				select {
				case <-done:
				default:
					onErr(err)
				}
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return nil
}

// drainLinks discards the link events already queued: one check covers
// them. A closed channel (the subscription ended) has none.
func drainLinks(links chan netlink.LinkUpdate) {
	for {
		select {
		case _, ok := <-links:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// subscribeLinks subscribes to the namespace's link events until done
// closes. A receive error ends the subscription: the netlink package
// closes the channel, and the agent subscribes again (no ErrorCallback:
// an error is the closed channel).
func subscribeLinks(done <-chan struct{}) (chan netlink.LinkUpdate, error) {
	links := make(chan netlink.LinkUpdate, 256)
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{}); err != nil {
		return nil, fmt.Errorf("subscribe to link events: %w", err)
	}
	return links, nil
}

// subscribeAddrs is subscribeLinks for address events.
func subscribeAddrs(done <-chan struct{}) (chan netlink.AddrUpdate, error) {
	addrs := make(chan netlink.AddrUpdate, 256)
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{}); err != nil {
		return nil, fmt.Errorf("subscribe to address events: %w", err)
	}
	return addrs, nil
}

// check resyncs when an interface lacks xfw's programs, logging which and
// how long the repair took. It reads the attachments' fingerprint first
// (dataplane.AttachFingerprint: the devices and the program ids on their
// hooks, a bpf call per hook and device) and stops there when it equals
// the one of the last check that found everything in order: Status, which
// opens the running state's maps and programs, would report the same.
func (a *agent) check(why string) {
	fp, perr := dataplane.AttachFingerprint()
	if perr == nil && a.settled != "" && fp == a.settled {
		if a.serving {
			dataplane.KeepLoadReady(a.settledLoaded, a.loadedAhead)
		}
		return
	}
	a.settled = ""
	st, err := dataplane.Status()
	if err != nil {
		a.logOnce("status: %v", err)
		return
	}
	a.lastErr = ""
	if a.serving {
		dataplane.KeepLoadReady(st.Loaded, a.loadedAhead)
	}
	if !st.Loaded {
		a.closeGuard()
		a.settle(fp, perr, false)
		return
	}
	guarded := a.guardTo(st)
	if len(st.Unprotected()) == 0 {
		a.announce(st, nil, orEvent(why), 0)
		if guarded {
			a.settle(fp, perr, true)
		}
		return
	}
	start := time.Now()
	err = resync()
	a.reportAttached(st, orEvent(why), time.Since(start), err)
}

// settle remembers fp, the fingerprint read before a check that found
// everything in order (loaded: xfw was), so that the next checks stop at
// an equal one. A fingerprint that could not be read settles nothing. A
// change between the fingerprint and the check's Status makes the next
// fingerprint differ from fp: that check is done in full.
func (a *agent) settle(fp string, err error, loaded bool) {
	if err != nil || fp == "" {
		return
	}
	a.settled, a.settledLoaded = fp, loaded
}

// loadedAhead logs the end of a load ahead (dataplane.KeepLoadReady).
func (a *agent) loadedAhead(r dataplane.LoadAhead) {
	if r.Err != nil {
		a.logf("loading the programs ahead failed (the first command loads them): %v", r.Err)
		return
	}
	a.logf("programs loaded and verified ahead for the first command in %.0f ms (xfw_xdp id %d)",
		float64(r.Took.Microseconds())/1000, r.XDPProgramID)
}

// reportAttached logs the interfaces a sync (which took took) attached
// xfw's programs to: those protected after it and not in before, the
// status taken before it. An interface added while the sync ran is among
// them (the sync attaches to every interface it finds). It then admits
// them to the guard. When the sync failed, it logs before's unprotected
// interfaces as left open to the guard.
func (a *agent) reportAttached(before *dataplane.NamespaceStatus, why string, took time.Duration, err error) {
	if err != nil {
		for _, i := range before.Unprotected() {
			a.logf("%s lacks xfw's programs (%s) and could not be protected: %v", i.Name, i.Missing(), err)
		}
		return
	}
	after, serr := dataplane.Status()
	if serr != nil {
		a.logOnce("status: %v", serr)
		return
	}
	a.announce(after, before, why, took)
	a.guardTo(after)
}

// announce logs each interface st shows protected that was not at the
// agent's last look, then remembers st's. before is the status taken
// before the sync that took took (nil for a look without a sync): an
// interface it already shows protected, or one protected without a sync,
// was attached earlier by a sync whose own status did not show it yet (a
// veth listed before its peer was up) or by a command, and is logged as
// such. At the first look (the agent's start) only what its sync
// attached is logged: the others were protected before the agent came.
func (a *agent) announce(st, before *dataplane.NamespaceStatus, why string, took time.Duration) {
	was := map[int]dataplane.InterfaceStatus{}
	if before != nil {
		for _, i := range before.Interfaces {
			was[i.Index] = i
			if !i.Protected() {
				delete(a.protected, i.Index) // lost its programs since the last look
			}
		}
	}
	now := map[int]bool{}
	for _, i := range st.Interfaces {
		if !i.Protected() {
			continue
		}
		now[i.Index] = true
		if a.protected[i.Index] {
			continue
		}
		old, known := was[i.Index]
		bySync := before != nil && !(known && old.Protected())
		if a.protected == nil && !bySync {
			continue // protected before the agent came
		}
		verb, kind := "attached to new interface", metrics.Attach
		if a.seen[i.Index] {
			verb, kind = "re-attached to", metrics.Reattach
		}
		a.events.Add(i.Name, kind)
		if !bySync {
			a.logf("%s %s (by an earlier sync or a command; found at %s)", verb, i.Name, why)
			continue
		}
		if !known {
			old = dataplane.InterfaceStatus{XDPMode: "-"} // added during the sync: it had nothing
		}
		a.logf("%s %s (%s missing; %s, in %.1f ms)", verb, i.Name, old.Missing(), why, float64(took.Microseconds())/1000)
	}
	a.protected = now
	for idx := range now {
		a.seen[idx] = true
	}
}

// guardTo starts the guard if needed and admits exactly st's protected
// interfaces. It reports whether the guard is as it should be (false: it
// could not be started or updated, and the next check tries again).
func (a *agent) guardTo(st *dataplane.NamespaceStatus) bool {
	if a.noGuard {
		return true
	}
	ok := guardedOf(st)
	a.guardMu.Lock()
	defer a.guardMu.Unlock()
	if a.guard == nil {
		g, err := dataplane.StartGuard(ok)
		if err != nil {
			a.logf("guard not started (new interfaces are open until attached): %v", err)
			return false
		}
		a.guard = g
		// A command this agent serves admits what it attaches to the
		// guard it holds (dataplane.admitAttached); one that attached
		// between st and the guard's start found none: admit what runs
		// xfw's programs now.
		if now, err := dataplane.Status(); err == nil {
			if err := g.Admit(guardedOf(now)); err != nil {
				a.logf("guard: %v", err)
			}
		}
		how := "started"
		if g.Reused {
			how = "found in force (an earlier agent left it pinned)"
		}
		a.logf("guard %s: %d interface(s) admitted, traffic of any other is dropped until xfw runs on it", how, len(ok))
		return true
	}
	if err := a.guard.SetProtected(ok); err != nil {
		a.logf("guard: %v", err)
		return false
	}
	return true
}

// guardedOf returns what the guard is to know of st's protected
// interfaces.
func guardedOf(st *dataplane.NamespaceStatus) map[int]dataplane.GuardedInterface {
	ok := map[int]dataplane.GuardedInterface{}
	for _, i := range st.Interfaces {
		if i.Protected() {
			ok[i.Index] = dataplane.GuardedInterface{XDPProgID: i.XDPProgID, Veth: i.Kind == "veth"}
		}
	}
	return ok
}

// guardDrops reads the guard's drop counts for the metrics.
func (a *agent) guardDrops() (in, out uint64, ok bool) {
	a.guardMu.Lock()
	defer a.guardMu.Unlock()
	if a.guard == nil {
		return 0, 0, false
	}
	in, out, err := a.guard.Drops()
	return in, out, err == nil
}

// closeGuard removes the guard, pins included (xfw was stopped, or the
// agent is told to end: a guard nobody keeps would drop the traffic of
// every interface added later). An agent that dies leaves a pinned guard in
// force, and the next one takes it over.
func (a *agent) closeGuard() {
	a.guardMu.Lock()
	defer a.guardMu.Unlock()
	if a.guard == nil {
		return
	}
	if in, out, err := a.guard.Drops(); err == nil {
		a.logf("guard stopped; it dropped %d packet(s) arriving on and %d leaving by unprotected interfaces", in, out)
	}
	if err := a.guard.Remove(); err != nil {
		a.logf("guard: %v", err)
	}
	a.guard = nil
}

func orEvent(why string) string {
	if why == "" {
		return "periodic check"
	}
	return why
}

// resync is xfw sync from the agent, logged; the interfaces it attached
// to on the way (a sync attaches to every interface) are logged as check
// logs them.
func (a *agent) resync(why string) {
	st, err := dataplane.Status()
	if err != nil || !st.Loaded {
		return
	}
	start := time.Now()
	err = resync()
	took := time.Since(start)
	if err != nil {
		a.logf("%s: sync failed: %v", why, err)
		return
	}
	a.reportAttached(st, why, took, nil)
	a.logf("%s: synced in %.1f ms", why, float64(took.Microseconds())/1000)
}

// serveCommands serves the namespace's iptables commands until ctx ends
// (cmdserver.go). Filtering does not depend on it: without the socket the
// commands run in their own processes.
func (a *agent) serveCommands(ctx context.Context, wg *sync.WaitGroup) {
	srv, err := listenCommands(a.logf)
	if err != nil {
		a.logf("%v; the commands run in their own processes", err)
		return
	}
	if srv == nil {
		return
	}
	a.serving = true
	a.logf("serving the iptables commands of this namespace")
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.serve(ctx)
	}()
}
