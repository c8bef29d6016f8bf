package statestore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

var p0 = Partition{Topic: "in", Partition: 0}

func apply(t *testing.T, s *Store, p Partition, next int64, ws ...Write) {
	t.Helper()
	b := s.NewBatch()
	b.Write(p, ws...)
	b.SetCheckpoint(p, Checkpoint{TopicID: [16]byte{1}, Next: next})
	require.NoError(t, b.Commit())
}

func TestGetScanCheckpointReset(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer s.Close()
	p1 := Partition{Topic: "in", Partition: 1}
	apply(t, s, p0, 10, Write{Key: []byte("a/1"), Value: []byte("x")}, Write{Key: []byte("a/2"), Value: []byte("y")}, Write{Key: []byte("b"), Value: []byte("z")})
	apply(t, s, p1, 3, Write{Key: []byte("a/1"), Value: []byte("other partition")})
	apply(t, s, p0, 12, Write{Key: []byte("a/2"), Delete: true})

	v, ok, err := s.Get(p0, []byte("a/1"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "x", string(v))
	_, ok, err = s.Get(p0, []byte("a/2"))
	require.NoError(t, err)
	require.False(t, ok)

	var keys []string
	require.NoError(t, s.Scan(p0, []byte("a/"), func(k, _ []byte) bool { keys = append(keys, string(k)); return true }))
	require.Equal(t, []string{"a/1"}, keys)

	c, ok, err := s.Checkpoint(p0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, Checkpoint{TopicID: [16]byte{1}, Next: 12}, c)

	b := s.NewBatch()
	b.Reset(p0)
	require.NoError(t, b.Commit())
	_, ok, _ = s.Get(p0, []byte("a/1"))
	require.False(t, ok)
	_, ok, _ = s.Checkpoint(p0)
	require.False(t, ok)
	v, ok, _ = s.Get(p1, []byte("a/1"))
	require.True(t, ok, "other partitions are untouched")
	require.Equal(t, "other partition", string(v))
}

// TestCrashSafety: with Sync, every applied batch survives a crash that
// keeps a random part of the unsynced data, and the store's keys always
// match its checkpoint (batches are atomic).
func TestCrashSafety(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 10 {
		fs := vfs.NewCrashableMem()
		s, err := Open("db", &Options{FS: fs, Sync: true})
		require.NoError(t, err)
		n := 1 + rng.IntN(50)
		for i := range n {
			apply(t, s, p0, int64(i+1), Write{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte("v")})
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(uint64(round), 1))})
		require.NoError(t, s.Close())

		s, err = Open("db", &Options{FS: crashed})
		require.NoError(t, err, "round %d", round)
		c, ok, err := s.Checkpoint(p0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(n), c.Next, "every synced batch survives")
		count := 0
		require.NoError(t, s.Scan(p0, nil, func(_, _ []byte) bool { count++; return true }))
		require.Equal(t, n, count)
		require.NoError(t, s.Close())
	}
}

func TestCorruptStoreReported(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", &Options{FS: fs})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A directory with files that are not a store is reported, not reused.
	require.NoError(t, fs.MkdirAll("junk", 0o755))
	f, err := fs.Create("junk/file", vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = Open("junk", &Options{FS: fs})
	require.ErrorIs(t, err, ErrCorrupt)

	// A store whose MANIFEST is gone is reported, not emptied.
	names, err := fs.List("db")
	require.NoError(t, err)
	for _, n := range names {
		if len(n) > 8 && n[:8] == "MANIFEST" {
			require.NoError(t, fs.Remove("db/"+n))
		}
	}
	_, err = Open("db", &Options{FS: fs})
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestClosed: every call on a closed store returns ErrClosed, a second
// Close too.
func TestClosed(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	b := s.NewBatch()
	b.Write(p0, Write{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), ErrClosed)
	_, _, err = s.Get(p0, []byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Scan(p0, nil, func(_, _ []byte) bool { return true }), ErrClosed)
	_, _, err = s.Checkpoint(p0)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, b.Commit(), ErrClosed)
}
