package cli

import (
	"bytes"
	"fmt"
	"io"

	"github.com/xfw-dev/xfw/internal/ipset"
)

// newIpsetStore returns the store `xfw ipset` works on. For now the sets
// live in a file ($XFW_IPSET_FILE, default one per network namespace under
// /run/xfw); the data plane's store (BPF maps per network namespace)
// replaces it.
var newIpsetStore = func() (ipset.Store, error) { return ipset.NewFileStore() }

func init() {
	commands["ipset"] = runIpset
	frontEnds["ipset"] = runIpset
}

// runIpset is `ipset …`: one invocation under xfw's lock (ipset has no -w;
// the kernel serialises its commands, so the lock is waited for).
func runIpset(name string, args []string, env Env) int {
	stdin := env.Stdin
	if ipset.ReadsStdin(args) {
		// Read the input before taking the lock: the writer of a pipe
		// (`ipset save | ipset restore`) may hold it.
		data, err := io.ReadAll(env.Stdin)
		if err != nil {
			fmt.Fprintf(env.Stderr, "ipset: read standard input: %v\n", err)
			return exitOther
		}
		stdin = bytes.NewReader(data)
	}
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer unlock()
	store, err := newIpsetStore()
	if err != nil {
		fmt.Fprintf(env.Stderr, "ipset v%s: %v\n", ipset.Version, err)
		return exitOther
	}
	return ipset.Run(args, stdin, env.Stdout, env.Stderr, store)
}
