package settable

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestKeyPrefix checks that a written table's key reads back as the
// prefix addrWords made it from.
func TestKeyPrefix(t *testing.T) {
	for _, s := range []string{"10.1.2.3/32", "10.1.2.0/24", "0.0.0.0/0", "2001:db8::1/128", "2001:db8:1::/48", "2001:db8::/124"} {
		p := netip.MustParsePrefix(s)
		fam := ir.IPv4
		if p.Addr().Is6() {
			fam = ir.IPv6
		}
		var k dataplane.SetHashKey
		k.Hi, k.Lo = addrWords(p.Addr())
		k.Plen = uint8(p.Bits())
		if got := keyPrefix(k, fam); got != p {
			t.Errorf("%s: read back as %s", p, got)
		}
	}
}

// TestWriteMetaEntry checks the write parameters: hash:ip's element length
// (its netmask), hash:net's flag, the default timeout.
func TestWriteMetaEntry(t *testing.T) {
	tests := []struct {
		set        ipset.Set
		maxPlen    uint8
		aux        uint32
		answer     uint32
		defTimeout uint64
	}{
		{ipset.Set{Type: ipset.HashIP}, 32, 32, 0, 0},
		{ipset.Set{Type: ipset.HashIP, Options: ipset.Options{Netmask: 24, HasTimeout: true, Timeout: 600}}, 32, 24, 1, 600},
		{ipset.Set{Type: ipset.HashNet, Options: ipset.Options{HasTimeout: true}}, 128, 128, 3, 0},
	}
	for i, tt := range tests {
		e := writeMetaEntry(&tt.set, tt.maxPlen)
		if e.Aux != tt.aux || e.Answer != tt.answer || e.Expires != tt.defTimeout || e.Key.Plen != dataplane.SetMetaPlen {
			t.Errorf("%d: %+v, want aux %d answer %d timeout %d", i, e, tt.aux, tt.answer, tt.defTimeout)
		}
	}
}

// TestSameSecond checks the expiry comparison of TakeWrites.
func TestSameSecond(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		a, b time.Time
		want bool
	}{
		{time.Time{}, time.Time{}, true},
		{now, time.Time{}, false},
		{now, now.Add(300 * time.Millisecond), true},
		{now, now.Add(-2 * time.Second), false},
	} {
		if got := sameSecond(c.a, c.b); got != c.want {
			t.Errorf("sameSecond(%v, %v) = %v", c.a, c.b, got)
		}
	}
}
