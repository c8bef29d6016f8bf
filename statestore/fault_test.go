package statestore

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// faultFS is a file system on fs whose writes (creates, writes, syncs,
// renames) fail with the error in write, and reads of table files with
// the one in read, while set.
func faultFS(fs vfs.FS, write, read *atomic.Pointer[error]) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpLock, errorfs.OpFileClose:
			return nil
		case errorfs.OpFileRead, errorfs.OpFileReadAt:
			if e := read.Load(); e != nil && fs.PathBase(op.Path) != "" && len(op.Path) > 4 && op.Path[len(op.Path)-4:] == ".sst" {
				return *e
			}
			return nil
		}
		if e := write.Load(); e != nil && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return *e
		}
		return nil
	}))
}

func errp(err error) *error { return &err }

// TestWriteFaultStopsWrites: once a write of the store's files failed,
// commits return an error naming the directory and the failed write, and
// none reaches Pebble (which cannot go on after a failed log write); Close
// returns; and the store, reopened on a healthy disk, holds a prefix of
// the batches with their checkpoint: behind, never ahead.
func TestWriteFaultStopsWrites(t *testing.T) {
	mem := vfs.NewMem()
	var write, read atomic.Pointer[error]
	s, err := Open("db", &Options{FS: faultFS(mem, &write, &read)})
	require.NoError(t, err)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	for i := range 5 {
		apply(t, s, p0, int64(i+1), Write{Key: key(i), Value: []byte("v")})
	}
	write.Store(errp(syscall.ENOSPC))
	var failed int
	for i := 5; i < 10; i++ {
		b := s.NewBatch()
		b.Write(p0, Write{Key: key(i), Value: []byte("v")})
		b.SetCheckpoint(p0, Checkpoint{TopicID: [16]byte{1}, Next: int64(i + 1)})
		if err := b.Commit(); err != nil {
			failed++
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.Contains(t, err.Error(), "writing a batch to db")
			// The failed file operation, a write or the log's sync
			// (whichever the disk failed first), with its path.
			require.Regexp(t, `(write|sync) db/`, err.Error())
		} else {
			require.Zero(t, failed, "a commit after a failed one")
		}
	}
	require.GreaterOrEqual(t, failed, 4, "the write that failed stops the next commit")
	require.Error(t, s.Close())

	write.Store(nil)
	s, err = Open("db", &Options{FS: mem})
	require.NoError(t, err)
	defer s.Close()
	c, ok, err := s.Checkpoint(p0)
	require.NoError(t, err)
	require.True(t, ok)
	// Each commit waits for the sync of the one before: the first four
	// were synced before the fault.
	require.GreaterOrEqual(t, c.Next, int64(4))
	for i := range 10 {
		_, ok, err := s.Get(p0, key(i))
		require.NoError(t, err)
		require.Equal(t, int64(i) < c.Next, ok, "key %d against checkpoint %d", i, c.Next)
	}
}

// TestOpenReadOnlyIsNotCorrupt: a store on a disk that refuses writes
// fails to open with the disk's error and its directory, not ErrCorrupt
// (which tells the operator to delete it).
func TestOpenReadOnlyIsNotCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	var write, read atomic.Pointer[error]
	s, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	apply(t, s, p0, 1, Write{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, s.Close())
	write.Store(errp(syscall.EROFS))
	_, err = Open("db", &Options{FS: faultFS(mem, &write, &read)})
	require.ErrorIs(t, err, syscall.EROFS)
	require.NotErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "opening db")
}

// TestReadFaultNamed: a failed read of the store's files is an error
// naming the directory and the read, never a missing key or a short scan.
func TestReadFaultNamed(t *testing.T) {
	mem := vfs.NewMem()
	var write, read atomic.Pointer[error]
	s, err := Open("db", &Options{FS: mem})
	require.NoError(t, err)
	apply(t, s, p0, 1, Write{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, s.Close())
	db, err := pebble.Open("db", &pebble.Options{FS: mem, Logger: pebbleLogger{l: discard{}}})
	require.NoError(t, err)
	require.NoError(t, db.Flush()) // the data in a table file
	require.NoError(t, db.Close())

	s, err = Open("db", &Options{FS: faultFS(mem, &write, &read), CacheSize: 1})
	require.NoError(t, err)
	defer s.Close()
	read.Store(errp(syscall.EIO))
	_, ok, err := s.Get(p0, []byte("k"))
	require.ErrorIs(t, err, syscall.EIO)
	require.False(t, ok)
	require.Contains(t, err.Error(), "reading db")
	err = s.Scan(p0, nil, func(k, v []byte) bool { return true })
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, err.Error(), "scanning db")
	read.Store(nil)
	v, ok, err := s.Get(p0, []byte("k"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v", string(v))
}

type discard struct{}

func (discard) Error(string, ...any) {}
