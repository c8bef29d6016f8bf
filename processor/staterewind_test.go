package processor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestStateAbortDuringRestore: a transaction aborts (its offset commit
// refused) while another partition's store is still being restored. The
// abort rewinds every partition; the one being restored must keep waiting
// for its restore, or its records would read a store that is behind.
func TestStateAbortDuringRestore(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		if c.Fake == nil {
			t.Skip("needs kfake fault injection")
		}
		pl := newPipeline(t, c, 2, 4000, 200)
		// In steps: a changelog of many transactions, restored in many
		// batches.
		x := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(t.TempDir(), nil))...)
		for i := 0; i < 3000; i += 300 {
			pl.produce(t, i, i+300)
			pl.waitOutputs(t, i+300, 60*time.Second)
		}
		require.NoError(t, x.stop(t))

		pl.produce(t, 3000, pl.inputs)
		// Partition 1's restore holds until partition 0, restored and
		// running, has had a transaction aborted, and for a few commit
		// intervals more.
		h := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError, Count: 1})
		var held sync.Once
		slow := func(partition int32, _ int) error {
			if partition != 1 {
				return nil
			}
			held.Do(func() {
				for deadline := time.Now().Add(10 * time.Second); h.Hits() < 1 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(500 * time.Millisecond)
			})
			return nil
		}
		dir := t.TempDir()
		a := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(dir, nil),
			processor.WithKgoOpts(kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512)),
			processor.WithRestoreApplyHook(slow))...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, a.stop(t))
		require.Equal(t, 1, h.Hits(), "a transaction must have aborted")
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
		require.Equal(t, pl.changelogFold(t, 2), pl.storeFold(t, dir, 2))
		pl.checkCounts(t, pl.finalCounts(t))
	})
}
