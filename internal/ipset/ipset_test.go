package ipset

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// clock is the fixed time of the unit tests.
var clock = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// run runs one invocation at clock.
func run(store Store, line, stdin string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = RunAt(splitLine(line), strings.NewReader(stdin), &out, &errOut, store, clock)
	return status, out.String(), errOut.String()
}

func TestMatchCommand(t *testing.T) {
	tests := []struct {
		arg  string
		want cmdKind
	}{
		{"create", cmdCreate}, {"n", cmdCreate}, {"-N", cmdCreate}, {"cre", cmdCreate}, {"--create", cmdCreate},
		{"add", cmdAdd}, {"a", cmdAdd}, {"-A", cmdAdd},
		{"d", cmdDel}, {"de", cmdDel}, {"des", cmdDestroy}, {"-X", cmdDestroy}, {"x", cmdDestroy},
		{"t", cmdTest}, {"-T", cmdTest}, {"l", cmdList}, {"-L", cmdList}, {"s", cmdSave}, {"sw", cmdSwap},
		{"-W", cmdSwap}, {"r", cmdRestore}, {"re", cmdRestore}, {"ren", cmdRename}, {"e", cmdRename},
		{"f", cmdFlush}, {"-F", cmdFlush}, {"h", cmdHelp}, {"v", cmdVersion},
		{"foo", cmdNone}, {"-", cmdNone}, {"--", cmdNone}, {"adds", cmdNone},
	}
	for _, tt := range tests {
		if got := matchCommand(tt.arg); got != tt.want {
			t.Errorf("matchCommand(%q) = %v, want %v", tt.arg, got, tt.want)
		}
	}
}

