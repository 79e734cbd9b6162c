package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// netns is a network namespace the benchmark created for the kernel set
// builds (ipset, nft); remove deletes it, also on SIGINT/SIGTERM.
type netns struct {
	name string
	stop chan struct{}
}

// newNetns creates the namespace and arranges its removal on a signal.
func newNetns() (*netns, error) {
	n := &netns{name: fmt.Sprintf("xfwlpm-%d", os.Getpid()), stop: make(chan struct{})}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", n.name, err, out)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			n.remove()
			fmt.Fprintf(os.Stderr, "lpmbench: %v: removed namespace %s\n", s, n.name)
			os.Exit(1)
		case <-n.stop:
			signal.Stop(sig)
		}
	}()
	return n, nil
}

// remove deletes the namespace (and with it every set built inside).
func (n *netns) remove() {
	_ = exec.Command("ip", "netns", "delete", n.name).Run()
}

// close removes the namespace and stops watching for signals.
func (n *netns) close() {
	close(n.stop)
	n.remove()
}

// timed runs a command inside the namespace and returns its wall time.
func (n *netns) timed(args ...string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		if len(out) > 400 {
			out = out[:400]
		}
		return 0, fmt.Errorf("%v: %v: %s", args, err, out)
	}
	return d, nil
}

// writeLines writes a file line by line.
func writeLines(path string, emit func(w *bufio.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	emit(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// ipsetRestore returns the time of `ipset restore` of a hash:net set of the
// prefixes (ipset's hash:net takes no /0: those are left out).
func (n *netns) ipsetRestore(dir string, prefixes []netip.Prefix) (time.Duration, error) {
	path := filepath.Join(dir, "ipset.restore")
	family := "inet"
	if len(prefixes) > 0 && prefixes[0].Addr().Is6() {
		family = "inet6"
	}
	err := writeLines(path, func(w *bufio.Writer) {
		fmt.Fprintf(w, "create xfwlpm hash:net family %s hashsize %d maxelem %d\n", family, max(1024, len(prefixes)), max(65536, len(prefixes)))
		for _, p := range prefixes {
			if p.Bits() > 0 {
				fmt.Fprintf(w, "add xfwlpm %s\n", p)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	d, err := n.timed("ipset", "restore", "-file", path)
	if err != nil {
		return 0, err
	}
	_, _ = n.timed("ipset", "destroy", "xfwlpm")
	return d, nil
}

// nftIntervalSet returns the time of `nft -f` loading an interval set of the
// prefixes (auto-merge: overlapping prefixes are allowed), in one
// transaction of many add-element commands.
func (n *netns) nftIntervalSet(dir string, prefixes []netip.Prefix) (time.Duration, error) {
	path := filepath.Join(dir, "set.nft")
	typ := "ipv4_addr"
	if len(prefixes) > 0 && prefixes[0].Addr().Is6() {
		typ = "ipv6_addr"
	}
	const perCommand = 10000
	err := writeLines(path, func(w *bufio.Writer) {
		fmt.Fprintf(w, "table inet xfwlpm {\n\tset s {\n\t\ttype %s\n\t\tflags interval\n\t\tauto-merge\n\t}\n}\n", typ)
		for i := 0; i < len(prefixes); i += perCommand {
			fmt.Fprint(w, "add element inet xfwlpm s { ")
			for j := i; j < min(i+perCommand, len(prefixes)); j++ {
				if j > i {
					fmt.Fprint(w, ", ")
				}
				fmt.Fprint(w, prefixes[j])
			}
			fmt.Fprint(w, " }\n")
		}
	})
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	d, err := n.timed("nft", "-f", path)
	if err != nil {
		return 0, err
	}
	_, _ = n.timed("nft", "delete", "table", "inet", "xfwlpm")
	return d, nil
}
