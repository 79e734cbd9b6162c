package cli

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

// TestParseRecentWrite checks writes to a recent list as the kernel's
// /proc/net/xt_recent/NAME took them (recorded with printf '%s\n' WRITE
// on Linux 6.x; an error there is EINVAL).
func TestParseRecentWrite(t *testing.T) {
	long := "+5.5.5.5\n+6.6.6.6\n" + strings.Repeat("0", 50) + "\n"
	tests := []struct {
		write string
		kind  byte
		addr  string
		rest  bool
		errno syscall.Errno
	}{
		{"+1.2.3.4\n", '+', "1.2.3.4", false, 0},
		{"+1.2.3.4", '+', "1.2.3.4", false, 0},
		{"+01.2.3.4\n", '+', "1.2.3.4", false, 0},
		{"+00000000000000000001.2.3.4\n", '+', "1.2.3.4", false, 0},
		{"-9.9.9.9\n", '-', "9.9.9.9", false, 0},
		{"+::1\n", '+', "::1", false, 0},
		{"+::ffff:1.2.3.4\n", '+', "::ffff:1.2.3.4", false, 0},
		{"/\n", '/', "", false, 0},
		{"", 0, "", false, 0},
		{"+5.5.5.5\n+6.6.6.6\n", '+', "5.5.5.5", false, 0},
		{long, '+', "5.5.5.5", true, 0}, // the rest: ESPIPE
		{"+1.2.3\n", 0, "", false, syscall.EINVAL},
		{"+1.2.3.256\n", 0, "", false, syscall.EINVAL},
		{"+1.2.3.4 \n", 0, "", false, syscall.EINVAL},
		{"+\n", 0, "", false, syscall.EINVAL},
		{"x\n", 0, "", false, syscall.EINVAL},
		{"-\n", 0, "", false, syscall.EINVAL},
		{"+fe80::1%eth0\n", 0, "", false, syscall.EINVAL},
		{"+1:2:3:4:5:6:7:8:9\n", 0, "", false, syscall.EINVAL},
	}
	for _, tt := range tests {
		op, errno := parseRecentWrite([]byte(tt.write))
		if errno != tt.errno {
			t.Errorf("%q: errno %v, want %v", tt.write, errno, tt.errno)
			continue
		}
		var want netip.Addr
		if tt.addr != "" {
			want = netip.MustParseAddr(tt.addr)
		}
		if op.kind != tt.kind || op.addr != want || op.rest != tt.rest {
			t.Errorf("%q: %c %v rest %v, want %c %v rest %v", tt.write, op.kind, op.addr, op.rest, tt.kind, want, tt.rest)
		}
	}
}
