package ipset

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// randomScenario returns n random ipset invocations over a few set names,
// types and elements (seeded, so a failure reproduces), for the
// differential test against the kernel. Ranges stay small: a set of more
// than a few thousand members may have grown its hash in the kernel or not,
// depending on the random initval.
func randomScenario(seed uint64, n int) []step {
	r := rand.New(rand.NewPCG(seed, 0))
	names := []string{"a", "b", "c", "l"}
	creates := []string{
		"hash:ip", "hash:ip family inet6", "hash:net", "hash:net maxelem 3", "hash:ip,port",
		"hash:net,port", "hash:net,iface", "bitmap:port range 10-20", "hash:ip netmask 30",
		"hash:net timeout 600 counters comment", "list:set size 4", "hash:net family inet6 counters",
		"hash:ip,port timeout 0", "bitmap:port range 15-30 counters", "list:set timeout 600",
		"hash:net,port family inet6 comment", "hash:ip hashsize 64 maxelem 5",
	}
	elems := []string{
		"10.0.0.1", "10.0.0.2", "10.0.0.0/30", "10.0.0.1-10.0.0.3", "10.0.0.0/22", "10.0.0.0/24,udp:9", "10.1.0.0/23",
		"2001:db8::1", "2001:db8::/64", "10.0.0.1,80", "10.0.0.1,udp:53", "10.0.0.0/24,tcp:1-2",
		"10.0.0.0/8,eth0", "10.0.0.0/8,physdev:eth1", "15", "10-12", "25", "a", "b", "c", "l",
		"192.0.2.1-192.0.2.9", "10.0.0.5", "1.2.3.4,icmp:ping", "2001:db8::1,udp:1", "2001:db8::/32,tcp:7",
		"a,before,b", "b,after,c", "udp:16", "10.0.0.0/31,tcp:3", "2001:db8::/48,eth0",
		"2001:db8::5,icmpv6:ping", "10.0.0.7,icmp:0/0", "10.0.0.0/0", "2001:db8:1::/48,physdev:br0",
		"10.2.0.0/30,gre:0", "300", "0.0.0.0", "::", "10.0.0.1,http", "10.0.0.0-10.0.0.2,udp:1-2",
	}
	opts := []string{"", "", "", " -exist", " timeout 30", " nomatch", " packets 3", ` comment "c"`,
		" before a", " after c", " bytes 9 packets 1", " timeout 0"}
	var steps []step
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	line := func() string {
		name := pick(names)
		switch k := r.IntN(22); {
		case k < 4:
			l := fmt.Sprintf("create %s %s", name, pick(creates))
			if r.IntN(3) == 0 {
				l = "-exist " + l
			}
			return l
		case k < 10:
			return fmt.Sprintf("add %s %s%s", name, pick(elems), pick(opts))
		case k < 12:
			return fmt.Sprintf("del %s %s%s", name, pick(elems), pick(opts[:4]))
		case k < 14:
			return fmt.Sprintf("test %s %s", name, pick(elems))
		case k == 14:
			return "destroy " + name
		case k == 15:
			return "flush " + name
		case k == 16:
			return fmt.Sprintf("swap %s %s", name, pick(names))
		case k == 17:
			return fmt.Sprintf("rename %s %s", name, pick(names))
		case k == 18:
			return pick([]string{"list -t ", "list -n ", "-o xml list ", "list -sorted ", "-q list "}) + name
		case k == 19:
			return "save " + name
		case k == 20 && r.IntN(4) == 0:
			return pick([]string{"flush", "destroy", "-exist destroy " + name})
		}
		return "save"
	}
	for range n {
		if r.IntN(12) == 0 {
			var in strings.Builder
			for range 1 + r.IntN(5) {
				l := line()
				if strings.HasPrefix(l, "test") && r.IntN(2) == 0 {
					l = "add" + strings.TrimPrefix(l, "test")
				}
				in.WriteString(l + "\n")
			}
			var opt []string
			if r.IntN(3) == 0 {
				opt = []string{"-exist"}
			}
			steps = append(steps, restoreStep(in.String(), opt...))
			continue
		}
		steps = append(steps, cmd(line()))
	}
	return append(steps, cmd("list"))
}

// randomSeeds is how many random scenarios run ($XFW_IPSET_RANDOM_SEEDS,
// default 8, from seed $XFW_IPSET_RANDOM_FIRST, default 0).
func randomSeeds() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("XFW_IPSET_RANDOM_SEEDS"), 10, 32); err == nil {
		return n
	}
	return 8
}

func init() {
	first, _ := strconv.ParseUint(os.Getenv("XFW_IPSET_RANDOM_FIRST"), 10, 32)
	for seed := first; seed < first+randomSeeds(); seed++ {
		kernelScenarios = append(kernelScenarios, struct {
			name  string
			steps []step
		}{fmt.Sprintf("random-%d", seed), randomScenario(seed, 150)})
	}
}
