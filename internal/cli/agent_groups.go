package cli

import "github.com/xfw-dev/xfw/internal/dataplane"

// deviceGroups returns each device's group (ip link set DEV group N), by
// index; nil when the devices cannot be listed.
func deviceGroups() map[int]uint32 {
	links, err := dataplane.ListLinks()
	if err != nil {
		return nil
	}
	out := make(map[int]uint32, len(links))
	for _, l := range links {
		out[l.Attrs().Index] = l.Attrs().Group
	}
	return out
}

// groupsChanged reports whether a device the agent saw before is in
// another group now (-m devgroup compiles the groups into the rules), and
// remembers the groups.
func (a *agent) groupsChanged() bool {
	now := deviceGroups()
	if now == nil {
		return false
	}
	changed := false
	for idx, g := range now {
		if old, ok := a.groups[idx]; ok && old != g {
			changed = true
		}
	}
	a.groups = now
	return changed
}
