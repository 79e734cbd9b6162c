package dataplane

import "sync"

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

// preload is the session's load ahead, if one was started.
var preload struct {
	mu sync.Mutex
	// done is closed once st or err is set; nil: no load ahead.
	done chan struct{}
	st   *state
	err  error
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
	if preload.done != nil {
		return
	}
	done := make(chan struct{})
	preload.done = done
	go func() {
		defer close(done)
		spec, err := loadSpec()
		var st *state
		if err == nil {
			st, err = loadUnkept(spec)
		}
		preload.mu.Lock()
		preload.st, preload.err = st, err
		preload.mu.Unlock()
	}()
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
	preload.done, preload.st, preload.err = nil, nil, nil
	preload.mu.Unlock()
	if err != nil {
		return nil, err
	}
	keepForSession(st)
	return st, nil
}

// discardPreload waits for a load ahead still under way and closes what
// Apply did not take.
func discardPreload() {
	preload.mu.Lock()
	done := preload.done
	preload.mu.Unlock()
	if done == nil {
		return
	}
	<-done
	preload.mu.Lock()
	st := preload.st
	preload.done, preload.st, preload.err = nil, nil, nil
	preload.mu.Unlock()
	if st != nil {
		st.Close()
	}
}
