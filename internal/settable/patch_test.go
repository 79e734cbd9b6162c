package settable

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestPatchPlanListSet checks which member changes of a list:set the
// running tables can follow in place: none of a list:set a running rule
// matches, also when the list got no lookup at load (empty, or its members
// of the other family), which then must take its new members by a reload;
// a list no rule matches needs nothing.
func TestPatchPlanListSet(t *testing.T) {
	get := storeSets(t, []string{
		"create m hash:ip", "add m 10.0.0.1",
		"create m6 hash:ip family inet6",
		"create empty list:set",
		"create other list:set", "add other m6",
		"create full list:set", "add full m",
		"create unused list:set",
	})
	set := func(name string) *ipset.Set {
		s, err := get(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The running generation as loaded: rules match empty, other, full
	// and m; only full's member and m got lookups (empty has no member,
	// other's member is of the other family).
	running := []runningLookup{
		{ir.IPv4, dataplane.SetLookupInfo{Set: "m", Via: "full", Kind: dataplane.SetKindDXR}},
		{ir.IPv4, dataplane.SetLookupInfo{Set: "m", Kind: dataplane.SetKindDXR}},
	}
	matched := map[string]bool{"empty": true, "other": true, "full": true, "m": true}
	for _, tt := range []struct {
		list    string
		inPlace bool
	}{
		{"empty", false},
		{"other", false},
		{"full", false},
		{"unused", true},
	} {
		t.Run(tt.list, func(t *testing.T) {
			p := &patchPlan{running: running, matched: matched}
			ch := ipset.EntryChanges{Set: set(tt.list), Added: []ipset.Entry{{Elem: ipset.Elem{SetName: "m"}}}}
			ok, err := p.add(ch)
			if err != nil || ok != tt.inPlace {
				t.Errorf("add %s to %s: in place %v, %v; want %v", "m", tt.list, ok, err, tt.inPlace)
			}
		})
	}
}
