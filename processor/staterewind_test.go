package processor_test

import (
	"context"
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
		pl.seedChangelog(t, 3000)
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

// seedChangelog runs a stateful instance over inputs [0, n) in steps of
// 300, each step its own transactions, and stops it: a changelog of many
// transactions, restored in many batches.
func (pl *pipeline) seedChangelog(t *testing.T, n int) {
	t.Helper()
	x := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(t.TempDir(), nil))...)
	for i := 0; i < n; i += 300 {
		pl.produce(t, i, i+300)
		pl.waitOutputs(t, i+300, 60*time.Second)
	}
	require.NoError(t, x.stop(t))
}

// TestStateRevokedDuringRestore: a partition is revoked while its restore
// is stuck (a slow disk) and comes back while that restore is still
// stuck. The new restore must not run beside the old one: the old one,
// resuming later, would write older values and an older checkpoint over
// the newer state.
func TestStateRevokedDuringRestore(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 5000, 200)
		pl.seedChangelog(t, 3000)
		pl.produce(t, 3000, 3500)

		// The first restore batch of each partition of A holds until
		// released; later ones (a second restore) pass.
		release := make(chan struct{})
		var mu sync.Mutex
		calls := map[int32]int{}
		hold := func(partition int32, _ int) error {
			mu.Lock()
			calls[partition]++
			first := calls[partition] == 1
			mu.Unlock()
			if first {
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
			}
			return nil
		}
		held := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(calls)
		}
		dir := t.TempDir()
		a := start(t, append(pl.opts("i1", counterHandler(0)), processor.WithStateStore(dir, nil),
			processor.WithKgoOpts(kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512)),
			processor.WithRestoreApplyHook(hold))...)
		require.Eventually(t, func() bool { return held() == 2 }, 30*time.Second, 10*time.Millisecond)

		// B takes a partition and leaves; after its session timeout the
		// partition returns to A, whose first restore of it is still held.
		before := len(pl.c.ReadCommitted(t, pl.out))
		b := start(t, append(pl.opts("i2", counterHandler(0)), processor.WithStateStore(t.TempDir(), nil),
			processor.WithSessionTimeout(time.Second))...)
		pl.waitOutputs(t, before+1, 30*time.Second)
		require.NoError(t, b.stop(t))
		require.Eventually(t, func() bool { return pl.assigned(t, "i1") == 2 }, 30*time.Second, 50*time.Millisecond,
			"the partition must come back to A")
		// New input: the returned partition is restored again when its
		// records arrive. Give a second restore, if one wrongly ran beside
		// the held one, time to finish and its records time to commit.
		pl.produce(t, 3500, 4000)
		time.Sleep(time.Second)
		close(release)

		pl.produce(t, 4000, pl.inputs)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, a.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
		require.Equal(t, pl.changelogFold(t, 2), pl.storeFold(t, dir, 2))
		pl.checkCounts(t, pl.finalCounts(t))
		mu.Lock()
		t.Logf("restore batches per partition: %v", calls)
		mu.Unlock()
	})
}

// assigned counts the partitions the group gives the member with the
// instance ID (0 while the group is rebalancing).
func (pl *pipeline) assigned(t *testing.T, instance string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, members, err := pl.c.DescribeGroup(ctx, pl.group)
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range members {
		if m.InstanceID == instance {
			for _, ps := range m.Assigned {
				n += len(ps)
			}
		}
	}
	return n
}
