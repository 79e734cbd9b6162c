package dataplane

import (
	"os"
	"testing"
)

// TestReadRPFilterOn: off in a new namespace (every rp_filter 0), on when
// any of "all", "default" or one device's own is strict or loose.
func TestReadRPFilterOn(t *testing.T) {
	cases := []struct {
		name   string
		sysctl string // set to value in a fresh namespace ("": none)
		value  string
		want   uint32
	}{
		{name: "new namespace", want: 0},
		{name: "all strict", sysctl: "net/ipv4/conf/all/rp_filter", value: "1", want: 1},
		{name: "default loose", sysctl: "net/ipv4/conf/default/rp_filter", value: "2", want: 1},
		{name: "one device strict", sysctl: "net/ipv4/conf/lo/rp_filter", value: "1", want: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inFreshNetns(t, func() {
				if c.sysctl != "" {
					if err := os.WriteFile(sysctlProcPrefix+c.sysctl, []byte(c.value), 0o644); err != nil {
						t.Errorf("set %s: %v", c.sysctl, err)
						return
					}
				}
				got, err := readRPFilterOn()
				if err != nil {
					t.Errorf("readRPFilterOn: %v", err)
					return
				}
				if got != c.want {
					t.Errorf("readRPFilterOn() = %d, want %d", got, c.want)
				}
			})
		})
	}
}
