package processor_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
	"github.com/onceflow/onceflow/statestore"
)

// The crash tests of issue #5: crash at a point, restart on the same state
// directory, and check that the store equals the fold of the committed
// changelog and the output is still exactly-once. The crash before EndTxn
// is TestStateCrashRestore.

var errCrash = errors.New("test crash")

// kv is one partition's state: key -> value.
type kv map[string]string

// changelogFold folds the committed changelog: the last value per key and
// partition, a tombstone deleting.
func (pl *pipeline) changelogFold(t *testing.T, partitions int32) map[int32]kv {
	out := make(map[int32]kv)
	for p := int32(0); p < partitions; p++ {
		out[p] = kv{}
	}
	for _, r := range pl.c.ReadCommitted(t, pl.group+"-"+pl.in+"-changelog") {
		if r.Value == nil {
			delete(out[r.Partition], string(r.Key))
			continue
		}
		out[r.Partition][string(r.Key)] = string(r.Value)
	}
	return out
}

// storeFold reads every key of a stopped processor's store.
func (pl *pipeline) storeFold(t *testing.T, dir string, partitions int32) map[int32]kv {
	s, err := statestore.Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	out := make(map[int32]kv)
	for p := int32(0); p < partitions; p++ {
		out[p] = kv{}
		require.NoError(t, s.Scan(statestore.Partition{Topic: pl.in, Partition: p}, nil, func(k, v []byte) bool {
			out[p][string(k)] = string(v)
			return true
		}))
	}
	return out
}

// changelogRecords counts the committed records of the changelog.
func (pl *pipeline) changelogRecords(t *testing.T) int {
	return len(pl.c.ReadCommitted(t, pl.group+"-"+pl.in+"-changelog"))
}

// finish runs a replacement instance "i1" on dir over the rest of the
// input and checks the guarantees: exactly-once, in order, no session's
// state out of step, and the store equal to the committed changelog.
func (pl *pipeline) finish(t *testing.T, dir string, partitions int32, from int) *running {
	t.Helper()
	b := start(t, append(pl.opts("i1", counterHandler(10)), fastRetry(), processor.WithStateStore(dir, nil))...)
	pl.produce(t, from, pl.inputs)
	pl.waitDone(t, 60*time.Second)
	require.NoError(t, b.stop(t))
	rep := pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, pl.inputs, rep.Outputs)
	require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
	require.Equal(t, pl.changelogFold(t, partitions), pl.storeFold(t, dir, partitions),
		"the store must equal the fold of the committed changelog")
	pl.checkCounts(t, pl.finalCounts(t))
	return b
}

// TestStateCrashAfterEndTxn: the instance dies right after a transaction
// committed and before its state writes reached the store, so the store is
// behind the changelog. The replacement on the same directory must replay
// exactly the missing tail.
func TestStateCrashAfterEndTxn(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 4000, 200)
		pl.produce(t, 0, 1000)
		dir := t.TempDir()
		var cut kafkatest.Cutter
		var withWrites atomic.Int32
		var lost atomic.Int64
		first := make(chan struct{})
		hook := func(n int) error {
			if n == 0 {
				return nil
			}
			switch withWrites.Add(1) {
			case 1: // let one transaction with writes reach the store
				close(first)
				return nil
			default:
				lost.Store(int64(n))
				cut.Cut()
				return errCrash
			}
		}
		a := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(dir, nil),
			processor.WithKgoOpts(cut.Opt()), processor.WithAfterEndTxnHook(hook))...)
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Fatal("no transaction with state writes committed")
		}
		pl.produce(t, 1000, 2000) // more writes, so a second transaction has some
		require.ErrorIs(t, a.wait(t, 60*time.Second), errCrash)

		before := pl.storeFold(t, dir, 2)
		require.NotEqual(t, pl.changelogFold(t, 2), before, "the crash must leave the store behind the changelog")
		t.Logf("crashed with %d committed state writes not in the store", lost.Load())

		b := pl.finish(t, dir, 2, 2000)
		require.Equal(t, lost.Load(), b.p.Stats().StateRestored,
			"the restore must replay exactly the committed writes the store missed")
	})
}

