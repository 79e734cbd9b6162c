package main

import (
	"flag"
	"fmt"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := kubeproxy.DefaultOptions(*n, *m)
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		return err
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
