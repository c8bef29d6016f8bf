package processor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/txncore"
)

// TestLostYieldEndsWithLifetime: a process woke from a pause after the
// group had expelled its member, and nobody had replaced it. Its heartbeat
// found the member gone, so franz-go's OnPartitionsLost waited a grace for
// a newer process (Instance.YieldOnLost), while its commit failed and the lifetime
// ended; the client's Close waited for that callback, and the rebuild then
// gave a second whole grace (a KIP-848 cluster soak, w177#340 in
// docs/reliability.md: 12.9 s out of the group after waking). The
// lifetime's end must cut the first grace short, and the rebuild give only
// the rest of it. A yield that ran its course leaves a later rebuild its
// whole grace: franz-go rejoined after it, so the ID was held since.
func TestLostYieldEndsWithLifetime(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "app")
	cl := c.Client(t)
	// ConsumerGroupDescribe answers only for a group that exists.
	kafkatest.Join848(t, cl, group, "other", topic)

	clock := &yieldClock{now: time.Unix(1_000_000, 0)}
	p, err := New(WithBrokers(c.Brokers...), WithGroup(group), WithInstanceID("i1"), WithInputTopics(topic),
		WithOutputTopic("out"), WithHandler(copyToOutput), WithGroupProtocol(GroupProtocolConsumer), WithClock(clock))
	require.NoError(t, err)
	r := newRun(p)
	t.Cleanup(r.pool.Stop)
	r.inst.Held("an-expired-member") // i1 is free: nobody replaced it
	// rebuildWaits is how long, by the clock, the yield before a rebuild
	// waits for a newer process.
	rebuildWaits := func(t *testing.T) time.Duration {
		from := clock.Now()
		require.Nil(t, r.inst.YieldToSuccessor(context.Background()))
		return clock.Now().Sub(from)
	}

	t.Run("the lifetime ends during the grace", func(t *testing.T) {
		clock.hold(true) // the grace would never end by itself
		l := r.newLifetime(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.group.yield(context.Background(), cl) }()
		require.Eventually(t, clock.waiting, 30*time.Second, 10*time.Millisecond,
			"the yield never waited for a newer process")
		select {
		case err := <-done:
			t.Fatalf("the yield ended (%v) with the ID free and its grace held", err)
		default:
		}
		clock.advance(2 * time.Second)
		l.endYield()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the lost member's yield outlived its lifetime")
		}
		clock.hold(false)
		require.Equal(t, txncore.SuccessorGrace-2*time.Second, rebuildWaits(t), "the rebuild gives the rest of the grace")
		require.Equal(t, txncore.SuccessorGrace, rebuildWaits(t), "a second rebuild owes a whole grace")
	})
	t.Run("the grace runs its course", func(t *testing.T) {
		clock.hold(false)
		l := r.newLifetime(context.Background())
		from := clock.Now()
		require.NoError(t, l.group.yield(context.Background(), cl))
		require.GreaterOrEqual(t, clock.Now().Sub(from), txncore.SuccessorGrace, "the yield did not wait its grace")
		l.endYield()
		require.Equal(t, txncore.SuccessorGrace, rebuildWaits(t))
	})
}

// yieldClock is a Clock whose After fires at once, its time advanced by
// the wait, or, held, never.
type yieldClock struct {
	mu    sync.Mutex
	now   time.Time
	held  bool
	waits int // Afters held
}

func (c *yieldClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *yieldClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if c.held {
		c.waits++
		return ch
	}
	c.now = c.now.Add(d)
	ch <- c.now
	return ch
}

func (c *yieldClock) waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits > 0
}

func (c *yieldClock) hold(h bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = h
}

func (c *yieldClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