func TestSplitLine(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"add x 1.2.3.4", []string{"add", "x", "1.2.3.4"}},
		{"  add\tx  1.2.3.4  ", []string{"add", "x", "1.2.3.4"}},
		{`add x 1.2.3.4 comment "a b"`, []string{"add", "x", "1.2.3.4", "comment", "a b"}},
		{`add x 1.2.3.4 comment ""`, []string{"add", "x", "1.2.3.4", "comment"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := splitLine(tt.line); !slices.Equal(got, tt.want) {
			t.Errorf("splitLine(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestParseElement(t *testing.T) {
	tests := []struct {
		create string // NAME TYPE [options]
		elem   string
		want   []string // members as printed
		err    string
	}{
		{"s hash:ip", "10.0.0.1", []string{"10.0.0.1"}, ""},
		{"s hash:ip", "10.0.0.0/30", []string{"10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3"}, ""},
		{"s hash:ip", "10.0.0.3-10.0.0.1", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, ""},
		{"s hash:ip netmask 30", "10.0.0.1-10.0.0.9", []string{"10.0.0.0", "10.0.0.4", "10.0.0.8"}, ""},
		{"s hash:ip", "10.0.0.0/0", nil, msgInvalidCIDR},
		{"s hash:ip", "10.0.0.300", nil, "Syntax error: cannot parse 10.0.0.300: resolving to IPv4 address failed"},
		{"s hash:ip", "2001:db8::1", nil, "Syntax error: cannot parse 2001:db8::1: resolving to IPv4 address failed"},
		{"s hash:ip", "10.0.0.1,80", nil, "Syntax error: Elem separator in 10.0.0.1,80, but settype hash:ip supports none."},
		{"s hash:ip family inet6", "2001:db8::1/128", []string{"2001:db8::1"}, ""},
		{"s hash:ip family inet6", "2001:db8::/127", nil, "Syntax error: plain IP address must be supplied: 2001:db8::/127"},
		{"s hash:ip family inet6", "10.0.0.1", nil, "Syntax error: cannot parse 10.0.0.1: resolving to IPv6 address failed"},
		{"s hash:net", "10.1.2.3/8", []string{"10.0.0.0/8"}, ""},
		{"s hash:net", "10.0.0.1", []string{"10.0.0.1"}, ""},
		{"s hash:net", "192.0.2.5-192.0.2.16", []string{"192.0.2.5", "192.0.2.6/31", "192.0.2.8/29", "192.0.2.16"}, ""},
		{"s hash:net", "10.0.0.0/33", nil, "Syntax error: '33' is out of range 0-32"},
		{"s hash:net family inet6", "2001:db8::1-2001:db8::2", nil, "Syntax error: IP address or IP/cidr must be specified: 2001:db8::1-2001:db8::2"},
		{"s hash:ip,port", "10.0.0.1,80", []string{"10.0.0.1,tcp:80"}, ""},
		{"s hash:ip,port", "10.0.0.1,udp:53-54", []string{"10.0.0.1,udp:53", "10.0.0.1,udp:54"}, ""},
		{"s hash:ip,port", "10.0.0.1,icmp:ping", []string{"10.0.0.1,icmp:echo-request"}, ""},
		{"s hash:ip,port", "10.0.0.1,icmp:3/99", []string{"10.0.0.1,icmp:3/99"}, ""},
		{"s hash:ip,port", "10.0.0.1,icmp:8", nil, "Cannot parse 8 as an ICMP type/code."},
		{"s hash:ip,port", "10.0.0.1", nil, "Syntax error: Second element is missing from 10.0.0.1."},
		{"s hash:ip,port", "10.0.0.1,foo:1", nil, "Syntax error: cannot parse 'foo' as a protocol"},
		{"s hash:ip,port", "10.0.0.1,70000", nil, "Syntax error: '70000' is out of range 0-65535\nSyntax error: 'tcp' is invalid as number\ncannot parse '70000' as a tcp port"},
		{"s hash:ip,port family inet6", "2001:db8::1,icmpv6:echo-request", []string{"2001:db8::1,ipv6-icmp:echo-request"}, ""},
		{"s hash:net,port", "10.0.0.0/24,sctp:9", []string{"10.0.0.0/24,sctp:9"}, ""},
		{"s hash:net,iface", "10.0.0.0/8,physdev:eth0", []string{"10.0.0.0/8,physdev:eth0"}, ""},
		{"s hash:net,iface", "10.0.0.0/8,abcdefghijklmnop", nil, "Syntax error: interface name 'abcdefghijklmnop' is longer than 15 characters"},
		{"s bitmap:port range 1-100", "7-9", []string{"7", "8", "9"}, ""},
		{"s list:set", "other", []string{"other"}, ""},
	}
	for _, tt := range tests {
		s, err := parseCreate(splitLine(tt.create))
		if err != nil {
			t.Fatalf("create %s: %v", tt.create, err)
		}
		elems, _, perr := parseElement(s, tt.elem)
		var got []string
		for _, e := range elems {
			got = append(got, elemText(s, e))
		}
		msg := ""
		if perr != nil {
			msg = perr.Msg
		}
		if msg != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("%s: element %q = %q, error %q; want %q, error %q", tt.create, tt.elem, got, msg, tt.want, tt.err)
		}
	}
}

// TestRunGolden runs command sequences and compares every step's output
// with ipset 7.17's (fixed initval, so the output is deterministic).
func TestRunGolden(t *testing.T) {
	type step struct {
		line, stdin    string
		status         int
		stdout, stderr string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"list-and-save", []step{
			{line: "create s hash:net counters comment initval 0x1"},
			{line: `add s 10.0.0.0/8 packets 1 bytes 2 comment "x y"`},
			{line: "add s 10.1.0.0/16 nomatch"},
			{line: "list s", stdout: "Name: s\nType: hash:net\nRevision: 7\n" +
				"Header: family inet hashsize 1024 maxelem 65536 counters comment bucketsize 12 initval 0x00000001\n" +
				"Size in memory: 344\nReferences: 0\nNumber of entries: 2\nMembers:\n" +
				"10.0.0.0/8 packets 1 bytes 2 comment \"x y\"\n10.1.0.0/16 nomatch packets 0 bytes 0\n"},
			{line: "save", stdout: "create s hash:net family inet hashsize 1024 maxelem 65536 counters comment bucketsize 12 initval 0x00000001\n" +
				"add s 10.0.0.0/8 packets 1 bytes 2 comment \"x y\"\nadd s 10.1.0.0/16 nomatch packets 0 bytes 0\n"},
			{line: "list -t -n", stdout: "s\n"},
			{line: "test s 10.2.0.1", stderr: "Warning: 10.2.0.1 is in set s.\n"},
			{line: "test s 10.1.0.1", status: 1, stderr: "10.1.0.1 is NOT in set s.\n"},
		}},
		{"timeouts", []step{
			{line: "create t hash:ip timeout 100 initval 0x2"},
			{line: "add t 1.1.1.1"},
			{line: "add t 1.1.1.2 timeout 0"},
			{line: "save t", stdout: "create t hash:ip family inet hashsize 1024 maxelem 65536 timeout 100 bucketsize 12 initval 0x00000002\n" +
				"add t 1.1.1.1 timeout 100\nadd t 1.1.1.2 timeout 0\n"},
			{line: "add t 1.1.1.3 timeout 2147484", status: 1, stderr: "ipset v7.17: Syntax error: '2147484' is out of range 0-2147483\n"},
		}},
		{"errors", []step{
			{line: "", status: 2, stderr: "ipset v7.17: No command specified.\nTry `ipset help' for more information.\n"},
			{line: "create", status: 2, stderr: "ipset v7.17: Missing mandatory argument to command create\nTry `ipset help' for more information.\n"},
			{line: "create x hash:mac", status: 1, stderr: "ipset v7.17: " + msgTypeNotSupported + "\n"},
			{line: "create x hash:ip skbinfo", status: 2, stderr: "ipset v7.17: Unknown argument: `skbinfo'\nTry `ipset help' for more information.\n"},
			{line: "add x 1.1.1.1", status: 1, stderr: "ipset v7.17: The set with the given name does not exist\n"},
			{line: "-q add x 1.1.1.1", status: 1},
			{line: "version", stdout: "ipset v7.17, protocol version: 7\n"},
		}},
		{"restore-batches", []step{
			{line: "restore", stdin: "create x hash:ip initval 3\nadd x 1.1.1.1\nadd x 1.1.1.1\nadd x 2.2.2.2\n",
				status: 1, stderr: "ipset v7.17: Error in line 3: Element cannot be added to the set: it's already added\n"},
			{line: "restore", stdin: "add x 3.3.3.3\nadd x 4.4.4.300\n",
				status: 1, stderr: "ipset v7.17: Error in line 2: Syntax error: cannot parse 4.4.4.300: resolving to IPv4 address failed\n"},
			{line: "restore", stdin: "add x 5.5.5.5\nversion\n",
				status: 2, stderr: "ipset v7.17: Command `version' is invalid in restore mode.\nTry `ipset help' for more information.\n"},
			{line: "save", stdout: "create x hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x00000003\nadd x 1.1.1.1\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewMemStore()
			for _, st := range tt.steps {
				status, out, errOut := run(store, st.line, st.stdin)
				if status != st.status || out != st.stdout || errOut != st.stderr {
					t.Errorf("ipset %s:\n got %d %q %q\nwant %d %q %q", st.line, status, out, errOut, st.status, st.stdout, st.stderr)
				}
			}
		})
	}
}

// TestBinaryRoundTrip encodes and decodes sets of every type with every
// extension; save output and IDs must survive.
func TestBinaryRoundTrip(t *testing.T) {
	store := NewMemStore()
	for _, line := range []string{
		"create a hash:ip netmask 24 timeout 100 counters comment",
		"create b hash:net family inet6",
		"create c hash:ip,port", "create d hash:net,port", "create e hash:net,iface",
		"create f bitmap:port range 1-100", "create g list:set",
		"add a 1.2.3.4 packets 1 bytes 2 comment hello",
		"add a 1.2.4.4 timeout 0",
		"add b 2001:db8::/32 nomatch", "add b 2001:db8:1::1",
		"add c 10.0.0.1,udp:53", "add c 10.0.0.1,icmp:ping", "add d 10.0.0.0/8,sctp:1",
		"add e 10.0.0.0/8,physdev:br0", "add f 7-9", "add g c", "add g b before c",
		"destroy d",
	} {
		if status, _, errOut := run(store, line, ""); status != 0 {
			t.Fatalf("%s: %s", line, errOut)
		}
	}
	decoded, data := roundTrip(t, store.sets)
	var want, got strings.Builder
	writeList(&want, store.sets.listOrder(), func(*Set) int { return 0 }, listOptions{save: true, members: true}, clock)
	writeList(&got, decoded.listOrder(), func(*Set) int { return 0 }, listOptions{save: true, members: true}, clock)
	if want.String() != got.String() {
		t.Errorf("round trip changed the sets:\n--- before\n%s--- after\n%s", want.String(), got.String())
	}
	for i, s := range store.sets.slots {
		d := decoded.slots[i]
		if (s == nil) != (d == nil) || (s != nil && (s.ID != d.ID || s.Name != d.Name)) {
			t.Errorf("slot %d: %v, decoded %v", i, s, d)
		}
	}
	for n := range len(data) {
		if err := NewSets().UnmarshalBinary(data[:n]); err == nil {
			t.Fatalf("decoding %d of %d bytes succeeded", n, len(data))
		}
	}
}

func TestComputeDiff(t *testing.T) {
	store := NewMemStore()
	for _, line := range []string{
		"create keep hash:ip", "create gone hash:ip", "create a hash:ip", "create b hash:ip", "create r hash:ip",
		"add keep 1.1.1.1", "add keep 2.2.2.2", "add a 3.3.3.3",
	} {
		if status, _, errOut := run(store, line, ""); status != 0 {
			t.Fatalf("%s: %s", line, errOut)
		}
	}
	ids := map[string]uint64{}
	for _, s := range store.sets.All() {
		ids[s.Name] = s.ID
	}
	store.Diffs = nil
	in := "add keep 4.4.4.4\ndel keep 1.1.1.1\nadd keep 1.1.1.1\ndel keep 2.2.2.2\ndestroy gone\nswap a b\nrename r r2\ncreate new hash:net\n"
	if status, _, errOut := run(store, "restore", in); status != 0 {
		t.Fatalf("restore: %s", errOut)
	}
	if len(store.Diffs) != 1 {
		t.Fatalf("%d commits, want 1", len(store.Diffs))
	}
	d := store.Diffs[0]
	if len(d.Created) != 1 || d.Created[0].Name != "new" {
		t.Errorf("Created = %v", d.Created)
	}
	if len(d.Destroyed) != 1 || d.Destroyed[0].ID != ids["gone"] {
		t.Errorf("Destroyed = %v", d.Destroyed)
	}
	renames := map[uint64]string{}
	for _, r := range d.Renamed {
		renames[r.ID] = r.OldName + ">" + r.NewName
	}
	want := map[uint64]string{ids["a"]: "a>b", ids["b"]: "b>a", ids["r"]: "r>r2"}
	if len(renames) != len(want) {
		t.Errorf("Renamed = %v, want %v", renames, want)
	}
	for id, w := range want {
		if renames[id] != w {
			t.Errorf("Renamed[%d] = %q, want %q", id, renames[id], w)
		}
	}
	if len(d.Changed) != 1 || d.Changed[0].Set.Name != "keep" {
		t.Fatalf("Changed = %+v", d.Changed)
	}
	ch := d.Changed[0]
	if len(ch.Added) != 1 || ch.Added[0].Prefix != netip.MustParsePrefix("4.4.4.4/32") {
		t.Errorf("Added = %v, want 4.4.4.4", ch.Added)
	}
	if len(ch.Deleted) != 1 || ch.Deleted[0].Prefix != netip.MustParsePrefix("2.2.2.2/32") {
		t.Errorf("Deleted = %v, want 2.2.2.2", ch.Deleted)
	}
	// The journal and the full comparison agree.
	full := ComputeDiff(store.sets, store.sets)
	if !full.Empty() {
		t.Errorf("diff of a collection with itself: %+v", full)
	}
}

// TestNoCommitOnReadOnly checks that list, save and test do not commit.
func TestNoCommitOnReadOnly(t *testing.T) {
	store := NewMemStore()
	run(store, "create x hash:ip", "")
	n := len(store.Diffs)
	for _, line := range []string{"list", "save", "test x 1.1.1.1", "list -n", "version"} {
		run(store, line, "")
	}
	if len(store.Diffs) != n {
		t.Errorf("read-only commands committed %d times", len(store.Diffs)-n)
	}
}

func TestReadsStdin(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"restore", true}, {"-exist restore", true}, {"-R", true}, {"r", true},
		{"restore -file /tmp/x", false}, {"save", false}, {"list", false}, {"bogus", false},
	}
	for _, tt := range tests {
		if got := ReadsStdin(splitLine(tt.line)); got != tt.want {
			t.Errorf("ReadsStdin(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

// roundTrip returns sets decoded from their encoding, and the encoding.
func roundTrip(t *testing.T, sets *Sets) (*Sets, []byte) {
	t.Helper()
	data, err := sets.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	decoded := NewSets()
	if err := decoded.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	return decoded, data
}

// strictPages is an encoding whose Slice returns a copy of the bytes
// asked for only, so that a decoding reading beyond its window fails.
type strictPages []byte

func (p strictPages) Len() int { return len(p) }

func (p strictPages) Slice(off, n int) ([]byte, error) {
	return append([]byte(nil), p[off:off+n]...), nil
}

// TestUnmarshalPagesWindows decodes sets through Pages whose members and
// headers are longer than the first windows (long comments, many list
// members), as the namespace's map is read piece by piece.
func TestUnmarshalPagesWindows(t *testing.T) {
	store := NewMemStore()
	long := strings.Repeat("x", 250)
	lines := []string{"create a hash:ip comment", "create l list:set size 64", "create b hash:net,port"}
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("create member%02dwithalongername hash:ip", i),
			fmt.Sprintf("add l member%02dwithalongername", i),
			fmt.Sprintf("add a 10.0.%d.1 comment %s%d", i, long, i),
			fmt.Sprintf("add b 10.%d.0.0/16,tcp:%d", i, 1000+i))
	}
	for _, line := range lines {
		if status, _, errOut := run(store, line, ""); status != 0 {
			t.Fatalf("%s: %s", line, errOut)
		}
	}
	data, err := store.sets.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	decoded := NewSets()
	if err := decoded.UnmarshalPages(strictPages(data)); err != nil {
		t.Fatal(err)
	}
	var want, got strings.Builder
	writeList(&want, store.sets.listOrder(), func(*Set) int { return 0 }, listOptions{save: true, members: true}, clock)
	writeList(&got, decoded.listOrder(), func(*Set) int { return 0 }, listOptions{save: true, members: true}, clock)
	if want.String() != got.String() {
		t.Errorf("decoding through pages changed the sets:\n--- before\n%s--- after\n%s", want.String(), got.String())
	}
	if e, ok := decoded.Get("a").Entry(Elem{Prefix: netip.MustParsePrefix("10.0.7.1/32")}); !ok || e.Comment != long+"7" {
		t.Errorf("member 10.0.7.1: %v %q", ok, e.Comment)
	}
	for n := range len(data) {
		if err := NewSets().UnmarshalPages(strictPages(data[:n])); err == nil {
			t.Fatalf("decoding %d of %d bytes succeeded", n, len(data))
		}
	}
}
