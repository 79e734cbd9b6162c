package dataplane

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestHeaderMetaRoundTrip keeps a generation's header conditions as the
// metadata does (through JSON) and gives them to another generation, as
// RunningGeneration does: they come back equal, in order.
func TestHeaderMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		fam  ir.Family
		ext6 []ir.Match
		hdr4 []compiler.Hdr4Cond
	}{
		{"none", ir.IPv4, nil, nil},
		{"transport headers", ir.IPv4, nil, []compiler.Hdr4Cond{
			{Kind: compiler.Hdr4KindTCPOpt, Option: 2},
			{Kind: compiler.Hdr4KindESP, Match: &ir.ESPMatch{SPIs: [2]uint32{5, 9}, InvSPIs: true}},
			{Kind: compiler.Hdr4KindTCPOpt, Option: 8, Invert: true},
		}},
		{"both", ir.IPv6, []ir.Match{
			&ir.RTMatch{Type: 0, HasType: true, SegsLeft: [2]uint32{0, 0xffffffff}},
			&ir.FragMatch{IDs: [2]uint32{3, 7}, HasIDs: true},
		}, []compiler.Hdr4Cond{{Kind: compiler.Hdr4KindTCPOpt, Option: 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &compiler.Generation{Family: tc.fam}
			g.SetHeaderConds(tc.ext6, tc.hdr4)
			hm, err := headerMetaOf(g)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.ext6)+len(tc.hdr4) == 0 {
				if hm != nil {
					t.Fatalf("kept %+v for no conditions", hm)
				}
				return
			}
			b, err := json.Marshal(genMeta{Headers: hm})
			if err != nil {
				t.Fatal(err)
			}
			var meta genMeta
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			back := &compiler.Generation{Family: tc.fam}
			if err := meta.Headers.restore(back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Ext6Conds(), g.Ext6Conds()) || !reflect.DeepEqual(back.Hdr4Conds(), g.Hdr4Conds()) {
				t.Errorf("read back\n%#v %#v\nwant\n%#v %#v", back.Ext6Conds(), back.Hdr4Conds(), g.Ext6Conds(), g.Hdr4Conds())
			}
		})
	}
}
