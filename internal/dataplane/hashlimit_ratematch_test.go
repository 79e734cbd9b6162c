package dataplane

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestHashLimitRateMatchMixed checks that rules sharing a table agree on
// --hashlimit-rate-match, with the running table of the name or with the
// generation's first rule naming a new one; a disagreeing rule is
// refused before any table is created.
func TestHashLimitRateMatchMixed(t *testing.T) {
	hl := func(name string, rm bool) compiler.HashLimit {
		m := ir.HashLimitMatch{Name: name, Mode: ir.HashLimitSrcIP}
		if rm {
			m.Mode |= ir.HashLimitRateMatch
		}
		return compiler.HashLimit{Match: m}
	}
	running := map[uint32]bpfHLTable{3: {Mode: ir.HashLimitSrcIP | ir.HashLimitRateMatch}, 4: {Mode: ir.HashLimitSrcIP}}
	byName := map[string]uint32{"old-rm": 3, "old": 4}
	for _, tt := range []struct {
		name string
		hls  []compiler.HashLimit
		bad  string // the refused table, "" when accepted
	}{
		{"running tables alike", []compiler.HashLimit{hl("old-rm", true), hl("old", false)}, ""},
		{"new tables", []compiler.HashLimit{hl("a", true), hl("a", true), hl("b", false)}, ""},
		{"running rate-match, rule without", []compiler.HashLimit{hl("old-rm", false)}, "old-rm"},
		{"running without, rule with", []compiler.HashLimit{hl("old", true)}, "old"},
		{"new table, rules disagree", []compiler.HashLimit{hl("a", false), hl("a", true)}, "a"},
	} {
		err := hashLimitRateMatchMixed(running, byName, tt.hls)
		switch {
		case tt.bad == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), "hashlimit "+tt.bad+": ")):
			t.Errorf("%s: %v, want table %s refused", tt.name, err, tt.bad)
		}
	}
}
