package dedupe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestMarkSeenClaim(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()

	seen, err := s.Seen([]byte("a"))
	require.NoError(t, err)
	require.False(t, seen)

	require.NoError(t, s.Mark([]byte("a"), []byte("b"), []byte("a")))
	for _, id := range []string{"a", "b"} {
		seen, err := s.Seen([]byte(id))
		require.NoError(t, err)
		require.True(t, seen, id)
	}

	first, err := s.Claim([]byte("a"))
	require.NoError(t, err)
	require.False(t, first)
	first, err = s.Claim([]byte("c"))
	require.NoError(t, err)
	require.True(t, first)
	first, err = s.Claim([]byte("c"))
	require.NoError(t, err)
	require.False(t, first)

	got, err := s.SeenBatch([][]byte{[]byte("c"), []byte("zz"), []byte("a"), []byte("zz")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false}, got)
}

func TestClaimBatchDuplicates(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	require.NoError(t, s.Mark([]byte("old")))
	ids := [][]byte{[]byte("x"), []byte("old"), []byte("y"), []byte("x"), []byte("y"), []byte("z")}
	first, err := s.ClaimBatch(ids)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false, false, true}, first)
	first, err = s.ClaimBatch(ids)
	require.NoError(t, err)
	require.Equal(t, make([]bool, len(ids)), first)
	// One index key per distinct ID, duplicates collapsed; one log entry
	// per write batch.
	require.Len(t, rawKeys(t, s, tagIndex), 4)
	require.Len(t, rawKeys(t, s, tagLog), 2)
}

func TestIDValidation(t *testing.T) {
	o := testOptions(vfs.NewMem(), newFakeClock())
	o.MaxIDLen = 8
	s := mustOpen(t, "db", o)
	defer s.Close()

	long := []byte("123456789")
	checks := map[string]error{}
	_, checks["Seen"] = s.Seen(long)
	checks["Mark"] = s.Mark([]byte("ok"), long)
	_, checks["Claim"] = s.Claim(long)
	_, checks["ClaimBatch"] = s.ClaimBatch([][]byte{[]byte("ok"), long})
	_, checks["SeenBatch"] = s.SeenBatch([][]byte{long})
	checks["Forget"] = s.Forget(long)
	checks["ApplyMarks"] = s.ApplyMarks([][]byte{long}, time.Now())
	for op, err := range checks {
		require.ErrorIs(t, err, ErrIDTooLong, op)
		var e *IDTooLongError
		require.True(t, errors.As(err, &e), op)
		require.Equal(t, IDTooLongError{Len: 9, Max: 8}, *e)
	}
	// Nothing of a rejected batch is written.
	seen, err := s.Seen([]byte("ok"))
	require.NoError(t, err)
	require.False(t, seen)

	_, err = s.Claim(nil)
	require.ErrorIs(t, err, ErrEmptyID)
	seen, err = s.Seen([]byte("12345678"))
	require.NoError(t, err)
	require.False(t, seen)
}

func TestIDsAreBinarySafe(t *testing.T) {
	// IDs that are prefixes of each other, contain zero bytes, or look like
	// other keys must stay distinct.
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	ids := [][]byte{
		[]byte("a"), []byte("ab"), {0}, {0, 0}, {0xff}, []byte("mformat"),
		[]byte("x\x00\x00\x00\x00\x00\x00\x00\x01a"), []byte(strings.Repeat("q", 200)),
	}
	for i, id := range ids {
		first, err := s.Claim(id)
		require.NoError(t, err)
		require.True(t, first, i)
		for j, other := range ids {
			seen, err := s.Seen(other)
			require.NoError(t, err)
			require.Equal(t, j <= i, seen, "after claiming %d, seen(%d)", i, j)
		}
	}
}

func TestForget(t *testing.T) {
	clock := newFakeClock()
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), clock))
	defer s.Close()
	require.NoError(t, s.Mark([]byte("a"), []byte("b")))
	clock.Advance(3 * time.Hour) // second mark in another bucket
	require.NoError(t, s.Mark([]byte("a")))
	require.NoError(t, s.Forget([]byte("a"), []byte("never")))
	got, err := s.SeenBatch([][]byte{[]byte("a"), []byte("b")})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, got)
	first, err := s.Claim([]byte("a"))
	require.NoError(t, err)
	require.True(t, first)
}

func TestApplyMarks(t *testing.T) {
	clock := newFakeClock()
	o := testOptions(vfs.NewMem(), clock)
	s := mustOpen(t, "db", o)
	defer s.Close()
	now := clock.Now()
	require.NoError(t, s.ApplyMarks([][]byte{[]byte("recent")}, now.Add(-time.Hour)))
	require.NoError(t, s.ApplyMarks([][]byte{[]byte("stale")}, now.Add(-o.TTL-2*o.BucketWidth)))
	// Replaying an older mark after a newer one must not shorten retention.
	require.NoError(t, s.ApplyMarks([][]byte{[]byte("both")}, now))
	require.NoError(t, s.ApplyMarks([][]byte{[]byte("both")}, now.Add(-9*time.Hour)))
	clock.Advance(5 * time.Hour)
	got, err := s.SeenBatch([][]byte{[]byte("recent"), []byte("stale"), []byte("both")})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, got)
	require.False(t, hasIndex(t, s, []byte("stale")), "expired marks are not written")
}

func TestClosed(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	require.NoError(t, s.Close())
	_, err := s.Seen([]byte("a"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Mark([]byte("a")), ErrClosed)
	_, err = s.Claim([]byte("a"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Close(), ErrClosed)
}

func TestReopenKeepsMarks(t *testing.T) {
	fs := vfs.NewMem()
	clock := newFakeClock()
	s := mustOpen(t, "db", testOptions(fs, clock))
	var ids [][]byte
	for i := range 1000 {
		ids = append(ids, fmt.Appendf(nil, "event-%d", i))
	}
	require.NoError(t, s.Mark(ids...))
	require.NoError(t, s.Close())
	s = mustOpen(t, "db", testOptions(fs, clock))
	defer s.Close()
	got, err := s.SeenBatch(ids)
	require.NoError(t, err)
	for i, ok := range got {
		require.True(t, ok, i)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := (&Options{}).EnsureDefaults()
	require.Equal(t, vfs.Default, o.FS)
	require.Equal(t, DefaultTTL, o.TTL)
	require.Equal(t, DefaultBucketWidth, o.BucketWidth)
	require.Equal(t, DefaultMaxIDLen, o.MaxIDLen)
	require.EqualValues(t, DefaultCacheSize, o.CacheSize)
	require.EqualValues(t, DefaultMemTableSize, o.MemTableSize)
	require.NotNil(t, o.Clock)
	require.NotNil(t, o.Logger)
	require.False(t, o.Sync)

	_, err := Open("db", &Options{FS: vfs.NewMem(), MaxIDLen: 1 << 20})
	require.Error(t, err)
}
