package ir_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// restored returns the ruleset of an iptables-restore text.
func restored(t *testing.T, text string) *ir.Ruleset {
	t.Helper()
	rs, err := iptables.Restore(ir.IPv4, strings.NewReader(text), ir.NewRuleset(ir.IPv4), iptables.RestoreOptions{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return rs
}

// TestMarshalBinaryReusing checks that a ruleset sharing rules with a
// decoded one encodes to the same bytes with MarshalBinaryReusing as with
// MarshalBinary, whatever was added, removed, replaced or moved.
func TestMarshalBinaryReusing(t *testing.T) {
	var text strings.Builder
	text.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:user - [0:0]\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&text, "-A FORWARD -s 10.0.%d.1/32 -p udp -m udp --dport %d -j ACCEPT\n", i, 1000+i)
		fmt.Fprintf(&text, "-A INPUT -p tcp -m tcp --sport %d -m comment --comment \"c%d\" -j user\n", i, i)
	}
	text.WriteString("-A user -j LOG --log-prefix \"x \"\n-A OUTPUT -d 10.9.0.0/16 -j REJECT\nCOMMIT\n")
	// Another table's chains, shaped as kube-proxy's (their rules are
	// reused too).
	text.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&text, ":KUBE-SVC-%d - [0:0]\n:KUBE-SEP-%d - [0:0]\n", i, i)
	}
	text.WriteString("-A PREROUTING -j KUBE-SERVICES\n-A OUTPUT -j KUBE-SERVICES\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&text, "-A KUBE-SERVICES -d 10.96.0.%d/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-%d\n", i, i)
		fmt.Fprintf(&text, "-A KUBE-SVC-%d -m statistic --mode random --probability 0.5 -j KUBE-SEP-%d\n", i, i)
		fmt.Fprintf(&text, "-A KUBE-SEP-%d -p tcp -j DNAT --to-destination 10.244.0.%d:8080\n", i, i)
	}
	text.WriteString("COMMIT\n")
	data, err := restored(t, text.String()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fresh := restored(t, "*filter\n-A FORWARD -s 10.99.0.1/32 -p tcp -m tcp --dport 22 -j DROP\n-A FORWARD -i eth0 -j ACCEPT\nCOMMIT\n").Chain("FORWARD").Rules

	changes := map[string]func(rs *ir.Ruleset){
		"unchanged": func(rs *ir.Ruleset) {},
		"append": func(rs *ir.Ruleset) {
			c := rs.Chain("FORWARD")
			c.Rules = append(c.Rules, fresh[0])
		},
		"insert at the head": func(rs *ir.Ruleset) {
			c := rs.Chain("FORWARD")
			c.Rules = append([]*ir.Rule{fresh[0]}, c.Rules...)
		},
		"insert in the middle": func(rs *ir.Ruleset) {
			c := rs.Chain("INPUT")
			c.Rules = append(c.Rules[:10], append([]*ir.Rule{fresh[1], fresh[0]}, c.Rules[10:]...)...)
		},
		"delete": func(rs *ir.Ruleset) {
			c := rs.Chain("FORWARD")
			c.Rules = append(c.Rules[:7], c.Rules[8:]...)
		},
		"delete the first": func(rs *ir.Ruleset) {
			c := rs.Chain("FORWARD")
			c.Rules = c.Rules[1:]
		},
		"delete two apart": func(rs *ir.Ruleset) {
			c := rs.Chain("INPUT")
			c.Rules = append(append(c.Rules[:2:2], c.Rules[3:6]...), c.Rules[7:]...)
		},
		"replace": func(rs *ir.Ruleset) {
			rs.Chain("OUTPUT").Rules[0] = fresh[1]
		},
		"swap": func(rs *ir.Ruleset) {
			c := rs.Chain("INPUT")
			c.Rules[3], c.Rules[4] = c.Rules[4], c.Rules[3]
		},
		"rule moved to another chain": func(rs *ir.Ruleset) {
			in, fwd := rs.Chain("INPUT"), rs.Chain("FORWARD")
			fwd.Rules = append(fwd.Rules, in.Rules[5])
			in.Rules = in.Rules[:5]
		},
		"chain added and flushed": func(rs *ir.Ruleset) {
			rs.Chains = append(rs.Chains, &ir.Chain{Name: "new", Rules: []*ir.Rule{fresh[1]}})
			rs.Chain("user").Rules = nil
		},
		"nat: service chains rewritten": func(rs *ir.Ruleset) {
			nat := rs.EnsureTable(ir.TableNat)
			svc, sep := nat.Chain("KUBE-SVC-7"), nat.Chain("KUBE-SEP-7")
			svc.Rules = []*ir.Rule{svc.Rules[0].Clone()}
			sep.Rules = append(sep.Rules, fresh[0])
		},
		"nat: chain deleted, rule moved from filter": func(rs *ir.Ruleset) {
			nat := rs.EnsureTable(ir.TableNat)
			nat.Chains = append(nat.Chains[:5], nat.Chains[6:]...)
			nat.Chain("KUBE-SEP-3").Rules = append(nat.Chain("KUBE-SEP-3").Rules, rs.Chain("FORWARD").Rules[2])
		},
		"nat: table dropped": func(rs *ir.Ruleset) {
			rs.Tables = nil
		},
		"deep copy": func(rs *ir.Ruleset) {
			*rs = *rs.Clone()
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			old, enc, err := ir.UnmarshalRulesetEncoded(data)
			if err != nil {
				t.Fatal(err)
			}
			rs := old.CloneChains()
			change(rs)
			want, err := rs.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := rs.MarshalBinaryReusing(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("MarshalBinaryReusing gave %d bytes that differ from MarshalBinary's %d", len(got), len(want))
			}
			// Kept with its index (the agent's cache), then changed
			// again: the index stands for a decode.
			got, index, err := rs.MarshalBinaryIndexed(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("MarshalBinaryIndexed gave %d bytes that differ from MarshalBinary's %d", len(got), len(want))
			}
			for name2, change2 := range changes {
				next := rs.CloneChains()
				if !applies(change2, next) {
					continue
				}
				want, err := next.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				got, index2, err := next.MarshalBinaryIndexed(index)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("then %s: MarshalBinaryIndexed with the kept index gave %d bytes that differ from MarshalBinary's %d", name2, len(got), len(want))
				}
				again := next.CloneChains()
				if got, err := again.MarshalBinaryReusing(index2); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("then %s: the second kept index gave %d bytes (%v), MarshalBinary %d", name2, len(got), err, len(want))
				}
			}
		})
	}
}

// applies applies change to rs and reports whether it could (a change
// naming a chain that an earlier one removed panics).
func applies(change func(*ir.Ruleset), rs *ir.Ruleset) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	change(rs)
	return true
}

// TestEncodedSharedBy checks SharedBy: true for a ruleset keeping decoded
// rules (in any table), false for one made afresh.
func TestEncodedSharedBy(t *testing.T) {
	text := "*filter\n-A INPUT -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n*nat\n:SVC - [0:0]\n-A SVC -j DNAT --to-destination 10.1.1.1\nCOMMIT\n"
	data, err := restored(t, text).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	old, enc, err := ir.UnmarshalRulesetEncoded(data)
	if err != nil {
		t.Fatal(err)
	}
	if !enc.SharedBy(old.CloneChains()) {
		t.Errorf("a copy of the decoded ruleset shares nothing")
	}
	natOnly := old.CloneChains()
	natOnly.Chain("INPUT").Rules = nil
	if !enc.SharedBy(natOnly) {
		t.Errorf("a ruleset keeping nat's decoded rule shares nothing")
	}
	if enc.SharedBy(restored(t, text)) {
		t.Errorf("a ruleset restored afresh shares rules")
	}
}
