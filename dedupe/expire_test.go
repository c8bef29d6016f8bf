package dedupe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestExpiry(t *testing.T) {
	clock := newFakeClock()
	o := testOptions(vfs.NewMem(), clock)
	s := mustOpen(t, "db", o)
	defer s.Close()
	ctx := context.Background()

	require.NoError(t, s.Mark([]byte("a"), []byte("b")))
	clock.Advance(2 * time.Hour)
	require.NoError(t, s.Mark([]byte("c")))
	require.NoError(t, s.Mark([]byte("b"))) // re-mark extends retention

	// Just inside the TTL of a and b's first mark: nothing is forgotten.
	clock.Advance(o.TTL - 2*time.Hour - time.Nanosecond)
	st, err := s.ExpireNow(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Deleted)
	got, err := s.SeenBatch([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, got)

	// Past TTL+width of the first marks: a is gone, b survives via its
	// second mark, c is still inside its window.
	clock.Advance(o.BucketWidth + time.Nanosecond)
	got, err = s.SeenBatch([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, true}, got, "expired marks read as unseen before expiry runs")
	st, err = s.ExpireNow(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Deleted) // a and b's first index entries
	require.False(t, hasIndex(t, s, []byte("a")))
	require.True(t, hasIndex(t, s, []byte("b")))
	require.Len(t, rawKeys(t, s, tagIndex), 2)
	require.Len(t, rawKeys(t, s, tagLog), 2)

	// Everything expires eventually and leaves no keys behind.
	clock.Advance(o.TTL + o.BucketWidth)
	_, err = s.ExpireNow(ctx)
	require.NoError(t, err)
	require.Empty(t, rawKeys(t, s, tagIndex))
	require.Empty(t, rawKeys(t, s, tagLog))
	first, err := s.Claim([]byte("a"))
	require.NoError(t, err)
	require.True(t, first)
}

// TestAutoExpiry checks that a write after a bucket boundary triggers the
// background run.
func TestAutoExpiry(t *testing.T) {
	clock := newFakeClock()
	o := testOptions(vfs.NewMem(), clock)
	o.DisableAutoExpiry = false
	s := mustOpen(t, "db", o)
	defer s.Close()
	for i := range 100 {
		require.NoError(t, s.Mark(fmt.Appendf(nil, "old-%d", i)))
	}
	clock.Advance(o.TTL + o.BucketWidth)
	require.NoError(t, s.Mark([]byte("new")))
	require.Eventually(t, func() bool {
		return len(rawKeys(t, s, tagIndex)) == 1 && len(rawKeys(t, s, tagLog)) == 1
	}, 10*time.Second, time.Millisecond)
	seen, err := s.Seen([]byte("new"))
	require.NoError(t, err)
	require.True(t, seen)
}

// TestExpiryRacesWrites runs expiry while writers mark IDs at a bucket
// boundary; every mark inside the window must stay visible and every log
// entry must keep its index entry reachable for later expiry.
func TestExpiryRacesWrites(t *testing.T) {
	clock := newFakeClock()
	o := testOptions(vfs.NewMem(), clock)
	s := mustOpen(t, "db", o)
	defer s.Close()
	ctx := context.Background()
	done := make(chan struct{})
	var ids [][]byte
	var at []time.Time
	go func() {
		defer close(done)
		for i := range 4000 {
			id := fmt.Appendf(nil, "id-%d", i)
			ids = append(ids, id)
			at = append(at, clock.Now())
			if err := s.Mark(id); err != nil {
				panic(err)
			}
			if i%100 == 0 {
				clock.Advance(o.BucketWidth / 3) // 13h in all: early marks expire
			}
		}
	}()
	for {
		_, err := s.ExpireNow(ctx)
		require.NoError(t, err)
		select {
		case <-done:
			got, err := s.SeenBatch(ids)
			require.NoError(t, err)
			now, expired := clock.Now(), 0
			for i, ok := range got {
				if now.Sub(at[i]) < o.TTL {
					require.True(t, ok, "id %d forgotten inside window", i)
				} else if now.Sub(at[i]) >= o.TTL+o.BucketWidth {
					require.False(t, ok, "id %d outlived its window", i)
					expired++
				}
			}
			require.Positive(t, expired)
			clock.Advance(o.TTL + o.BucketWidth)
			_, err = s.ExpireNow(ctx)
			require.NoError(t, err)
			require.Empty(t, rawKeys(t, s, tagIndex), "no orphaned index keys")
			return
		default:
		}
	}
}
