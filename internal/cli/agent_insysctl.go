package cli

// The agent's watch of the sysctls the data plane's checks before any
// chain follow (dataplane.InputSysctlFacts: accept_local, route_localnet,
// accept_source_route of "all" and every device). The kernel sends no
// notification when one changes: they are read every fpRecheck, and a
// change is mirrored into the running data plane at once.

import "github.com/xfw-dev/xfw/internal/dataplane"

// refreshInputSysctls mirrors the input sysctls when they changed since
// the agent last mirrored them, under xfw's lock, waited for as a resync
// waits (a change is rare; a lock tried without waiting starves behind
// commands that wait for it).
func (a *agent) refreshInputSysctls() {
	facts := dataplane.InputSysctlFacts()
	if facts == a.inSys {
		return
	}
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		a.logOnce("input sysctls: %v", err)
		return
	}
	err = dataplane.RefreshInputSysctls()
	unlock()
	if err != nil {
		a.logOnce("input sysctls: %v", err)
		return
	}
	if a.inSys != "" {
		a.logf("input sysctls changed (accept_local, route_localnet, accept_source_route): mirrored")
	}
	a.inSys = facts
}
