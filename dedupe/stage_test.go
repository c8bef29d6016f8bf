package dedupe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCrashRecoversStagedMarks crashes a synced store while marks are
// staged or being indexed: every acknowledged mark must survive, and a
// forgotten ID must not come back from the log.
func TestCrashRecoversStagedMarks(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	o := testOptions(fs, clock)
	o.Sync, o.stageLimit = true, 50
	s := mustOpen(t, "db", o)
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	var acked, forgotten [][]byte
	for round := range 20 {
		for i := range 60 {
			id := fmt.Appendf(nil, "r%d-c%d", round, i)
			first, err := s.Claim(id)
			require.NoError(t, err)
			require.True(t, first)
			acked = append(acked, id)
		}
		var batch [][]byte
		for i := range 150 {
			batch = append(batch, fmt.Appendf(nil, "r%d-b%d", round, i))
		}
		first, err := s.ClaimBatch(batch)
		require.NoError(t, err)
		require.NotContains(t, first, false)
		acked = append(acked, batch...)
		// Forget a just-staged ID.
		gone := acked[len(acked)-1-rng.IntN(100)]
		require.NoError(t, s.Forget(gone))
		forgotten = append(forgotten, gone)
		acked = slices.DeleteFunc(acked, func(id []byte) bool { return bytes.Equal(id, gone) })

		crashed := fs.CrashClone(vfs.CrashCloneCfg{
			UnsyncedDataPercent: rng.IntN(101),
			RNG:                 rand.New(rand.NewPCG(uint64(round), 2)),
		})
		co := testOptions(crashed, clock)
		r, err := Open("db", co)
		require.NoError(t, err, "round %d", round)
		got, err := r.SeenBatch(acked)
		require.NoError(t, err)
		for i, ok := range got {
			require.True(t, ok, "round %d: acknowledged mark %q lost", round, acked[i])
		}
		got, err = r.SeenBatch(forgotten)
		require.NoError(t, err)
		for i, ok := range got {
			require.False(t, ok, "round %d: forgotten %q came back", round, forgotten[i])
		}
		// Open indexed the recovered marks: they are in pebble, not staged.
		require.Zero(t, r.stage.gens().active.n.Load())
		require.NoError(t, r.Close())
	}
}

// TestUpgradeV1 opens a store written by format version 1, whose log is
// fully indexed and has no watermark: it must not be re-indexed, which
// would resurrect forgotten IDs.
func TestUpgradeV1(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs, newFakeClock())
	s := mustOpen(t, "db", o)
	require.NoError(t, s.Mark([]byte("kept"), []byte("forgotten")))
	require.NoError(t, s.Forget([]byte("forgotten")))
	require.NoError(t, s.Close())
	withRawDB(t, fs, func(db *pebble.DB) {
		require.NoError(t, db.Set(formatKey, formatValueV1, pebble.Sync))
		require.NoError(t, db.Delete(indexedKey, pebble.Sync))
	})
	s = mustOpen(t, "db", o)
	got, err := s.SeenBatch([][]byte{[]byte("kept"), []byte("forgotten")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, got)
	require.NoError(t, s.Close())
	withRawDB(t, fs, func(db *pebble.DB) {
		v, closer, err := db.Get(formatKey)
		require.NoError(t, err)
		require.Equal(t, string(formatValue), string(v))
		require.NoError(t, closer.Close())
	})
}

func TestStageGen(t *testing.T) {
	g := newStageGen(1)
	// Distinct IDs with one hash exercise the probing.
	ids := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("a")}
	q := &idBatch{ids: ids, hash: []uint64{7, 7, 7, 7}}
	g.add(q, []int{0, 1, 2}, 5)
	g.add(q, []int{3}, 9) // re-mark keeps the newest bucket
	require.Len(t, g.ents, 3)
	require.True(t, g.contains([]byte("a"), 7, 9))
	require.False(t, g.contains([]byte("b"), 7, 6))
	require.True(t, g.contains([]byte("c"), 7, 5))
	require.False(t, g.contains([]byte("d"), 7, 0))
	require.False(t, g.contains([]byte("a"), 8, 0))
	for i := range 1000 { // grows the table
		id := fmt.Appendf(nil, "id-%d", i)
		g.add(&idBatch{ids: [][]byte{id}, hash: []uint64{uint64(i % 10)}}, []int{0}, 1)
	}
	for i := range 1000 {
		require.True(t, g.contains(fmt.Appendf(nil, "id-%d", i), uint64(i%10), 1), i)
	}
}

func TestNewIDBatch(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	q := s.newIDBatch([][]byte{[]byte("x"), []byte("y"), []byte("x"), []byte("z"), []byte("y")})
	require.Equal(t, []int{0, 1, 3}, q.uniq)
	require.Equal(t, []int32{0, 1, 0, 3, 1}, q.first)
	q = s.newIDBatch([][]byte{[]byte("x"), []byte("y")})
	require.Equal(t, []int{0, 1}, q.uniq)
	require.Nil(t, q.first)
}

// TestIndexRoundOrder checks the radix sort of a round against the key
// order, with IDs that share long prefixes and differ in length.
func TestIndexRoundOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	var ids [][]byte
	for range 3000 {
		id := make([]byte, 1+rng.IntN(300))
		for i := range id {
			id[i] = byte(rng.IntN(3))
		}
		ids = append(ids, id)
	}
	ents := make([]headEnt, len(ids))
	for i, id := range ids {
		ents[i] = headEnt{indexHead(id), int32(i)}
	}
	ents = sortHeads(ents, make([]headEnt, len(ents)))
	for i := 1; i < len(ents); i++ {
		a, b := ids[ents[i-1].i], ids[ents[i].i]
		if ents[i-1].head == ents[i].head {
			continue // ties are ordered by writeIndex
		}
		require.Negative(t, bytes.Compare(appendIndexPrefix(nil, a), appendIndexPrefix(nil, b)))
	}
	for _, id := range ids {
		var head [8]byte
		copy(head[:], appendIndexPrefix(nil, id))
		require.Equal(t, binary.BigEndian.Uint64(head[:]), indexHead(id))
	}
}
