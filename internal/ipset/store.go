package ipset

import (
	"github.com/xfw-dev/xfw/internal/netns"

	"github.com/xfw-dev/xfw/internal/statefile"

	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Store keeps the sets of one network namespace.
//
// Run calls Load once, applies the invocation to a Clone of what Load
// returned, and calls Commit(old, new) once with the two if anything
// changed. Commit must make new the current collection atomically (all of
// it or none); ComputeDiff(old, new) tells what changed, at the cost of the
// changes. References is asked during destroy, rename and list.
type Store interface {
	// Load returns the current sets. Run does not modify the result.
	Load() (*Sets, error)
	// Commit replaces old (what Load returned) with new.
	Commit(old, new *Sets) error
	// References returns how many firewall rules use the set called name
	// (list:set memberships are counted by the model itself).
	References(name string) (int, error)
}

// MemStore is a Store in memory, for tests and for callers that hold the
// sets themselves.
type MemStore struct {
	mu   sync.Mutex
	sets *Sets
	// Refs are the firewall-rule references per set name.
	Refs map[string]int
	// Diffs records the Diff of every Commit, oldest first.
	Diffs []Diff
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{sets: NewSets(), Refs: map[string]int{}} }

// Load returns the current sets.
func (m *MemStore) Load() (*Sets, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets, nil
}

// Commit makes new current.
func (m *MemStore) Commit(old, new *Sets) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old != m.sets {
		return errors.New("sets changed since they were loaded")
	}
	m.Diffs = append(m.Diffs, ComputeDiff(old, new))
	m.sets = new
	return nil
}

// References returns m.Refs[name].
func (m *MemStore) References(name string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Refs[name], nil
}

// FileEnv names the environment variable with FileStore's default path.
const FileEnv = "XFW_IPSET_FILE"

// DefaultDir holds FileStore's files when FileEnv is not set: one per
// network namespace (sets are per namespace), named after the namespace's
// cookie (SO_NETNS_COOKIE, never reused while the machine runs, unlike the
// namespace's inode, which a new namespace may get once the old one is
// gone): /run/xfw/ipset-netns-4097.state.
const DefaultDir = "/run/xfw"

// FileStore keeps the sets in a file (MarshalBinary's format), replaced
// atomically by rename on Commit. It has no rule references. Callers
// serialise invocations (xfw's lock).
type FileStore struct {
	Path string
}

// NewFileStore returns the FileStore at $XFW_IPSET_FILE, or the current
// network namespace's file in DefaultDir.
func NewFileStore() (*FileStore, error) {
	if p := os.Getenv(FileEnv); p != "" {
		return &FileStore{Path: p}, nil
	}
	c, err := netns.Cookie()
	if err != nil {
		return nil, fmt.Errorf("the network namespace's sets: %w", err)
	}
	return &FileStore{Path: filepath.Join(DefaultDir, fmt.Sprintf("ipset-netns-%d.state", c))}, nil
}

// Load reads the file; a missing file is an empty collection.
func (f *FileStore) Load() (*Sets, error) {
	data, err := statefile.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewSets(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	ss := NewSets()
	if err := ss.UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("decode %s: %w", f.Path, err)
	}
	return ss, nil
}

// Commit writes new to a new file of a random name (O_EXCL, mode 0600, no
// symbolic link followed) and renames it over the old one.
func (f *FileStore) Commit(old, new *Sets) error {
	data, err := new.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encode sets: %w", err)
	}
	return statefile.WriteAtomic(f.Path, data)
}

// References returns 0: no firewall rule uses sets yet.
func (f *FileStore) References(name string) (int, error) { return 0, nil }
