// Command xfw is an iptables-compatible packet filter enforced with eBPF
// (XDP ingress, TCX egress). See README.md.
package main

import (
	"os"

	"github.com/xfw-dev/xfw/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
