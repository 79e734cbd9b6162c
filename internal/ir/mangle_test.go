package ir

import (
	"reflect"
	"testing"
)

// TestMangleTargetRoundTrip checks that the packet-rewriting and notrack
// targets come back from the binary form as they went in, and that a
// clone does not share their options.
func TestMangleTargetRoundTrip(t *testing.T) {
	targets := []Target{
		{Kind: TargetTCPMSS, Mangle: &MangleTarget{MSS: TCPMSSClampPMTU}},
		{Kind: TargetTCPMSS, Mangle: &MangleTarget{MSS: 1400}},
		{Kind: TargetDSCP, Mangle: &MangleTarget{Value: 0x2e}},
		{Kind: TargetTOS, Mangle: &MangleTarget{Value: 0x10, Mask: 0x3f}},
		{Kind: TargetTTL, Mangle: &MangleTarget{Mode: TTLDec, Value: 3}},
		{Kind: TargetHL, Mangle: &MangleTarget{Mode: TTLInc, Value: 255}},
		{Kind: TargetCTNotrack},
		{Kind: TargetNotrack},
	}
	rs := NewRuleset(IPv4)
	for _, tg := range targets {
		rs.Chain("INPUT").Rules = append(rs.Chain("INPUT").Rules, &Rule{Target: tg})
	}
	for i, r := range roundTrip(t, rs).Chain("INPUT").Rules {
		if !reflect.DeepEqual(r.Target, targets[i]) {
			t.Errorf("rule %d: target %+v, want %+v", i, r.Target, targets[i])
		}
		orig := &Rule{Target: targets[i]}
		c := orig.Clone()
		if !reflect.DeepEqual(c.Target, orig.Target) || (orig.Target.Mangle != nil && c.Target.Mangle == orig.Target.Mangle) {
			t.Errorf("rule %d: clone differs or shares the options", i)
		}
	}
}
