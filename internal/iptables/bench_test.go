package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// BenchmarkRestore measures restoring a large ruleset.
func BenchmarkRestore(b *testing.B) {
	const rules = 20000
	var sb strings.Builder
	sb.WriteString("*filter\n:INPUT DROP [0:0]\n:web - [0:0]\n-A INPUT -p tcp -m tcp --dport 80 -j web\n")
	for i := 0; i < rules; i++ {
		fmt.Fprintf(&sb, "-A web -s 10.%d.%d.0/24 -p tcp -m tcp --dport %d -m comment --comment \"rule %d\" -j ACCEPT\n", i/256%256, i%256, i%65535+1, i)
	}
	sb.WriteString("COMMIT\n")
	in := sb.String()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs, err := Restore(ir.IPv4, strings.NewReader(in), nil, RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(rs.Chain("web").Rules) != rules {
			b.Fatal("rules lost")
		}
		_ = Save(rs, false)
	}
}
