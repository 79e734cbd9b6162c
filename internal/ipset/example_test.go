package ipset_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/xfw-dev/xfw/internal/ipset"
)

// Run executes ipset invocations against a store; a data plane reads the
// sets and the diff of every commit.
func ExampleRun() {
	store := ipset.NewMemStore()
	in := "create blocked hash:net\nadd blocked 192.0.2.0/24\nadd blocked 192.0.2.128/25 nomatch\n"
	if status := ipset.Run([]string{"restore"}, strings.NewReader(in), os.Stdout, os.Stdout, store); status != 0 {
		fmt.Println("restore failed:", status)
	}
	ipset.Run([]string{"test", "blocked", "192.0.2.200"}, nil, os.Stdout, os.Stdout, store)

	sets, _ := store.Load()
	s := sets.Get("blocked")
	fmt.Println(s.Type, s.Options.Family, s.Len())
	for _, e := range s.Entries() {
		fmt.Println(e.Prefix, e.Nomatch)
	}
	fmt.Println(s.Contains(ipset.Elem{Prefix: netip.MustParsePrefix("192.0.2.1/32")}))
	// Output:
	// 192.0.2.200 is NOT in set blocked.
	// hash:net inet 2
	// 192.0.2.0/24 false
	// 192.0.2.128/25 true
	// true
}

// ComputeDiff tells what a commit changed, at the cost of the changes.
func ExampleComputeDiff() {
	store := ipset.NewMemStore()
	ipset.Run([]string{"create", "a", "hash:ip"}, nil, os.Stdout, os.Stdout, store)
	ipset.Run([]string{"add", "a", "10.0.0.1"}, nil, os.Stdout, os.Stdout, store)
	ipset.Run([]string{"rename", "a", "b"}, nil, os.Stdout, os.Stdout, store)

	last := store.Diffs[len(store.Diffs)-1]
	for _, r := range last.Renamed {
		fmt.Printf("set %d: %s -> %s\n", r.ID, r.OldName, r.NewName)
	}
	add := store.Diffs[1]
	fmt.Println(add.Changed[0].Set.Name, add.Changed[0].Added[0].Prefix)
	// Output:
	// set 1: a -> b
	// a 10.0.0.1/32
}
