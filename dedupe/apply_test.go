package dedupe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestApplyTimesAndMeta: Apply marks each ID at its own time (expired ones
// skipped), sets metadata, and later marks and lookups behave as with
// ApplyMarks.
func TestApplyTimesAndMeta(t *testing.T) {
	clock := newFakeClock()
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), clock))
	defer s.Close()
	now := clock.Now()

	_, ok, err := s.Meta([]byte("cp"))
	require.NoError(t, err)
	require.False(t, ok)

	var b Batch
	b.Mark([]byte("new"), now)
	b.Mark([]byte("hour-old"), now.Add(-time.Hour))
	b.Mark([]byte("nine-hours-old"), now.Add(-9*time.Hour))
	b.Mark([]byte("expired"), now.Add(-12*time.Hour))
	b.Mark([]byte("new"), now.Add(-2*time.Hour)) // a duplicate in another bucket
	b.SetMeta([]byte("cp"), []byte("v1"))
	require.Equal(t, 5, b.Len())
	require.NoError(t, s.Apply(&b))

	v, ok, err := s.Meta([]byte("cp"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v1", string(v))
	seen, err := s.SeenBatch([][]byte{[]byte("new"), []byte("hour-old"), []byte("nine-hours-old"), []byte("expired")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, false}, seen)

	// Marks keep their own time: the nine-hour-old one expires first.
	clock.Advance(2 * time.Hour)
	seen, err = s.SeenBatch([][]byte{[]byte("new"), []byte("hour-old"), []byte("nine-hours-old")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, false}, seen)

	// Metadata alone, and an empty batch.
	b.Reset()
	b.SetMeta([]byte("cp"), []byte("v2"))
	require.NoError(t, s.Apply(&b))
	v, _, err = s.Meta([]byte("cp"))
	require.NoError(t, err)
	require.Equal(t, "v2", string(v))
	require.NoError(t, s.Apply(&Batch{}))

	// Metadata keys do not collide with the store's own.
	b.Reset()
	b.SetMeta([]byte("format"), []byte("x"))
	require.NoError(t, s.Apply(&b))
	require.NoError(t, s.Close())
	s = mustOpen(t, "db", testOptions(vfs.NewMem(), clock)) // reopen of another fs is fresh
	require.NoError(t, s.Close())

	b.Reset()
	b.Mark(nil, now)
	s2 := mustOpen(t, "db2", testOptions(vfs.NewMem(), clock))
	defer s2.Close()
	require.ErrorIs(t, s2.Apply(&b), ErrEmptyID)
}

// TestApplyAtomicWithMetaUnderCrash: without Sync a crash may lose the
// latest Applies, but never splits one: whatever checkpoint survives, the
// marks of every Apply up to it survive too.
func TestApplyAtomicWithMetaUnderCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	s := mustOpen(t, "db", testOptions(fs, clock))
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	id := func(round, i int) []byte { return fmt.Appendf(nil, "r%03d-%03d", round, i) }
	for round := range 20 {
		var b Batch
		for i := range 100 {
			b.Mark(id(round, i), clock.Now().Add(-time.Duration(i%5)*time.Hour))
		}
		b.SetMeta([]byte("cp"), binary.BigEndian.AppendUint64(nil, uint64(round+1)))
		require.NoError(t, s.Apply(&b))

		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(uint64(round), 2))})
		r, err := Open("db", testOptions(crashed, clock))
		require.NoError(t, err, "round %d", round)
		v, ok, err := r.Meta([]byte("cp"))
		require.NoError(t, err)
		cp := 0
		if ok {
			cp = int(binary.BigEndian.Uint64(v))
		}
		require.LessOrEqual(t, cp, round+1)
		for rd := range cp {
			var ids [][]byte
			for i := range 100 {
				ids = append(ids, id(rd, i))
			}
			got, err := r.SeenBatch(ids)
			require.NoError(t, err)
			for i, ok := range got {
				require.True(t, ok, "round %d: mark %s of checkpoint %d lost", round, ids[i], rd+1)
			}
		}
		require.NoError(t, r.Close())
	}
}

// TestSyncOnce: with SyncOnce and without Sync, a returned Once survives a
// crash that loses every unsynced write.
func TestSyncOnce(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	o := testOptions(fs, clock)
	o.SyncOnce = true
	s := mustOpen(t, "db", o)
	defer s.Close()
	for i := range 20 {
		ran, err := s.Once(context.Background(), fmt.Appendf(nil, "effect-%d", i), func(context.Context) error { return nil })
		require.NoError(t, err)
		require.True(t, ran)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	r, err := Open("db", testOptions(crashed, clock))
	require.NoError(t, err)
	defer r.Close()
	for i := range 20 {
		seen, err := r.Seen(fmt.Appendf(nil, "effect-%d", i))
		require.NoError(t, err)
		require.True(t, seen, "effect %d", i)
	}
}
