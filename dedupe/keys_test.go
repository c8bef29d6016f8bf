package dedupe

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSplitInvariants checks the properties pebble requires of Split
// against bytes.Compare on random keys of every kind.
func TestSplitInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randID := func() []byte {
		id := make([]byte, 1+rng.IntN(300))
		for i := range id {
			id[i] = byte(rng.IntN(4)) // small alphabet: many shared prefixes
		}
		return id
	}
	var keys [][]byte
	for range 2000 {
		id, b := randID(), rng.Uint64N(1<<40)
		keys = append(keys, appendIndexKey(nil, id, b), appendIndexPrefix(nil, id),
			appendLogKey(nil, b, rng.Uint64()))
	}
	keys = append(keys, formatKey, logBound(0), logBound(7))
	for _, k := range keys {
		p := split(k)
		require.LessOrEqual(t, p, len(k))
		require.Equal(t, p, split(k[:p]), "Split(prefix) == len(prefix)")
		if p < len(k) {
			require.Negative(t, bytes.Compare(k[:p], k), "prefix sorts first")
		}
	}
	for range 20000 {
		a, b := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
		pa, pb := a[:split(a)], b[:split(b)]
		c := bytes.Compare(a, b)
		if pc := bytes.Compare(pa, pb); pc != 0 {
			require.Equal(t, pc, c, "prefixes order keys: %x %x", a, b)
		} else {
			require.Equal(t, bytes.Compare(a[len(pa):], b[len(pb):]), c, "suffixes break ties")
		}
	}
}

func TestIndexNewestFirst(t *testing.T) {
	id := []byte("event")
	older, newer := appendIndexKey(nil, id, 5), appendIndexKey(nil, id, 6)
	require.Negative(t, bytes.Compare(newer, older))
	p := appendIndexPrefix(nil, id)
	b, ok := indexBucket(newer, len(p))
	require.True(t, ok)
	require.EqualValues(t, 6, b)
	gotB, ok := decodeLogKey(appendLogKey(nil, 9, 1))
	require.True(t, ok)
	require.EqualValues(t, 9, gotB)
	require.Negative(t, bytes.Compare(appendLogKey(nil, 8, 1<<60), logBound(9)))
	require.Negative(t, bytes.Compare(logBound(9), appendLogKey(nil, 9, 0)))

	var got [][]byte
	v := appendLogID(appendLogID(nil, []byte("a")), id)
	require.True(t, decodeLogValue(v, func(id []byte) { got = append(got, id) }))
	require.Equal(t, [][]byte{[]byte("a"), id}, got)
	require.False(t, decodeLogValue(v[:len(v)-1], func([]byte) {}))
}

func TestWindow(t *testing.T) {
	w := window{ttl: 10 * time.Hour, width: time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	b := w.bucket(t0)
	// Live for at least TTL and at most TTL+width after the mark.
	require.GreaterOrEqual(t, b, w.minLive(t0.Add(10*time.Hour-1)))
	require.Less(t, b, w.minLive(t0.Add(11*time.Hour)))
	require.EqualValues(t, 0, w.bucket(time.Unix(-5, 0)))
}
