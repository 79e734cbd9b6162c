package compiler

import (
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestOwnerWalks checks owner_mt's answers in the walk for each kind of
// socket a packet may have: none, a kernel socket without a file, and
// processes' sockets of several users and groups, with options inverted
// and combined as xt_owner.c combines them.
func TestOwnerWalks(t *testing.T) {
	rules := []string{
		"-A OUTPUT -m owner --uid-owner 0",
		"-A OUTPUT -m owner ! --uid-owner 0",
		"-A OUTPUT -m owner --uid-owner 1000-1999 --gid-owner 2000",
		"-A OUTPUT -m owner --socket-exists",
		"-A OUTPUT -m owner ! --socket-exists",
		"-A OUTPUT -m owner ! --uid-owner 0 ! --gid-owner 0",
		"-A OUTPUT -m owner ! --socket-exists --uid-owner 5",
	}
	tests := []struct {
		name  string
		owner SocketOwner
		want  []int // rules counted
	}{
		{"no socket", SocketOwner{}, []int{2, 5, 6}},
		{"a kernel socket", SocketOwner{Socket: true}, []int{2, 4, 6}},
		{"root's", SocketOwner{Socket: true, File: true}, []int{1, 4}},
		{"uid 1000 gid 2000", SocketOwner{Socket: true, File: true, UID: 1000, GID: 2000}, []int{2, 3, 4, 6}},
		{"uid 1000 gid 0", SocketOwner{Socket: true, File: true, UID: 1000}, []int{2, 4}},
		{"uid 2000 gid 2000", SocketOwner{Socket: true, File: true, UID: 2000, GID: 2000}, []int{2, 4, 6}},
	}
	rs := parseRuleset(t, ir.IPv4, rules...)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !g.UsesOwner() {
		t.Fatal("UsesOwner is false")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tcpPacket(0, 64)
			p.Owner = tt.owner
			var want []string
			for _, r := range tt.want {
				want = append(want, "filter/OUTPUT/"+string(rune('0'+r)))
			}
			want = append(want, "filter/OUTPUT/policy")
			if got := walk(g, p, ChainOutput); !slices.Equal(got.counted, want) {
				t.Errorf("counted %v, want %v", got.counted, want)
			}
		})
	}
}

// TestOwnerSupplGroupsRefused checks that --suppl-groups is refused, not
// ignored.
func TestOwnerSupplGroupsRefused(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A OUTPUT -m owner --gid-owner 10 --suppl-groups -j DROP")
	_, err := Compile(rs, Options{})
	if err == nil || !strings.Contains(err.Error(), "--suppl-groups is not supported by xfw") {
		t.Errorf("got %v, want the refusal of --suppl-groups", err)
	}
}
