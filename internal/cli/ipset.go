package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/settable"
)

// newIpsetStore returns the store `xfw ipset` works on: the network
// namespace's own, kept by the data plane beside the rulesets (it lives as
// long as xfw's programs: `xfw stop` removes the sets too), or a file when
// $XFW_IPSET_FILE names one. The data plane's lookup tables of the sets
// rules use are rebuilt from it when a command changes the sets
// (reapplySetRules).
var newIpsetStore = func() (ipset.Store, error) {
	if os.Getenv(ipset.FileEnv) != "" {
		fs, err := ipset.NewFileStore()
		if err != nil {
			return nil, err
		}
		return writtenStore{fs}, nil
	}
	return &namespaceStore{}, nil
}

// namespaceStore keeps the sets in the data plane of the current network
// namespace (dataplane.IpsetImage): a snapshot encoded by
// ipset.Sets.MarshalBinary, whose members stay encoded until used, and a
// journal of the member changes committed since (ipset.JournalRecord), so
// that adding or deleting a member of a large set neither decodes nor
// encodes the set.
type namespaceStore struct {
	// image and loaded are what the last Load read and returned.
	image  *dataplane.IpsetImage
	loaded *ipset.Sets
	// window holds the written tables the last Load read
	// (takeSetWrites), for a reload to catch up with.
	window *settable.WriteWindow
	// takeCounts makes Load move the data plane's running set entry
	// counts into the sets it returns (and stores), so that an `ipset`
	// command sees the true counters (settable.TakeCounts).
	takeCounts bool
}

// Load returns the namespace's sets (none when xfw holds none): the
// snapshot with the journal replayed.
func (n *namespaceStore) Load() (*ipset.Sets, error) {
	t := time.Now()
	im, err := dataplane.LoadIpsetImage()
	if err != nil {
		return nil, fmt.Errorf("read the network namespace's sets: %w", err)
	}
	ss := ipset.NewSets()
	if im != nil {
		if ss, err = ipset.DecodeImage(im.SnapshotPages(), im.Journal); err != nil {
			return nil, err
		}
	}
	n.image, n.loaded = im, ss
	dataplane.TraceSince("ipset: load sets", t)
	if im != nil {
		var w *settable.WriteWindow
		if ss, w, err = takeSetWrites(n, ss); err != nil {
			return nil, err
		}
		n.window.Close()
		n.window = w
	}
	if n.takeCounts && im != nil {
		counted := ss.Clone()
		changed, err := settable.TakeCounts(counted)
		if err != nil {
			return nil, err
		}
		if changed {
			if err := n.Commit(ss, counted); err != nil {
				return nil, fmt.Errorf("store the set counters: %w", err)
			}
			ss = counted
		}
	}
	return ss, nil
}

// Commit makes new the namespace's sets in one step: by a journal record
// when new only changes members of old's sets, else by a new snapshot.
func (n *namespaceStore) Commit(old, new *ipset.Sets) error {
	t := time.Now()
	defer dataplane.TraceSince("ipset: commit sets", t)
	if n.image != nil && old == n.loaded {
		if rec, ok := ipset.JournalRecord(old, new); ok && n.image.AppendJournal(rec) {
			n.loaded = new
			return nil
		}
	}
	data, err := new.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encode sets: %w", err)
	}
	opts, err := attachOptions()
	if err != nil {
		return err
	}
	if err := dataplane.SaveIpsetState(data, opts); err != nil {
		return err
	}
	n.image, n.loaded = nil, new
	return nil
}

// References counts nothing itself (ruleStore adds the rules' uses).
func (*namespaceStore) References(string) (int, error) { return 0, nil }

func init() {
	commands["ipset"] = runIpset
	frontEnds["ipset"] = runIpset
}

