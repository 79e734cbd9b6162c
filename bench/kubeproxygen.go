package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"

	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// runKubeProxyGen is `xfwbench kubeproxy-gen`: it prints kube-proxy's
// ruleset of -services × -endpoints, in iptables-restore (-format
// iptables, the default) or nft -f (-format nft) form.
func runKubeProxyGen(args []string) error {
	fs := flag.NewFlagSet("kubeproxy-gen", flag.ContinueOnError)
	n := fs.Int("services", 3, "services")
	m := fs.Int("endpoints", 3, "endpoints per service")
	format := fs.String("format", "iptables", "iptables or nft")
	bootstrap := fs.Bool("bootstrap", true, "iptables: include the built-in chains' jumps kube-proxy installs with iptables -I")
	natAsAccept := fs.Bool("nat-as-accept", false, "iptables: ACCEPT in place of DNAT and MASQUERADE")
	update := fs.Int("update", -1, "iptables: print `xfwbench kubeproxy`'s partial sync instead: 0 moves the middle service's endpoint, 1 moves it back, 2 changes nothing")
	moved := fs.Bool("moved", false, "print the full sync with the middle service's first endpoint moved (the state -update 0 leads to)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *update >= 0 && *update <= 2 {
		t, err := kpGenerate(*n, *m)
		if err != nil {
			return err
		}
		texts := [2][3]string{{t.update[0], t.update[1], t.same}, {t.updateAccept[0], t.updateAccept[1], t.sameAccept}}
		k := 0
		if *natAsAccept {
			k = 1
		}
		fmt.Print(texts[k][*update])
		return nil
	}
	o := kubeproxy.DefaultOptions(*n, *m)
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		return err
	}
	if *moved {
		changed := *n / 2
		before := svcs[changed]
		svcs = append([]kubeproxy.Service(nil), svcs...)
		svcs[changed] = kubeproxy.MoveEndpoint(&before, netip.MustParseAddr(movedEndpoint))
	}
	switch *format {
	case "iptables":
		fmt.Print(kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: *bootstrap, NATAsAccept: *natAsAccept}))
	case "nft":
		fmt.Print(kubeproxy.NFTables(svcs, o.ServiceCIDR, o.ClusterCIDR, fwInAddr))
	default:
		fmt.Fprintf(os.Stderr, "unknown -format %q\n", *format)
		return fmt.Errorf("-format: %q is neither iptables nor nft", *format)
	}
	return nil
}
