package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

func init() {
	commands["sync"] = runSync
	commands["watch"] = runWatch
}

// resync recompiles the running rulesets against the namespace's current
// interfaces and addresses and swaps them in, counters kept: new interfaces
// get the programs, -i/-o names and the local-address table are brought up
// to date. The limit buckets go on, as the kernel's (recommit).
func resync() error {
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		return err
	}
	defer unlock()
	ao, err := attachOptions()
	if err != nil {
		return err
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		saved, _, err := dataplane.Running(fam)
		if err != nil {
			return err
		}
		if saved == nil {
			continue
		}
		sets := &ipsetLookup{}
		rs, err := loadRunning(fam)
		if err != nil {
			return err
		}
		if err := recommit(fam, rs, rs.Clone(), ao, sets); err != nil {
			return fmt.Errorf("%s: %w", fam, err)
		}
	}
	return nil
}

func runSync(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw sync")
		return exitParameter
	}
	if err := resync(); err != nil {
		fmt.Fprintf(env.Stderr, "xfw sync: %v\n", err)
		return exitOther
	}
	return exitOK
}

// watchSettle batches bursts of interface/address events into one resync.
const watchSettle = 200 * time.Millisecond

// runWatch follows interface and address changes in the namespace and
// resyncs after each burst, until interrupted.
func runWatch(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: xfw watch")
		return exitParameter
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	links := make(chan netlink.LinkUpdate, 64)
	addrs := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.LinkSubscribe(links, done); err != nil {
		fmt.Fprintf(env.Stderr, "xfw watch: %v\n", err)
		return exitOther
	}
	if err := netlink.AddrSubscribe(addrs, done); err != nil {
		fmt.Fprintf(env.Stderr, "xfw watch: %v\n", err)
		return exitOther
	}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-links:
			timer = time.After(watchSettle)
		case <-addrs:
			timer = time.After(watchSettle)
		case <-timer:
			timer = nil
			if err := resync(); err != nil {
				fmt.Fprintf(env.Stderr, "xfw watch: %v\n", err)
			} else {
				fmt.Fprintln(env.Stdout, "xfw watch: resynced")
			}
		}
	}
}