// runIpset is `ipset …`: one invocation under the network namespace's lock
// (lockNamespace; ipset has no -w: the kernel serialises its commands, so
// the lock is waited for). Sets in a file named by $XFW_IPSET_FILE, which
// commands of several namespaces may share, take xfw's lock as well.
func runIpset(name string, args []string, env Env) int {
	stdin := env.Stdin
	if ipset.ReadsStdin(args) {
		// Read the input before taking the lock: the writer of a pipe
		// (`ipset save | ipset restore`) may hold it.
		data, err := io.ReadAll(env.Stdin)
		if err != nil {
			fmt.Fprintf(env.Stderr, "ipset: read standard input: %v\n", err)
			return exitOther
		}
		stdin = bytes.NewReader(data)
	}
	t := time.Now()
	take := lockNamespace
	if os.Getenv(ipset.FileEnv) != "" {
		take = lock
	}
	unlock, err := take(waitSpec{set: true, gone: env.Gone})
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer unlock()
	// Names in members are looked up in the files as they are now, also
	// in the agent, whose process outlives this command.
	ipset.ForgetNetdb()
	dataplane.TraceSince("ipset: lock", t)
	store, err := newIpsetStore()
	if err != nil {
		fmt.Fprintf(env.Stderr, "ipset v%s: %v\n", ipset.Version, err)
		return exitOther
	}
	if ns, ok := store.(*namespaceStore); ok {
		ns.takeCounts = true
		defer func() { ns.window.Close() }()
	}
	rs := &ruleStore{Store: store}
	t = time.Now()
	status := ipset.Run(args, stdin, env.Stdout, env.Stderr, rs)
	dataplane.TraceSince("ipset: run", t)
	if rs.committed != nil {
		// Member changes patch the rules' lookup tables in place; other
		// changes, or a patch that cannot be made, load the rulesets that
		// use sets again, which builds every table afresh from the sets
		// just committed (no second decoding of the store).
		t = time.Now()
		patched, err := settable.Patch(rs.loaded, rs.committed)
		dataplane.TraceSince(fmt.Sprintf("ipset: patch set tables (%v, %v)", patched, err), t)
		if !patched || err != nil {
			fresh := map[string]bool{}
			d := ipset.ComputeDiff(rs.loaded, rs.committed)
			for _, ch := range d.Changed {
				fresh[ch.Set.Name] = true
			}
			err = reapplySetRules(&ipsetLookup{loaded: true, sets: rs.committed, fresh: fresh})
			if ns, ok := store.(*namespaceStore); ok && err == nil {
				err = catchUpSetWrites(ns.window)
				ns.window = nil
			}
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "ipset v%s: the sets changed, but the rules using them could not follow: %v\n", ipset.Version, err)
			return exitOther
		}
	}
	return status
}

// ruleStore is the ipset store as the firewall sees it: References counts
// the rules of the running rulesets (both families) that use a set, so a
// set in use cannot be destroyed or renamed, as with the kernel's ipset;
// Commit keeps the sets it stored.
type ruleStore struct {
	ipset.Store
	// committed holds the sets the last Commit stored, nil when none did;
	// loaded, those it replaced.
	committed, loaded *ipset.Sets
}

// Commit commits and keeps the new sets.
func (r *ruleStore) Commit(old, new *ipset.Sets) error {
	if err := r.Store.Commit(old, new); err != nil {
		return err
	}
	r.committed, r.loaded = new, old
	return nil
}

// References counts the set's uses in the running rulesets.
func (r *ruleStore) References(name string) (int, error) {
	n, err := r.Store.References(name)
	if err != nil {
		return 0, err
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		rs, err := loadRunning(fam)
		if err != nil {
			return 0, fmt.Errorf("read the running %s ruleset: %w", fam, err)
		}
		n += rs.SetUses(name)
	}
	return n, nil
}

// reapplySetRules loads the running rulesets that use sets again, so that
// the data plane's set tables follow the sets' new members (counters and
// limit buckets carried, recommit); sets serves the sets (those just committed). The caller holds
// the lock.
func reapplySetRules(sets *ipsetLookup) error {
	opts, err := attachOptions()
	if err != nil {
		return err
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		rs, err := loadRunning(fam)
		if err != nil {
			return err
		}
		if rs.SetUses("") == 0 {
			continue
		}
		if err := recommit(fam, rs, rs, opts, sets); err != nil {
			return fmt.Errorf("reload the %s ruleset: %w", fam, err)
		}
	}
	return nil
}
