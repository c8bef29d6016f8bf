package processor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// TestSlowSessionDoesNotBlockOthers: one session's first record keeps
// failing with a long backoff; every other session's outputs become visible
// while it is still failing, and its own later records wait behind it.
func TestSlowSessionDoesNotBlockOthers(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 1, 1000, 50)
		pl.produce(t, 0, pl.inputs)
		release := make(chan struct{})
		var slowFailures atomic.Int64
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if string(r.Key) == sessionKey(0, pl.sessions) {
				select {
				case <-release:
				default:
					slowFailures.Add(1)
					return context.DeadlineExceeded // transient: retried
				}
			}
			return copyHandler(ctx, r, out)
		}
		opts := append(pl.opts("i1", h), processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2, Jitter: -1, MaxElapsed: -1,
		}))
		r := start(t, opts...)
		others := pl.inputs - pl.inputs/pl.sessions
		start := time.Now()
		pl.waitOutputs(t, others, 60*time.Second)
		t.Logf("all %d records of the other sessions visible after %v, while session 0 failed %d times",
			others, time.Since(start).Round(time.Millisecond), slowFailures.Load())
		for _, o := range c.ReadCommitted(t, pl.out) {
			require.NotEqual(t, sessionKey(0, pl.sessions), string(o.Key), "the failing session must not have moved on")
		}
		close(release)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestOrderingModes: partition order and unordered are exactly-once too;
// partition order also keeps every session's order.
func TestOrderingModes(t *testing.T) {
	for name, o := range map[string]processor.Ordering{"partition": processor.OrderByPartition, "unordered": processor.Unordered} {
		t.Run(name, func(t *testing.T) {
			c := kafkatest.New(t)
			pl := newPipeline(t, c, 3, 3000, 100)
			pl.produce(t, 0, pl.inputs)
			r := start(t, append(pl.opts("i1", copyHandler), processor.WithOrdering(o))...)
			pl.waitDone(t, 60*time.Second)
			require.NoError(t, r.stop(t))
			rep := pl.read(t)
			require.Zero(t, rep.Duplicates+rep.Lost+rep.Malformed, rep.String())
			if o == processor.OrderByPartition {
				require.Zero(t, rep.OrderViolations, rep.String())
			}
		})
	}
}

// TestBackpressureTinyBounds: with buffers of a few records fetching pauses
// and resumes many times; nothing is lost or doubled.
func TestBackpressureTinyBounds(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 40)
		pl.produce(t, 0, pl.inputs)
		var inFlight, peak atomic.Int64
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(50 * time.Microsecond)
			return copyHandler(ctx, r, out)
		}
		r := start(t, append(pl.opts("i1", h), processor.WithMaxBuffered(4, 6), processor.WithCommitInterval(20*time.Millisecond))...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		// One poll may overshoot a partition's bound by what it fetched,
		// but never the total room it was given.
		require.LessOrEqual(t, peak.Load(), int64(6+2))
	})
}

// TestIdleEviction: 100,000 distinct sessions, one record each, leave a
// bounded number of goroutines, and none once they are idle.
func TestIdleEviction(t *testing.T) {
	c := kafkatest.New(t)
	const n = 100_000
	pl := newPipeline(t, c, 2, n, n)
	pl.produce(t, 0, n)
	base := runtime.NumGoroutine()
	r := start(t, append(pl.opts("i1", copyHandler),
		processor.WithIdleSessionTimeout(50*time.Millisecond), processor.WithMaxBuffered(2000, 4000))...)
	var peak int
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				peak = max(peak, runtime.NumGoroutine()-base)
			}
		}
	}()
	rep := pl.waitDone(t, 120*time.Second)
	close(stop)
	<-sampled
	require.Zero(t, rep.Lost, rep.String())
	require.Eventually(t, func() bool { return r.p.Stats().ActiveSessions == 0 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, r.stop(t))
	t.Logf("peak extra goroutines %d for %d sessions", peak, n)
	require.Less(t, peak, 20_000, "goroutines must follow active sessions, not all sessions seen")
	rep = pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
}

// TestRestartSkipsExactlyFinished: a crash while one record is unfinished
// and many above it are finished; the replacement skips exactly the
// finished ones (from the commit metadata) and redoes only the rest.
func TestRestartSkipsExactlyFinished(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 1, 1000, 100)
		pl.produce(t, 0, pl.inputs)
		block := make(chan struct{})
		defer close(block)
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if p, _ := verify.Decode(r.Value); p.ID == 10 {
				select {
				case <-block:
				case <-ctx.Done():
				}
				return context.Canceled
			}
			return copyHandler(ctx, r, out)
		}
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", h), processor.WithKgoOpts(cut.Opt()))...)
		// Every record finishes but ID 10 and the rest of its session,
		// which waits behind it; wait until they are committed.
		perSession := pl.inputs / pl.sessions
		pl.waitOutputs(t, pl.inputs-perSession, 30*time.Second)
		cut.Cut()

		b := start(t, pl.opts("i1", copyHandler)...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		_ = a.stop(t)
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		st := b.p.Stats()
		require.Equal(t, int64(perSession), st.Outputs, "only the unfinished session is redone")
		// Above the commit point (ID 10) every record is finished but the
		// 9 later ones of ID 10's session.
		require.Equal(t, int64(pl.inputs-11-(perSession-1)), st.SkippedDone, "every finished record above the commit point is skipped")
	})
}