// TestStateCrashDuringRestore: a fresh instance dies while rebuilding its
// store from a long changelog. The replacement on the same directory must
// resume from the checkpoint the interrupted restore left, not replay
// applied records again, and end with the changelog's state.
func TestStateCrashDuringRestore(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 6000, 300)
		a := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(t.TempDir(), nil))...)
		// The changelog is written by at least 8 transactions, so a
		// restore reads it in many record batches: Kafka returns at least
		// one whole batch per fetch whatever its max bytes, and one
		// transaction of all 4000 inputs (seen on a fast run) would let
		// each partition's restore finish in its first batch.
		for from := 0; from < 4000; from += 500 {
			pl.produce(t, from, from+500)
			pl.waitOutputs(t, from+500, 60*time.Second)
		}
		require.NoError(t, a.stop(t))
		total := pl.changelogRecords(t)

		dir := t.TempDir()
		var cut kafkatest.Cutter
		var mu sync.Mutex
		applied := 0
		hook := func(_ int32, n int) error {
			mu.Lock()
			defer mu.Unlock()
			applied += n
			if n == 0 {
				return nil
			}
			cut.Cut() // on the first batch: no partition's records ran yet
			return errCrash
		}
		// Small fetches: the restore applies the changelog in many batches.
		b := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(dir, nil),
			processor.WithKgoOpts(cut.Opt(), kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512)),
			processor.WithRestoreApplyHook(hook))...)
		pl.produce(t, 4000, 4100) // a partition is restored when its first record arrives
		// errCrash, or the other partition's restore failing on the cut
		// connections first: either way the instance died mid-restore.
		// Under KIP-848 franz-go can declare the cut-off member's
		// partitions lost (within a few heartbeats) before the loop takes
		// the failed restore, whose error then no longer matters: the
		// partition is not the instance's any more. Run then goes on,
		// cut off from the cluster for good, and is stopped here.
		if kafkatest.Consumer848() {
			select {
			case <-b.done:
				require.Error(t, b.err)
			case <-time.After(15 * time.Second):
				_ = b.stop(t)
			}
		} else {
			require.Error(t, b.wait(t, 60*time.Second))
		}
		mu.Lock()
		partial := applied
		mu.Unlock()
		require.Positive(t, partial)
		require.Less(t, partial, total, "the crash must interrupt the restore")
		require.Equal(t, total, pl.changelogRecords(t), "the crashed instance must have committed nothing")
		t.Logf("restore crashed after %d of %d changelog records", partial, total)

		r := pl.finish(t, dir, 2, 4100)
		require.Equal(t, int64(total-partial), r.p.Stats().StateRestored,
			"the restore must resume from the interrupted restore's checkpoint")
	})
}

// TestStateCheckpointMismatchRebuilds: a store whose checkpoints do not
// belong to the changelog (another topic ID; an offset past the log's end)
// is rebuilt from the changelog's start, keys it held dropped.
func TestStateCheckpointMismatchRebuilds(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 4000, 200)
		pl.produce(t, 0, 2000)
		dir := t.TempDir()
		a := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(dir, nil))...)
		pl.waitOutputs(t, 2000, 60*time.Second)
		require.NoError(t, a.stop(t))
		total := pl.changelogRecords(t)

		s, err := statestore.Open(dir, nil)
		require.NoError(t, err)
		b := s.NewBatch()
		p0, p1 := statestore.Partition{Topic: pl.in, Partition: 0}, statestore.Partition{Topic: pl.in, Partition: 1}
		cp1, ok, err := s.Checkpoint(p1)
		require.NoError(t, err)
		require.True(t, ok)
		b.SetCheckpoint(p0, statestore.Checkpoint{TopicID: [16]byte{0xde, 0xad}, Next: 1})
		b.SetCheckpoint(p1, statestore.Checkpoint{TopicID: cp1.TopicID, Next: cp1.Next + 1_000_000})
		for _, p := range []statestore.Partition{p0, p1} {
			b.Write(p, statestore.Write{Key: []byte("stale-key"), Value: []byte("from another life")})
		}
		require.NoError(t, b.Commit())
		require.NoError(t, s.Close())

		r := pl.finish(t, dir, 2, 2000)
		require.Equal(t, int64(total), r.p.Stats().StateRestored, "both partitions must be rebuilt from the start")
	})
}
