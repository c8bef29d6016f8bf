package dedupe

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// faultFS is a file system on fs whose writes (creates, writes, syncs,
// renames) fail with the error in write while it is set.
func faultFS(fs vfs.FS, write *atomic.Pointer[error]) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpLock || op.Kind == errorfs.OpFileClose {
			return nil
		}
		if e := write.Load(); e != nil && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return *e
		}
		return nil
	}))
}

func errp(err error) *error { return &err }

// TestApplyWriteFault: once a write of the store's files failed, Apply
// (a processor's per-transaction write) returns an error naming the
// directory and the failed write, and so do later writes, without
// reaching Pebble; Close returns; reopened on a healthy disk, the store
// holds the batches applied before the fault with their checkpoint, and
// nothing after it that its checkpoint does not cover.
func TestApplyWriteFault(t *testing.T) {
	mem := vfs.NewMem()
	clock := newFakeClock()
	var write atomic.Pointer[error]
	s := mustOpen(t, "db", testOptions(faultFS(mem, &write), clock))
	id := func(i int) []byte { return fmt.Appendf(nil, "ev-%03d", i) }
	applyOne := func(i int) error {
		var b Batch
		b.Mark(id(i), clock.Now())
		b.SetMeta([]byte("cp"), []byte{byte(i + 1)})
		return s.Apply(&b)
	}
	for i := range 5 {
		require.NoError(t, applyOne(i))
	}
	write.Store(errp(syscall.ENOSPC))
	var failed int
	for i := 5; i < 10; i++ {
		if err := applyOne(i); err != nil {
			failed++
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.Contains(t, err.Error(), `writing to "db"`)
			// The failed file operation, a write or the log's sync
			// (whichever the disk failed first), with its path.
			require.Regexp(t, `(write|sync) db/`, err.Error())
		} else {
			require.Zero(t, failed, "an Apply after a failed one")
		}
	}
	require.GreaterOrEqual(t, failed, 4, "the write that failed stops the next Apply")
	err := s.Mark(id(99))
	require.ErrorIs(t, err, syscall.ENOSPC, "plain writes stop too")
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs after a failed write")
	}

	write.Store(nil)
	s = mustOpen(t, "db", testOptions(mem, clock))
	defer s.Close()
	cp, ok, err := s.Meta([]byte("cp"))
	require.NoError(t, err)
	require.True(t, ok)
	n := int(cp[0])
	require.GreaterOrEqual(t, n, 4, "each Apply waits for the sync of the one before")
	for i := range 10 {
		seen, err := s.Seen(id(i))
		require.NoError(t, err)
		require.Equal(t, i < n, seen, "mark %d against checkpoint %d", i, n)
	}
}

// TestOpenReadOnlyIsNotCorrupt: a store on a disk that refuses writes
// fails to open with the disk's error, not ErrCorrupt (which would have
// the operator delete its marks).
func TestOpenReadOnlyIsNotCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	clock := newFakeClock()
	var write atomic.Pointer[error]
	s := mustOpen(t, "db", testOptions(mem, clock))
	require.NoError(t, s.Mark([]byte("ev")))
	require.NoError(t, s.Close())
	write.Store(errp(syscall.EROFS))
	_, err := Open("db", testOptions(faultFS(mem, &write), clock))
	require.ErrorIs(t, err, syscall.EROFS)
	require.NotErrorIs(t, err, ErrCorrupt)
	require.True(t, strings.Contains(err.Error(), `"db"`), err.Error())
}
