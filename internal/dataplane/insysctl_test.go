package dataplane

import (
	"os"
	"testing"
)

// TestCombineInputSysctls checks the kernel's combinations of "all" and
// the device: accept_local and route_localnet on for either
// (IN_DEV_ORCONF), accept_source_route for both (IN_DEV_ANDCONF).
func TestCombineInputSysctls(t *testing.T) {
	for _, tc := range []struct {
		name     string
		all, dev uint16
		want     uint16
	}{
		{"defaults (accept_source_route: all 0, device 1)", 0, ifSrcRoute, 0},
		{"accept_local for the device", 0, ifAcceptLocal, ifAcceptLocal},
		{"accept_local for all", ifAcceptLocal, 0, ifAcceptLocal},
		{"route_localnet for the device", 0, ifRouteLocalnet, ifRouteLocalnet},
		{"route_localnet for all", ifRouteLocalnet, 0, ifRouteLocalnet},
		{"accept_source_route for all and the device", ifSrcRoute, ifSrcRoute, ifSrcRoute},
		{"accept_source_route for all only", ifSrcRoute, 0, 0},
		{"src_valid_mark for the device", 0, ifSrcValidMark, ifSrcValidMark},
		{"src_valid_mark for all", ifSrcValidMark, 0, ifSrcValidMark},
		{"rp_filter strict for the device", 0, ifRPFStrict, ifRPFStrict},
		{"rp_filter loose for all", ifRPFLoose, 0, ifRPFLoose},
		{"rp_filter strict for all, loose for the device: the larger", ifRPFStrict, ifRPFLoose, ifRPFLoose},
		{"rp_filter loose for all, strict for the device: the larger", ifRPFLoose, ifRPFStrict, ifRPFLoose},
		{"everything", inputSysctlMask &^ ifRPFStrict, inputSysctlMask &^ ifRPFStrict, inputSysctlMask &^ ifRPFStrict},
	} {
		if got := combineInputSysctls(tc.all, tc.dev); got != tc.want {
			t.Errorf("%s: combineInputSysctls(%#x, %#x) = %#x, want %#x", tc.name, tc.all, tc.dev, got, tc.want)
		}
	}
}

// TestInputSysctlFlags reads the sysctls of a fresh namespace's lo as the
// namespace sets them: the defaults (accept_source_route 1 for the device,
// 0 for "all": off; rp_filter and src_valid_mark set to 0), then
// accept_local for lo, accept_source_route, route_localnet and
// src_valid_mark for "all", rp_filter strict for "all" and loose for lo
// (loose: the larger); a device without IPv4 sysctls gets no entry.
func TestInputSysctlFlags(t *testing.T) {
	inFreshNetns(t, func() {
		read := func() map[string]uint16 {
			t.Helper()
			m, err := inputSysctlFlags([]string{"lo", "nosuchdev0"})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m["nosuchdev0"]; ok {
				t.Errorf("a device without sysctls has flags %#x", m["nosuchdev0"])
			}
			return m
		}
		// rp_filter and src_valid_mark off (a new namespace may copy
		// the host's).
		for _, k := range []string{"all/rp_filter", "lo/rp_filter", "all/src_valid_mark", "lo/src_valid_mark"} {
			if err := os.WriteFile(sysctlProcPrefix+"net/ipv4/conf/"+k, []byte("0"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := read()["lo"]; got != 0 {
			t.Errorf("defaults: lo %#x, want 0", got)
		}
		for _, kv := range [][2]string{
			{"net/ipv4/conf/lo/accept_local", "1"},
			{"net/ipv4/conf/all/accept_source_route", "1"},
			{"net/ipv4/conf/all/route_localnet", "1"},
			{"net/ipv4/conf/all/src_valid_mark", "1"},
			{"net/ipv4/conf/all/rp_filter", "1"},
			{"net/ipv4/conf/lo/rp_filter", "2"},
		} {
			if err := os.WriteFile(sysctlProcPrefix+kv[0], []byte(kv[1]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := read()["lo"], uint16(inputSysctlMask&^ifRPFStrict); got != want {
			t.Errorf("set: lo %#x, want %#x", got, want)
		}
	})
}
