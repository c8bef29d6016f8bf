package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// regress runs the first owner of pl's group over inputs [0, 2n) in two
// halves, stops it, and then makes the group serve an older
// position, as a coordinator that lost its recent commits would (finding 7
// in docs/reliability.md): the offsets committed after the first half
// (how "commit"), or none (how "delete"). The next owner would redo, and
// re-emit, the second half (or everything) unless something remembers how far the first
// owner got.
func regress(t *testing.T, pl *pipeline, n int, how string, opts ...processor.Opt) {
	t.Helper()
	ctx := context.Background()
	a := start(t, append(pl.opts("i1", copyHandler), opts...)...)
	pl.produce(t, 0, n)
	pl.waitOutputs(t, n, 60*time.Second)
	stale, err := pl.c.Admin.FetchOffsets(ctx, pl.group)
	require.NoError(t, err)
	require.NoError(t, stale.Error())
	pl.produce(t, n, 2*n)
	pl.waitOutputs(t, 2*n, 60*time.Second)
	require.NoError(t, a.stop(t))

	// A static member stays in the group after it stops; an empty group
	// accepts offsets from outside.
	_, err = pl.c.Admin.LeaveGroup(ctx, kadm.LeaveGroup(pl.group).InstanceIDs("i1"))
	require.NoError(t, err)
	switch how {
	case "commit":
		resp, err := pl.c.Admin.CommitOffsets(ctx, pl.group, stale.Offsets())
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	case "delete":
		resp, err := pl.c.Admin.DeleteGroups(ctx, pl.group)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
}

// TestPositionGuard: after the group serves an older position than the
// last commit, or none, a processor with WithPositionGuard resumes where
// the commits left off: the outputs read back read_committed are exactly
// once, and the rest of the input is processed as usual. Without
// the guard the same regression re-emits the second third, which shows
// the scenario is real.
func TestPositionGuard(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		for _, how := range []string{"commit", "delete"} {
			t.Run(how, func(t *testing.T) {
				pl := newPipeline(t, c, 3, 3000, 100)
				regress(t, pl, 1000, how, processor.WithPositionGuard())
				b := start(t, append(pl.opts("i2", copyHandler), processor.WithPositionGuard())...)
				pl.produce(t, 2000, 3000)
				rep := pl.waitDone(t, 60*time.Second)
				require.NoError(t, b.stop(t))
				require.True(t, rep.ExactlyOnce(), rep.String())
				require.Equal(t, pl.inputs, rep.Outputs)
				require.Equal(t, int64(3), b.p.Stats().PositionRegressions, "each partition resumed from the log")
			})
		}
		t.Run("without the guard", func(t *testing.T) {
			pl := newPipeline(t, c, 3, 2000, 100)
			regress(t, pl, 1000, "commit")
			b := start(t, pl.opts("i2", copyHandler)...)
			pl.waitOutputs(t, 3000, 60*time.Second) // the 2,000 outputs of the first owner and 1,000 again
			require.NoError(t, b.stop(t))
			rep := pl.read(t)
			require.Equal(t, 1000, rep.Duplicates, rep.String())
			require.Zero(t, b.p.Stats().PositionRegressions)
		})
	})
}

// TestPositionGuardCorruptLog: a position record onceflow cannot decode
// stops Run with ErrCorruptMetadata instead of being skipped.
func TestPositionGuardCorruptLog(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 1, 10, 1)
		ctx := context.Background()
		topic := pl.group + "-" + pl.in + "-positions"
		compact := "compact"
		resp, err := c.Admin.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
		t.Cleanup(func() { _, _ = c.Admin.DeleteTopics(context.Background(), topic) })
		c.WaitTopic(t, topic, 1)
		cl := c.Client(t, kgo.DefaultProduceTopic(topic))
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte{0, 0, 0, 0}, Value: []byte("not a position")}).FirstErr())
		pl.produce(t, 0, pl.inputs)

		r := start(t, append(pl.opts("i1", copyHandler), processor.WithPositionGuard())...)
		require.ErrorIs(t, r.wait(t, 60*time.Second), processor.ErrCorruptMetadata)
		require.Zero(t, len(c.ReadCommitted(t, pl.out)), "nothing is processed from a position that cannot be read")
	})
}
