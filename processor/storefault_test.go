package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
	"github.com/onceflow/onceflow/statestore"
)

// The storage faults of issue 45 (item 6): a state or dedupe directory
// whose disk fills up, turns read-only or fails reads. Run must stop with
// an error naming the directory and the operation, commit nothing that
// a failed store operation decided, and a restart on a healthy disk must
// restore and go on with nothing lost or doubled.

// diskFaults injects errors into the file operations under dir, on the
// operating system's file system: writes (creates, writes, syncs,
// renames) fail with write, reads of table files with read, while set.
type diskFaults struct {
	dir         string
	write, read atomic.Pointer[error]
}

func (d *diskFaults) fs() vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasPrefix(op.Path, d.dir) {
			return nil
		}
		switch op.Kind {
		case errorfs.OpLock, errorfs.OpFileClose: // a full or read-only disk still locks and closes
			return nil
		case errorfs.OpFileRead, errorfs.OpFileReadAt:
			if e := d.read.Load(); e != nil && strings.HasSuffix(op.Path, ".sst") {
				return *e
			}
			return nil
		}
		if e := d.write.Load(); e != nil && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return *e
		}
		return nil
	}))
}

func (d *diskFaults) failWrites(err error) { d.write.Store(&err) }
func (d *diskFaults) failReads(err error)  { d.read.Store(&err) }

// storeJob is a job with session state and deduplication: counterHandler
// (which dead-letters a record that sees its session's count out of step,
// so a lost or doubled state write or a duplicate let through shows) over
// inputs whose every tenth event is sent twice.
func (pl *pipeline) storeJob(stateDir, dedupeDir string, stateFS, dedupeFS vfs.FS, h processor.Handler) []processor.Opt {
	return pl.storeJobWith(stateDir, dedupeDir, &statestore.Options{FS: stateFS}, dedupeFS, h)
}

func (pl *pipeline) storeJobWith(stateDir, dedupeDir string, stateOpts *statestore.Options, dedupeFS vfs.FS, h processor.Handler) []processor.Opt {
	return append(pl.opts("i1", h), fastRetry(),
		processor.WithStateStore(stateDir, stateOpts),
		processor.WithDedupe(dedupeDir, &dedupe.Options{FS: dedupeFS}))
}

// finishStores runs a healthy instance on the directories over the rest
// of the input and checks exactly-once, the sessions' counts in the
// changelog and in the store, and that no record was dead-lettered.
func (pl *pipeline) finishStores(t *testing.T, stateDir, dedupeDir string) {
	t.Helper()
	b := start(t, pl.storeJob(stateDir, dedupeDir, nil, nil, counterHandler(0))...)
	pl.waitDone(t, 60*time.Second)
	require.NoError(t, b.stop(t))
	rep := pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, pl.inputs, rep.Outputs)
	require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
	pl.checkCounts(t, pl.finalCounts(t))
	pl.checkCounts(t, storeCounts(t, stateDir, pl, 2))
}

// requireStoreError checks Run's error for a store fault: ErrStore, the
// directory and the operation named.
func requireStoreError(t *testing.T, err error, dir, op string) {
	t.Helper()
	require.ErrorIs(t, err, processor.ErrStore)
	require.Contains(t, err.Error(), dir)
	require.Contains(t, err.Error(), op)
}

// TestStoreFaultOnWrite: the disk of the state or the dedupe store fills
// up while the job runs. Run stops with an error that names the
// directory; a restart on the same directory, the disk healthy again,
// finishes the input exactly once with every session's count right.
func TestStoreFaultOnWrite(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		for _, which := range []string{"state", "dedupe"} {
			t.Run(which, func(t *testing.T) {
				pl := newPipeline(t, c, 2, 4000, 100)
				stateDir, dedupeDir := t.TempDir(), t.TempDir()
				faults := &diskFaults{dir: stateDir}
				stateFS, dedupeFS := faults.fs(), vfs.FS(nil)
				if which == "dedupe" {
					faults.dir = dedupeDir
					stateFS, dedupeFS = nil, faults.fs()
				}
				ids, _ := span(0, 1000, 10)
				pl.produceEvents(t, ids...)
				a := start(t, pl.storeJob(stateDir, dedupeDir, stateFS, dedupeFS, counterHandler(0))...)
				pl.waitOutputs(t, 1000, 30*time.Second)
				faults.failWrites(syscall.ENOSPC)
				// One record per transaction from here: a transaction
				// whose store batch Pebble can take without rotating
				// its log (see docs/reliability.md for the rotation).
				// Its apply writes the batch, whose log write fails in
				// the background; the next apply must then stop Run.
				next := 1000
				for ; next < 1010; next++ {
					pl.produceEvents(t, next)
					select {
					case <-a.done:
					case <-time.After(2 * time.Second):
						continue
					}
					break
				}
				err := a.wait(t, 30*time.Second)
				t.Logf("Run after %d records on the failed disk: %v", next-1000+1, err)
				requireStoreError(t, err, faults.dir, "write")
				require.ErrorIs(t, err, syscall.ENOSPC)
				ids, _ = span(next+1, pl.inputs, 10)
				pl.produceEvents(t, ids...)
				pl.finishStores(t, stateDir, dedupeDir)
			})
		}
	})
}

