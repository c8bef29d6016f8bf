package dedupe

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestCrashKeepsSyncedMarks simulates crashes at many points: with Sync,
// every mark whose call returned must survive, whatever share of unsynced
// data the crash happens to keep.
func TestCrashKeepsSyncedMarks(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	o := testOptions(fs, clock)
	o.Sync = true
	s := mustOpen(t, "db", o)
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 7))

	var acked [][]byte
	for round := range 30 {
		// Mix single claims and batches; enough data to force flushes and
		// compactions of the 1 MiB memtable.
		for i := range 40 {
			id := fmt.Appendf(nil, "r%d-c%d-%s", round, i, strings.Repeat("p", 100))
			first, err := s.Claim(id)
			require.NoError(t, err)
			require.True(t, first)
			acked = append(acked, id)
		}
		var batch [][]byte
		for i := range 200 {
			batch = append(batch, fmt.Appendf(nil, "r%d-b%d-%s", round, i, strings.Repeat("p", 100)))
		}
		require.NoError(t, s.Mark(batch...))
		acked = append(acked, batch...)

		crashed := fs.CrashClone(vfs.CrashCloneCfg{
			UnsyncedDataPercent: rng.IntN(101),
			RNG:                 rand.New(rand.NewPCG(uint64(round), 1)),
		})
		r, err := Open("db", testOptions(crashed, clock))
		require.NoError(t, err, "round %d", round)
		got, err := r.SeenBatch(acked)
		require.NoError(t, err)
		for i, ok := range got {
			require.True(t, ok, "round %d: acknowledged mark %q lost", round, acked[i])
		}
		require.NoError(t, r.Close())
	}
}

// corruptCase damages a closed store on fs.
type corruptCase struct {
	name    string
	damage  func(t *testing.T, fs vfs.FS)
	wantErr error
}

func TestCorruptStoreFailsOpen(t *testing.T) {
	cases := []corruptCase{
		{"manifest removed", removeFiles("MANIFEST-"), ErrCorrupt},
		{"all metadata removed", removeFiles("MANIFEST-", "marker.", "OPTIONS-"), ErrCorrupt},
		{"sstable removed", removeFiles(".sst"), ErrCorrupt},
		{"sstable truncated", truncateFiles(".sst"), ErrCorrupt},
		{"marker deleted", deleteMarker, ErrCorrupt},
		{"unknown format version", func(t *testing.T, fs vfs.FS) {
			withRawDB(t, fs, func(db *pebble.DB) {
				require.NoError(t, db.Set(formatKey, []byte("onceflow-dedupe/99"), pebble.Sync))
			})
		}, ErrIncompatible},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			o := testOptions(fs, newFakeClock())
			s := mustOpen(t, "db", o)
			var ids [][]byte
			for i := range 5000 {
				ids = append(ids, fmt.Appendf(nil, "event-%d", i))
			}
			require.NoError(t, s.Mark(ids...))
			require.NoError(t, s.db.Flush())
			require.NoError(t, s.Close())
			c.damage(t, fs)
			_, err := Open("db", o)
			require.ErrorIs(t, err, c.wantErr)
			t.Log(err)
		})
	}
}

func TestForeignPebbleDirIsRejected(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{discard()}})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("k"), []byte("v"), pebble.Sync))
	require.NoError(t, db.Close())
	_, err = Open("db", testOptions(fs, newFakeClock()))
	require.ErrorIs(t, err, ErrCorrupt, "a pebble database that is not a dedupe store must not open")
}

// TestTornCreateIsFinished covers a crash after pebble created the
// database but before the marker was synced: no keys, nothing to lose.
func TestTornCreateIsFinished(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs, newFakeClock())
	po := pebbleOptions(o.EnsureDefaults())
	db, err := pebble.Open("db", po)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	s, err := Open("db", o)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open("db", o) // and the marker is now there
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestDoubleOpenIsNotCorruption(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs, newFakeClock())
	s := mustOpen(t, "db", o)
	defer s.Close()
	_, err := Open("db", o)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrCorrupt)
}

func TestNewDirInsideMissingParent(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("a/b", 0o755))
	s := mustOpen(t, "a/b/db", testOptions(fs, newFakeClock()))
	require.NoError(t, s.Close())
}

func removeFiles(substrs ...string) func(*testing.T, vfs.FS) {
	return func(t *testing.T, fs vfs.FS) {
		n := 0
		for _, name := range matching(t, fs, substrs...) {
			require.NoError(t, fs.Remove(fs.PathJoin("db", name)))
			n++
		}
		require.Positive(t, n)
	}
}

func truncateFiles(substr string) func(*testing.T, vfs.FS) {
	return func(t *testing.T, fs vfs.FS) {
		rewriteFiles(t, fs, substr, func(b []byte) []byte { return b[:len(b)/2] })
	}
}

// rewriteFiles replaces the contents of matching files with edit(contents).
func rewriteFiles(t *testing.T, fs vfs.FS, substr string, edit func([]byte) []byte) {
	names := matching(t, fs, substr)
	require.NotEmpty(t, names)
	for _, name := range names {
		path := fs.PathJoin("db", name)
		f, err := fs.Open(path)
		require.NoError(t, err)
		data, err := io.ReadAll(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		data = edit(data)
		w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Sync())
		require.NoError(t, w.Close())
	}
}

// TestBitRotIsReported flips bytes inside sstable data blocks: pebble only
// finds this when the block is read, and the read must fail with ErrCorrupt
// rather than report IDs as unseen.
func TestBitRotIsReported(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs, newFakeClock())
	s := mustOpen(t, "db", o)
	var ids [][]byte
	for i := range 5000 {
		ids = append(ids, fmt.Appendf(nil, "event-%d", i))
	}
	require.NoError(t, s.Mark(ids...))
	require.NoError(t, s.db.Flush())
	require.NoError(t, s.Close())
	rewriteFiles(t, fs, ".sst", func(b []byte) []byte {
		for i := 100; i < len(b)/2; i += 512 {
			b[i] ^= 0xff
		}
		return b
	})
	s, err := Open("db", o)
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
		return
	}
	defer s.Close()
	_, err = s.SeenBatch(ids)
	require.ErrorIs(t, err, ErrCorrupt)
}

func matching(t *testing.T, fs vfs.FS, substrs ...string) []string {
	names, err := fs.List("db")
	require.NoError(t, err)
	var out []string
	for _, name := range names {
		for _, sub := range substrs {
			if strings.Contains(name, sub) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func deleteMarker(t *testing.T, fs vfs.FS) {
	withRawDB(t, fs, func(db *pebble.DB) {
		require.NoError(t, db.Delete(formatKey, pebble.Sync))
	})
}

func withRawDB(t *testing.T, fs vfs.FS, fn func(*pebble.DB)) {
	o := testOptions(fs, newFakeClock())
	db, err := pebble.Open("db", pebbleOptions(o.EnsureDefaults()))
	require.NoError(t, err)
	fn(db)
	require.NoError(t, db.Close())
}
