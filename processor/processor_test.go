package processor_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

func TestExactlyOnceBasic(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		r := start(t, pl.opts("i1", copyHandler)...)
		rep := pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		t.Logf("%s stats=%+v", rep, r.p.Stats())
	})
}

// TestSessionsTransientFaults: random delays and 20% transient faults;
// every session's outputs stay in input order.
func TestSessionsTransientFaults(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 5000, 1000)
		pl.produce(t, 0, pl.inputs)
		flaky := func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
			if rand.IntN(100) < 20 {
				return errors.New("transient")
			}
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			return copyHandler(ctx, rec, out)
		}
		opts := append(pl.opts("i1", flaky), processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2, Jitter: 0.5, MaxElapsed: -1,
		}))
		r := start(t, opts...)
		pl.waitDone(t, 90*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, 0, rep.DLQ)
		require.Greater(t, r.p.Stats().Retries, int64(0))
	})
}
