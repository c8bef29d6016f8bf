package dedupe

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// fakeClock is a manually advanced Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testOptions returns in-memory options with a fake clock and no
// background expiry, so tests control every step.
func testOptions(fs vfs.FS, clock Clock) *Options {
	return &Options{
		FS:                fs,
		Clock:             clock,
		Logger:            discard(),
		TTL:               10 * time.Hour,
		BucketWidth:       time.Hour,
		CacheSize:         8 << 20,
		MemTableSize:      1 << 20,
		DisableAutoExpiry: true,
	}
}

func mustOpen(t testing.TB, dir string, o *Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	require.NoError(t, err)
	return s
}

// rawKeys returns all keys of the given tag; for checking physical state.
// Staged marks are indexed first: their index keys are physically pending.
func rawKeys(t testing.TB, s *Store, tag byte) [][]byte {
	t.Helper()
	require.NoError(t, s.indexRound())
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{tag}, UpperBound: []byte{tag + 1},
	})
	require.NoError(t, err)
	var keys [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	require.NoError(t, it.Close())
	return keys
}

// hasIndex reports whether any index key of id is physically present.
func hasIndex(t testing.TB, s *Store, id []byte) bool {
	t.Helper()
	require.NoError(t, s.indexRound())
	it, err := s.db.NewIter(nil)
	require.NoError(t, err)
	ok := it.SeekPrefixGE(appendIndexPrefix(nil, id))
	require.NoError(t, it.Close())
	return ok
}
