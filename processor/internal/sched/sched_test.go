package sched_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/processor/internal/sched"
)

// unit is a test's work unit: its session key and its place in it.
type unit struct {
	key  string
	seq  int
	sess *sched.Session[*unit]
}

func newPool(t *testing.T, attempt func(ctx context.Context, u *unit) (time.Duration, bool), after func(time.Duration) <-chan time.Time) (*sched.Pool[*unit], *atomic.Int64) {
	var active atomic.Int64
	if after == nil {
		after = time.After
	}
	p := sched.New(sched.Config[*unit]{
		Shards: 4, IdleWorker: time.Minute, After: after, Attempt: attempt,
		Bind: func(u *unit, s *sched.Session[*unit]) { u.sess = s }, Active: &active,
	})
	t.Cleanup(p.Stop)
	return p, &active
}

func key(u *unit) []byte { return []byte(u.key) }

// TestSessionOrder: a session's units run one at a time in dispatch order,
// sessions in parallel, and every session ends once its units are done.
func TestSessionOrder(t *testing.T) {
	const sessions, per = 50, 40
	var mu sync.Mutex
	seen := map[string][]int{}
	running := map[string]bool{}
	var parallel, most atomic.Int64
	var done sync.WaitGroup
	done.Add(sessions * per)
	p, active := newPool(t, func(_ context.Context, u *unit) (time.Duration, bool) {
		mu.Lock()
		assert.False(t, running[u.key], "two units of session %s at once", u.key)
		running[u.key] = true
		mu.Unlock()
		if n := parallel.Add(1); n > most.Load() {
			most.Store(n)
		}
		time.Sleep(50 * time.Microsecond)
		parallel.Add(-1)
		mu.Lock()
		running[u.key] = false
		seen[u.key] = append(seen[u.key], u.seq)
		mu.Unlock()
		done.Done()
		return 0, false
	}, nil)
	var wakes []*sched.Session[*unit]
	for seq := range per {
		var batch []*unit
		for s := range sessions {
			batch = append(batch, &unit{key: fmt.Sprint("s", s), seq: seq})
		}
		wakes = p.DispatchAll(batch, key, wakes)
	}
	done.Wait()
	for s := range sessions {
		want := make([]int, per)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, seen[fmt.Sprint("s", s)])
	}
	require.Eventually(t, func() bool { return active.Load() == 0 }, 5*time.Second, time.Millisecond, "sessions end")
	require.Greater(t, most.Load(), int64(1), "sessions ran in parallel")
}

// TestRetryHoldsNoWorker: a unit backing off keeps its session's later
// units waiting but holds no worker, so other sessions go on; Cancel cuts
// its backoff short.
func TestRetryHoldsNoWorker(t *testing.T) {
	never := make(chan time.Time)
	var order []string
	var mu sync.Mutex
	var tries atomic.Int64
	finished := make(chan string, 10)
	p, _ := newPool(t, func(_ context.Context, u *unit) (time.Duration, bool) {
		if u.key == "slow" && u.seq == 0 && tries.Add(1) == 1 {
			return time.Hour, true
		}
		mu.Lock()
		order = append(order, fmt.Sprint(u.key, u.seq))
		mu.Unlock()
		finished <- u.key
		return 0, false
	}, func(time.Duration) <-chan time.Time { return never })
	first := &unit{key: "slow", seq: 0}
	p.DispatchAll([]*unit{first, {key: "slow", seq: 1}}, key, nil)
	require.Eventually(t, func() bool { return tries.Load() == 1 }, 5*time.Second, time.Millisecond)
	p.DispatchAll([]*unit{{key: "fast", seq: 0}, {key: "fast", seq: 1}}, key, nil)
	require.Equal(t, "fast", <-finished)
	require.Equal(t, "fast", <-finished)
	first.sess.Cancel(first) // cuts the hour short
	require.Equal(t, "slow", <-finished)
	require.Equal(t, "slow", <-finished)
	require.Equal(t, []string{"fast0", "fast1", "slow0", "slow1"}, order)
}

// TestCancelAndStop: Cancel cancels the context of a unit's running
// attempt; Stop cancels every running attempt's and waits for it.
func TestCancelAndStop(t *testing.T) {
	started := make(chan *unit, 2)
	ended := make(chan error, 2)
	p, _ := newPool(t, func(ctx context.Context, u *unit) (time.Duration, bool) {
		started <- u
		<-ctx.Done()
		ended <- ctx.Err()
		return 0, false
	}, nil)
	p.DispatchAll([]*unit{{key: "a"}, {key: "b"}}, key, nil)
	u := <-started
	u.sess.Cancel(u)
	require.ErrorIs(t, <-ended, context.Canceled)
	<-started
	require.False(t, p.Stopped())
	p.Stop()
	require.True(t, p.Stopped())
	require.ErrorIs(t, <-ended, context.Canceled)
}
