package ipset

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// FuzzRestore checks that no restore input panics, and that whatever a
// restore leaves, saved, restores into an empty store and saves the same
// (ipset's save is its own restore format).
func FuzzRestore(f *testing.F) {
	for _, s := range []string{
		"create a hash:ip family inet hashsize 1024 maxelem 65536\nadd a 10.0.0.1\n",
		"create n hash:net,port family inet6 timeout 60\nadd n 2001:db8::/64,tcp:80 timeout 10\n",
		"create l list:set size 8\ncreate b bitmap:port range 1-1000\nadd b 80\nadd l b\n",
		"create m hash:ip,port,ip counters comment\nadd m 1.2.3.4,udp:53,5.6.7.8 packets 1 bytes 2 comment \"x y\"\n",
		"create i hash:net,iface nomatch\nadd i 10.0.0.0/8,eth0 nomatch\n-exist\nflush i\ndestroy i\n",
		"create s hash:mac\nadd s 00:11:22:33:44:55\nrename s t\nswap t t\n",
	} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, in string) {
		if strings.Contains(in, "file") {
			return // -file names a path to read or write: not the fuzzer's to touch
		}
		store := NewMemStore()
		if RunAt([]string{"restore"}, strings.NewReader(in), io.Discard, io.Discard, store, now) != statusOK {
			return
		}
		var saved bytes.Buffer
		if st := RunAt([]string{"save"}, nil, &saved, io.Discard, store, now); st != statusOK {
			t.Fatalf("save after a restore of %q: status %d", in, st)
		}
		again := NewMemStore()
		var stderr bytes.Buffer
		if st := RunAt([]string{"restore"}, bytes.NewReader(saved.Bytes()), io.Discard, &stderr, again, now); st != statusOK {
			t.Fatalf("restore of %q, saved as %q, does not restore: status %d: %s", in, saved.String(), st, stderr.String())
		}
		var twice bytes.Buffer
		RunAt([]string{"save"}, nil, &twice, io.Discard, again, now)
		if twice.String() != saved.String() {
			t.Fatalf("restore of %q saves as %q, restored again as %q", in, saved.String(), twice.String())
		}
	})
}
