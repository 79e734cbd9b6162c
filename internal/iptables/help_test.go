package iptables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestHelpTextMatchesLegacy compares HelpText with the help iptables-legacy
// 1.8.9 printed (testdata/help, recorded with `iptables-legacy [-p P] --help`),
// after the version line, which names the implementation.
func TestHelpTextMatchesLegacy(t *testing.T) {
	cases := []struct {
		file     string
		fam      ir.Family
		protocol string
	}{
		{"iptables.txt", ir.IPv4, ""},
		{"iptables-icmp.txt", ir.IPv4, "icmp"},
		{"ip6tables.txt", ir.IPv6, ""},
		{"ip6tables-ipv6-icmp.txt", ir.IPv6, "ipv6-icmp"},
		{"ip6tables-ipv6-icmp.txt", ir.IPv6, "icmpv6"},
	}
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join("testdata", "help", c.file))
		if err != nil {
			t.Fatal(err)
		}
		_, want, _ := strings.Cut(string(data), "\n")
		if got := HelpText(c.fam, c.protocol); got != want {
			t.Errorf("%s (-p %q): help differs from iptables-legacy's\ngot:\n%s\nwant:\n%s", c.file, c.protocol, got, want)
		}
	}
}
