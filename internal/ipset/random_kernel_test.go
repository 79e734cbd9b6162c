package ipset

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// randomScenario returns n random ipset invocations over a few set names,
// types and elements (seeded, so a failure reproduces), for the
// differential test against the kernel.
func randomScenario(seed uint64, n int) []step {
	r := rand.New(rand.NewPCG(seed, 0))
	names := []string{"a", "b", "c", "l"}
	creates := []string{
		"hash:ip", "hash:ip family inet6", "hash:net", "hash:net maxelem 3", "hash:ip,port",
		"hash:net,port", "hash:net,iface", "bitmap:port range 10-20", "hash:ip netmask 30",
		"hash:net timeout 600 counters comment", "list:set size 4",
	}
	elems := []string{
		"10.0.0.1", "10.0.0.2", "10.0.0.0/30", "10.0.0.1-10.0.0.3", "10.0.0.0/8", "10.1.0.0/16",
		"2001:db8::1", "2001:db8::/64", "10.0.0.1,80", "10.0.0.1,udp:53", "10.0.0.0/24,tcp:1-2",
		"10.0.0.0/8,eth0", "10.0.0.0/8,physdev:eth1", "15", "10-12", "25", "a", "b", "c", "l",
		"192.0.2.1-192.0.2.9", "10.0.0.5", "1.2.3.4,icmp:ping",
	}
	opts := []string{"", "", "", " -exist", " timeout 30", " nomatch", " packets 3", ` comment "c"`, " before a"}
	var steps []step
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	for range n {
		name := pick(names)
		var line string
		switch k := r.IntN(20); {
		case k < 4:
			line = fmt.Sprintf("create %s %s", name, pick(creates))
			if r.IntN(3) == 0 {
				line = "-exist " + line
			}
		case k < 10:
			line = fmt.Sprintf("add %s %s%s", name, pick(elems), pick(opts))
		case k < 12:
			line = fmt.Sprintf("del %s %s%s", name, pick(elems), pick(opts[:4]))
		case k < 14:
			line = fmt.Sprintf("test %s %s", name, pick(elems))
		case k == 14:
			line = "destroy " + name
		case k == 15:
			line = "flush " + name
		case k == 16:
			line = fmt.Sprintf("swap %s %s", name, pick(names))
		case k == 17:
			line = fmt.Sprintf("rename %s %s", name, pick(names))
		case k == 18:
			var in strings.Builder
			for range 1 + r.IntN(4) {
				fmt.Fprintf(&in, "add %s %s%s\n", pick(names), pick(elems), pick(opts[:4]))
			}
			steps = append(steps, restoreStep(in.String()))
			continue
		default:
			line = "save"
		}
		steps = append(steps, cmd(line))
	}
	return append(steps, cmd("list"))
}

func init() {
	for seed := range uint64(6) {
		kernelScenarios = append(kernelScenarios, struct {
			name  string
			steps []step
		}{fmt.Sprintf("random-%d", seed), randomScenario(seed, 150)})
	}
}