// TestStoreFaultReadOnlyAtOpen: the stores' disk is read-only when Run
// starts. Run stops at once with an error naming the directory and the
// open, and does not call the store corrupt (which would tell the
// operator to delete it).
func TestStoreFaultReadOnlyAtOpen(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		for _, which := range []string{"state", "dedupe"} {
			t.Run(which, func(t *testing.T) {
				pl := newPipeline(t, c, 2, 100, 10)
				stateDir, dedupeDir := t.TempDir(), t.TempDir()
				s, err := statestore.Open(stateDir, nil) // existing stores
				require.NoError(t, err)
				require.NoError(t, s.Close())
				m, err := dedupe.Open(dedupeDir, nil)
				require.NoError(t, err)
				require.NoError(t, m.Close())
				faults := &diskFaults{dir: stateDir}
				stateFS, dedupeFS := faults.fs(), vfs.FS(nil)
				if which == "dedupe" {
					faults.dir = dedupeDir
					stateFS, dedupeFS = nil, faults.fs()
				}
				faults.failWrites(syscall.EROFS)
				a := start(t, pl.storeJob(stateDir, dedupeDir, stateFS, dedupeFS, counterHandler(0))...)
				err = a.wait(t, 30*time.Second)
				t.Logf("Run: %v", err)
				requireStoreError(t, err, faults.dir, "open")
				require.ErrorIs(t, err, syscall.EROFS)
				require.NotErrorIs(t, err, statestore.ErrCorrupt)
				require.NotErrorIs(t, err, dedupe.ErrCorrupt)
			})
		}
	})
}

// TestStoreFaultOnRead: reads of the state store's files fail while a
// handler reads its session's count, and the handler (carelessly) takes
// the failed Get for a missing key. The record must not commit as if the
// key were absent: Run stops with the read's error, and a restart on a
// healthy disk finishes exactly once with every count right.
func TestStoreFaultOnRead(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 100)
		stateDir, dedupeDir := t.TempDir(), t.TempDir()
		pl.produceEvents(t, seq(0, 1000)...)
		a := start(t, pl.storeJob(stateDir, dedupeDir, nil, nil, counterHandler(0))...)
		pl.waitOutputs(t, 1000, 30*time.Second)
		require.NoError(t, a.stop(t))
		flushStore(t, stateDir) // the counts now live in table files only

		faults := &diskFaults{dir: stateDir}
		var armed atomic.Bool
		careless := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if !armed.Swap(true) {
				faults.failReads(syscall.EIO)
			}
			p, err := verify.Decode(r.Value)
			if err != nil {
				return processor.Permanent(err)
			}
			st := processor.StateFrom(ctx)
			key := append(append([]byte{}, r.Key...), "/count"...)
			v, ok, _ := st.Get(key) // an error taken for "not found"
			var n uint64
			if ok {
				n = binary.BigEndian.Uint64(v)
			}
			if n != p.Seq {
				return processor.Permanent(fmt.Errorf("state out of step: session %s count %d, record seq %d", r.Key, n, p.Seq))
			}
			st.Set(key, binary.BigEndian.AppendUint64(nil, n+1))
			out.Emit(&kgo.Record{Value: r.Value})
			return nil
		}
		pl.produceEvents(t, seq(1000, pl.inputs)...)
		// A cache of one byte: every Get reads the files.
		b := start(t, pl.storeJobWith(stateDir, dedupeDir, &statestore.Options{FS: faults.fs(), CacheSize: 1}, nil, careless)...)
		err := b.wait(t, 60*time.Second)
		t.Logf("Run: %v", err)
		requireStoreError(t, err, stateDir, "read")
		require.ErrorIs(t, err, syscall.EIO)
		pl.finishStores(t, stateDir, dedupeDir)
	})
}

// seq is from, from+1, ..., to-1.
func seq(from, to int) []int {
	ids := make([]int, 0, to-from)
	for id := from; id < to; id++ {
		ids = append(ids, id)
	}
	return ids
}

// flushStore moves a stopped state store's data from its log into table
// files, so that reading it reads the files.
func flushStore(t *testing.T, dir string) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{t}})
	require.NoError(t, err)
	require.NoError(t, db.Flush())
	require.NoError(t, db.Close())
}

// quietLogger keeps Pebble's recovery messages out of the test's output.
type quietLogger struct{ t *testing.T }

func (quietLogger) Infof(string, ...any)           {}
func (l quietLogger) Errorf(f string, args ...any) { l.t.Logf(f, args...) }
func (l quietLogger) Fatalf(f string, args ...any) { l.t.Fatalf(f, args...) }
