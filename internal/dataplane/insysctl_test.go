package dataplane

import "testing"

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
		{"everything", inputSysctlMask, inputSysctlMask, inputSysctlMask},
	} {
		if got := combineInputSysctls(tc.all, tc.dev); got != tc.want {
			t.Errorf("%s: combineInputSysctls(%#x, %#x) = %#x, want %#x", tc.name, tc.all, tc.dev, got, tc.want)
		}
	}
}
