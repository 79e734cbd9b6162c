package dataplane

import (
	"sync"
	"time"
)

// Loading the programs ahead for a first load.
//
// The first command in a namespace loads the maps and the programs, and the
// kernel verifies the programs: about a second of CPU (docs/benchmarks.md),
// which Apply spends after the command has parsed and compiled its ruleset.
// A command that will compile a large ruleset first (iptables-restore)
// calls Preload once it holds xfw's lock: when xfw is not loaded in the
// namespace, the programs are loaded and verified in the background while
// it parses and compiles, and Apply takes them (takePreload) instead of
// loading its own. Nothing loaded ahead is visible to other commands: a
// running xfw is found through its attached XDP program (currentUncached),
// and only Apply attaches. The session's end waits for a load still under
// way and closes what Apply did not take, so a command that fails first
// leaves nothing behind.
//
// A resident process (the agent) keeps a load ahead standing instead
// (KeepLoadReady): loaded while xfw is not loaded in its namespace, it
// outlives the sessions that do not take it, so the first command the
// agent serves attaches programs verified before it came. It is given up
// (closed) once xfw is loaded in the namespace by anyone, and at the
// process's end (DropLoadReady).

// preload is the session's load ahead, if one was started.
var preload struct {
	mu sync.Mutex
	// done is closed once st or err is set; nil: no load ahead.
	done chan struct{}
	st   *state
	err  error
	// standing: kept across sessions (KeepLoadReady) until taken or
	// dropped.
	standing bool
	// onReady, when set, is told of the load's end (KeepLoadReady).
	onReady func(LoadAhead)
	// failedAhead: a standing load failed; none is tried again until
	// xfw has been loaded in the namespace (by a command, which reports
	// its own failure).
	failedAhead bool
}

// LoadAhead is what a standing load ahead (KeepLoadReady) reports when it
// ends: the XDP program's ID on success, how long it took, or why it
// failed.
type LoadAhead struct {
	XDPProgramID uint32
	Took         time.Duration
	Err          error
}

// Preload starts loading the data plane in the background when a session
// (BeginSession) is active and xfw is not loaded in this namespace; Apply
// then takes what it loaded. It reports nothing: a failure to load is
// Apply's to report, as without it.
func Preload() {
	session.mu.Lock()
	active := session.active
	session.mu.Unlock()
	if !active {
		return
	}
	if cur, err := Current(); err != nil || cur != nil {
		if cur != nil {
			cur.Close() // a session's state stays open
		}
		return
	}
	preload.mu.Lock()
	defer preload.mu.Unlock()
	if preload.done == nil {
		startPreloadLocked()
	}
}

// startPreloadLocked starts loading the data plane in the background
// (preload.mu held, no load ahead started).
func startPreloadLocked() {
	done := make(chan struct{})
	preload.done = done
	go func() {
		start := time.Now()
		spec, err := loadSpec()
		var st *state
		if err == nil {
			st, err = loadUnkept(spec)
		}
		res := LoadAhead{Took: time.Since(start), Err: err}
		if st != nil {
			if id, _, err := st.programIDs(); err == nil {
				res.XDPProgramID = uint32(id)
			}
		}
		preload.mu.Lock()
		preload.st, preload.err = st, err
		ready := preload.onReady
		preload.mu.Unlock()
		close(done)
		if ready != nil {
			ready(res)
		}
	}()
}

// KeepLoadReady keeps a load ahead standing in a resident process while
// xfw is not loaded in its namespace (loaded: what Status reports now):
// it starts one when none is standing or under way, and gives a standing
// one up when xfw is loaded (by a command that took it, or by another
// process, whose programs the namespace runs instead). A load that failed
// is not tried again until xfw has been loaded. Nothing is done while a
// session is active (a command runs; loaded may be stale). ready, when not nil, is told of the
// end of each load it starts. The caller holds no session.
func KeepLoadReady(loaded bool, ready func(LoadAhead)) {
	// A command under way may have taken the load ahead and not attached
	// it yet: loaded would read false, and a second load start for
	// nothing (taking the CPU the command needs).
	session.mu.Lock()
	active := session.active
	session.mu.Unlock()
	if active {
		return
	}
	preload.mu.Lock()
	defer preload.mu.Unlock()
	if preload.done != nil {
		select {
		case <-preload.done:
		default:
			preload.standing = true // under way: kept standing when done
			return
		}
		if preload.err != nil {
			preload.failedAhead = true
			dropPreloadLocked()
		} else if loaded {
			dropPreloadLocked()
		}
	}
	if loaded {
		preload.failedAhead = false
	}
	if !loaded && preload.done == nil && !preload.failedAhead {
		preload.onReady = ready
		startPreloadLocked()
		preload.standing = true
	}
}

// DropLoadReady gives up a standing load ahead (at the resident process's
// end), waiting for one under way.
func DropLoadReady() {
	dropPreload(false)
}

// dropPreloadLocked closes a finished load ahead and forgets it
// (preload.mu held).
func dropPreloadLocked() {
	if preload.st != nil {
		preload.st.Close()
	}
	preload.done, preload.st, preload.err, preload.standing, preload.onReady = nil, nil, nil, false, nil
}

// takePreload waits for the load ahead, if one was started, and returns
// its state, now the session's (nil, nil: none was started).
func takePreload() (*state, error) {
	preload.mu.Lock()
	done := preload.done
	preload.mu.Unlock()
	if done == nil {
		return nil, nil
	}
	<-done
	preload.mu.Lock()
	st, err := preload.st, preload.err
	preload.done, preload.st, preload.err, preload.standing, preload.onReady = nil, nil, nil, false, nil
	preload.mu.Unlock()
	if err != nil {
		return nil, err
	}
	keepForSession(st)
	return st, nil
}

// discardPreload waits for a load ahead still under way and closes what
// Apply did not take, unless it is standing (KeepLoadReady).
func discardPreload() {
	dropPreload(true)
}

// dropPreload waits for the load ahead, if one was started, and closes it
// unless keepStanding and it is standing.
func dropPreload(keepStanding bool) {
	preload.mu.Lock()
	done, standing := preload.done, preload.standing
	preload.mu.Unlock()
	if done == nil || keepStanding && standing {
		return
	}
	<-done
	preload.mu.Lock()
	defer preload.mu.Unlock()
	if preload.done == done && !(keepStanding && preload.standing) {
		dropPreloadLocked()
	}
}
