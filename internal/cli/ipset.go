package cli

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ipset"
)

// newIpsetStore returns the store `xfw ipset` works on. For now the sets
// live in a file ($XFW_IPSET_FILE, default one per network namespace under
// /run/xfw); the data plane's store (BPF maps per network namespace)
// replaces it.
var newIpsetStore = func() ipset.Store { return ipset.NewFileStore() }

func init() {
	commands["ipset"] = runIpset
	frontEnds["ipset"] = runIpset
}

// runIpset is `ipset …`: one invocation under xfw's lock (ipset has no -w;
// the kernel serialises its commands, so the lock is waited for).
func runIpset(name string, args []string, env Env) int {
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer unlock()
	return ipset.Run(args, env.Stdin, env.Stdout, env.Stderr, newIpsetStore())
}
