package processor

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		base int64
		done []offsetmeta.Range
	}{
		{0, nil},
		{1 << 40, nil},
		{100, []offsetmeta.Range{{Start: 101, End: 105}, {Start: 200, End: 201}}},
	} {
		base, done, err := decodePosition(encodePosition(tc.base, tc.done))
		require.NoError(t, err)
		require.Equal(t, tc.base, base)
		require.Equal(t, tc.done, done)
	}
	for _, bad := range [][]byte{nil, {1}, {2, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0x80, 0, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0, 5, 7}} {
		_, _, err := decodePosition(bad)
		require.ErrorIs(t, err, ErrCorruptMetadata, "%x", bad)
	}
}

func TestMergeRanges(t *testing.T) {
	r := func(s, e int64) offsetmeta.Range { return offsetmeta.Range{Start: s, End: e} }
	require.Empty(t, mergeRanges(nil, nil, 0))
	require.Equal(t, []offsetmeta.Range{r(5, 9)}, mergeRanges([]offsetmeta.Range{r(5, 7)}, []offsetmeta.Range{r(7, 9)}, 0), "adjacent ranges coalesce")
	require.Equal(t, []offsetmeta.Range{r(10, 12), r(20, 30)},
		mergeRanges([]offsetmeta.Range{r(2, 4), r(8, 12)}, []offsetmeta.Range{r(20, 25), r(22, 30)}, 10), "clipped at from")
}

// FuzzDecodePosition: whatever decodes re-encodes to the same position;
// everything else is ErrCorruptMetadata.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition(0, nil))
	f.Add(encodePosition(7, []offsetmeta.Range{{Start: 9, End: 12}}))
	f.Add([]byte("not a position"))
	f.Fuzz(func(t *testing.T, v []byte) {
		base, done, err := decodePosition(v)
		if err != nil {
			require.True(t, errors.Is(err, ErrCorruptMetadata), "%v", err)
			return
		}
		require.GreaterOrEqual(t, base, int64(0))
		b2, d2, err := decodePosition(encodePosition(base, done))
		require.NoError(t, err)
		require.Equal(t, base, b2)
		require.Equal(t, done, d2)
	})
}
