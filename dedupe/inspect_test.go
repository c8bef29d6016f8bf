package dedupe

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// viewCounts counts a view's indexed and unindexed marks and its metadata.
func viewCounts(t *testing.T, v *View) (indexed, unindexed int, meta map[string]string) {
	t.Helper()
	require.NoError(t, v.Marks(func([]byte, time.Time) error { indexed++; return nil }))
	require.NoError(t, v.Unindexed(func([]byte, time.Time) error { unindexed++; return nil }))
	meta = map[string]string{}
	require.NoError(t, v.Metas(func(k, val []byte) error { meta[string(k)] = string(val); return nil }))
	return indexed, unindexed, meta
}

// TestView: a view of a closed store sees its marks, the bucket they were
// made in and its metadata, and sees a crashed store's marks that are only
// in the expiry log; opening it writes nothing (a later Open finds the
// same run counter); an empty directory is no store and stays empty.
func TestView(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	o := testOptions(fs, clock)
	o.Sync = true
	s := mustOpen(t, "db", o)
	require.NoError(t, s.Mark([]byte("a"), []byte("b")))
	var b Batch
	b.Mark([]byte("c"), clock.Now())
	b.SetMeta([]byte("cp"), []byte("42"))
	require.NoError(t, s.Apply(&b))
	require.NoError(t, s.Close())

	v, err := OpenView("db", o)
	require.NoError(t, err)
	indexed, unindexed, meta := viewCounts(t, v)
	require.Equal(t, 3, indexed)
	require.Zero(t, unindexed)
	require.Equal(t, map[string]string{"cp": "42"}, meta)
	require.Equal(t, "onceflow-dedupe/2", v.Format())
	require.Equal(t, uint64(1), v.Opens())
	var at time.Time
	require.NoError(t, v.Marks(func(_ []byte, m time.Time) error { at = m; return nil }))
	require.False(t, at.After(clock.Now()))
	require.True(t, v.LiveFrom(clock.Now()).Before(at) || v.LiveFrom(clock.Now()).Equal(at))
	require.True(t, v.LiveFrom(clock.Now().Add(o.TTL+2*o.BucketWidth)).After(at), "the marks expire after the TTL")
	require.NoError(t, v.Close())

	// Marks of a crashed store are in the log only until the next Open.
	s = mustOpen(t, "db", o)
	require.NoError(t, s.Mark([]byte("d"), []byte("e")))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, s.Close())
	v, err = OpenView("db", testOptions(crashed, clock))
	require.NoError(t, err)
	indexed, unindexed, _ = viewCounts(t, v)
	require.Equal(t, 3, indexed)
	require.Equal(t, 2, unindexed)
	require.Equal(t, uint64(2), v.Opens())
	require.NoError(t, v.Close())
	r, err := Open("db", testOptions(crashed, clock))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	v, err = OpenView("db", testOptions(crashed, clock))
	require.NoError(t, err)
	require.Equal(t, uint64(3), v.Opens(), "OpenView bumped the run counter")
	indexed, unindexed, _ = viewCounts(t, v)
	require.Equal(t, 5, indexed)
	require.Zero(t, unindexed)
	require.NoError(t, v.Close())

	_, err = OpenView("missing", o)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, fs.MkdirAll("empty", 0o755))
	_, err = OpenView("empty", o)
	require.ErrorIs(t, err, os.ErrNotExist)
	names, _ := fs.List("empty")
	require.Empty(t, names)
}

// TestViewInUse: an open store is refused as in use, not corrupt.
func TestViewInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: discard()})
	require.NoError(t, err)
	defer s.Close()
	_, err = OpenView(dir, nil)
	require.ErrorIs(t, err, ErrInUse, fmt.Sprint(err))
	require.False(t, errors.Is(err, ErrCorrupt))
}
