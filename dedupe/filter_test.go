package dedupe

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestBlockedBloom(t *testing.T) {
	const n = 100_000
	f := newBlockedBloom(n)
	rng := rand.New(rand.NewPCG(1, 1))
	for range n {
		f.add(rng.Uint64())
	}
	rng = rand.New(rand.NewPCG(1, 1))
	for range n {
		require.True(t, f.has(rng.Uint64()))
	}
	fp := 0
	for range n {
		if f.has(rng.Uint64()) {
			fp++
		}
	}
	t.Logf("false positives at capacity: %.3f%%", 100*float64(fp)/n)
	require.Less(t, fp, n/200, "false-positive rate above 0.5%")
}

func TestFilterEpochs(t *testing.T) {
	f := newFilterSet(window{ttl: 10 * time.Hour, width: time.Hour}, 16)
	require.EqualValues(t, 2, f.k) // 11 buckets in 8 epochs
	f.add([]uint64{1}, []int{0}, 3)
	f.add([]uint64{2}, []int{0}, 8)
	require.True(t, f.mayContain(1, 0))
	require.True(t, f.mayContain(1, 2))  // epoch 1 covers buckets 2 and 3
	require.False(t, f.mayContain(1, 4)) // only later epochs are probed
	require.True(t, f.mayContain(2, 4))
	f.dropBelow(4)
	require.False(t, f.mayContain(1, 0))
	require.True(t, f.mayContain(2, 0))
	// An epoch that may hold marks from before Open answers "maybe" until
	// it is built.
	f.addUnbuilt(9, 9)
	require.True(t, f.mayContain(12345, 0))
	require.Len(t, f.queued(), 1)
}

// TestFilterRebuildsUnderLoad marks IDs while their epoch's filter is
// rebuilt again and again, checking that every acknowledged mark stays
// visible throughout.
func TestFilterRebuildsUnderLoad(t *testing.T) {
	clock := newFakeClock()
	o := testOptions(vfs.NewMem(), clock)
	o.filterMinIDs, o.stageLimit = 8, 64
	s := mustOpen(t, "db", o)
	defer s.Close()
	var acked atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			var batch [][]byte
			for j := range 25 {
				batch = append(batch, fmt.Appendf(nil, "m-%d-%d", i, j))
			}
			if err := s.Mark(batch...); err != nil {
				panic(err)
			}
			acked.Store(int64(i + 1))
		}
	}()
	rng := rand.New(rand.NewPCG(9, 9))
	for acked.Load() < 200 {
		n := acked.Load()
		if n == 0 {
			continue
		}
		i := rng.Int64N(n)
		seen, err := s.Seen(fmt.Appendf(nil, "m-%d-%d", i, rng.IntN(25)))
		require.NoError(t, err)
		require.True(t, seen, "batch %d", i)
		first, err := s.Claim(fmt.Appendf(nil, "m-%d-%d", i, rng.IntN(25)))
		require.NoError(t, err)
		require.False(t, first, "batch %d claimed twice", i)
	}
	wg.Wait()
	require.Greater(t, s.filter.memory(), int64(0))
}

// TestFilterBuiltAfterReopen reopens a store with marks in several epochs:
// lookups are right both before the filters are built and after.
func TestFilterBuiltAfterReopen(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	o := testOptions(fs, clock)
	o.filterMinIDs = 8
	s := mustOpen(t, "db", o)
	var ids [][]byte
	for h := range 9 {
		var batch [][]byte
		for i := range 100 {
			batch = append(batch, fmt.Appendf(nil, "h%d-%d", h, i))
		}
		require.NoError(t, s.Mark(batch...))
		ids = append(ids, batch...)
		clock.Advance(time.Hour)
	}
	require.NoError(t, s.Close())
	s = mustOpen(t, "db", o)
	defer s.Close()
	check := func() {
		got, err := s.SeenBatch(ids)
		require.NoError(t, err)
		require.NotContains(t, got, false)
		got, err = s.SeenBatch([][]byte{[]byte("never")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, got)
	}
	check()
	require.Eventually(t, func() bool { return len(s.filter.queued()) == 0 },
		10*time.Second, time.Millisecond)
	check()
	first, err := s.Claim([]byte("new"))
	require.NoError(t, err)
	require.True(t, first)
}
