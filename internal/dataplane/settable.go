package dataplane

// SetTable is one set lookup of a generation: the set it looks up (as a
// longest-prefix-match table, internal/lpm's flat arrays looked up by
// bpf/lpm.h, or as a hash table, bpf/set_lookup.h xfw_set_hlookup), how, and
// the set condition its answer goes to. Its values are SetMember and
// SetNomatch.
type SetTable struct {
	// Cond is the set condition (bit of compiler.FieldSets) the answer is
	// OR-ed into.
	Cond int
	// Set is the set looked up; Via the list:set it is a member of, when
	// the condition tests a list ("" otherwise).
	Set, Via string
	// Kind is SetKindDXR (Direct, Ranges, Used) or hash kinds
	// (SetKindAddr|…: Hash, MaxPlen).
	Kind uint8
	// Dst1 and Dst2 say the first and second dimensions are looked up by
	// the destination (address, port; for interfaces: the output one).
	Dst1, Dst2 bool
	// ReturnNomatch is --return-nomatch, for a set type with nomatch
	// entries.
	ReturnNomatch bool
	// ListCtr is 1 + the set counter of the list:set entry (Via's) naming
	// Set, 0 when the list has no counters.
	ListCtr uint32
	// ID is the set's content identity (ipset.Set.ID) and ListExp the
	// wall-clock expiry (Unix ns, 0: none) of the list entry capping its
	// entries: with Set, Via and Kind, what decides whether a later
	// generation may take the hash table over (Reuse).
	ID      uint64
	ListExp int64
	// Reuse is 1 + the index of the running generation's lookup whose
	// hash table (and element counters) this lookup takes over unchanged
	// (Hash is then empty); SameAs 1 + the index of an earlier lookup of
	// this generation whose table it shares. 0: its own table, built from
	// Hash.
	Reuse, SameAs int
	// Counters is the number of element counters of a hash table of a set
	// with counters (its entries' Ctr are 1…Counters), 0 without.
	Counters int

	Direct, Ranges []uint64
	// Used is how many words of Ranges are in use (lpm.Table.Used): the
	// ranges map keeps it in its last word, the high-water mark after
	// which a patch of the running generation (RunningSets.Tables) writes new
	// blocks.
	Used int
	// Nomatch says the set's type has nomatch entries (hash:net, …):
	// --return-nomatch reverses its answers only then (ip_set_test
	// inverts a matched element of a type with IPSET_TYPE_NOMATCH).
	Nomatch bool

	// Hash are the hash table's entries, meta keys (SetMetaEntries)
	// included.
	Hash []SetHashEntry
	// MaxPlen is the address length of a hash kind with an address (32,
	// 128), else 0.
	MaxPlen uint8
	// Capacity is the number of entries the hash table is created for:
	// the set's maxelem and the meta keys, so that patches always fit.
	Capacity int

	// Write marks the lookup of a set the generation's SET targets write
	// (compiler.Generation.SetWrites, in that order, after every set
	// condition's lookup): it answers no condition (Cond is ignored), the
	// data plane adds to and deletes from its table (bpf/settarget.h).
	// Writable says the table has the write parameters
	// (SetWriteMetaEntry): every lookup of a written set has it.
	Write, Writable bool
}

// Kinds of set lookups (XFW_SETK_*): SetKindDXR, or a hash table whose
// keys hold the parts named by the other bits.
const (
	SetKindDXR    = 0
	SetKindAddr   = 1 // the address, masked to each present prefix length
	SetKindPort   = 2 // protocol and port
	SetKindIface  = 4 // the interface's ifindex
	SetKindTCPUDP = 8 // port of TCP and UDP only, protocol 0 (bitmap:port)
)

// SetHashKey is the key of a hash set table (struct xfw_setkey).
type SetHashKey struct {
	Hi, Lo  uint64 // the address, masked (IPv4: Lo)
	Ifindex uint32
	Port    uint16
	Proto   uint8
	Plen    uint8
}

// SetHashEntry is one entry of a hash set table: Answer SetMember or
// SetNomatch, Expires the CLOCK_MONOTONIC time in ns it times out at (0:
// never); meta entries carry a prefix-length word in Expires. A
// hash:net,iface blocker (Key.Ifindex 0, Answer 0) ends the walk over
// prefix lengths unless Aux is the packet's interface (struct xfw_setval).
type SetHashEntry struct {
	Key     SetHashKey
	Expires uint64
	Answer  uint32
	Aux     uint32
	// Ctr is 1 + the entry's element counter in its table's counters
	// (SetTable.Counters), 0 when the set has no counters.
	Ctr uint32
}

// SetMetaPlen is the Plen of a hash set table's meta keys (XFW_SETKEY_META):
// meta key Port w holds, in Expires, bits 64w..64w+63 of the prefix
// lengths present (bit i: length 64w+i has entries).
const SetMetaPlen = 255

// SetMetaWords is the number of meta keys: 129 prefix lengths.
const SetMetaWords = 3

// SetMetaEntries returns the meta entries describing the prefix lengths
// present (plens[l] for length l, 0–128).
func SetMetaEntries(plens *[129]bool) []SetHashEntry {
	var out []SetHashEntry
	for w := 0; w < SetMetaWords; w++ {
		var word uint64
		for i := 0; i < 64 && 64*w+i <= 128; i++ {
			if plens[64*w+i] {
				word |= 1 << i
			}
		}
		out = append(out, SetHashEntry{Key: SetHashKey{Port: uint16(w), Plen: SetMetaPlen}, Expires: word})
	}
	return out
}

// Values of a SetTable's prefixes (XFW_SET_MEMBER, XFW_SET_NOMATCH).
const (
	SetMember  = 1
	SetNomatch = 2
)

// maxSetLookups is XFW_MAX_SETLOOKUPS: set lookups per generation.
const maxSetLookups = 16

// MaxSetLookups is how many set lookups one family's ruleset may use: a
// set condition takes one, a list:set condition one per member.
const MaxSetLookups = maxSetLookups
