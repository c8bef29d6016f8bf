package processor

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommitTimesConcurrentStats: Stats may be called while commits are
// recorded (run with -race), and sees consistent quantiles.
func TestCommitTimesConcurrentStats(t *testing.T) {
	p, err := New(WithBrokers("x"), WithGroup("g"), WithInstanceID("i"), WithInputTopics("in"), WithOutputTopic("out"), WithHandler(copyToOutput))
	require.NoError(t, err)
	require.Zero(t, p.Stats().CommitTimeMedian)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				p.stats.commitTimes.Record(time.Duration(1+(i+w)%50) * time.Millisecond)
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				s := p.Stats()
				assert.LessOrEqual(t, s.CommitTimeMedian, s.CommitTimeP99)
				assert.LessOrEqual(t, s.CommitTimeP99, s.CommitTimeMax)
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	s := p.Stats()
	require.Equal(t, 50*time.Millisecond, s.CommitTimeMax)
	require.InEpsilon(t, float64(25*time.Millisecond), float64(s.CommitTimeMedian), 0.1)
}

// TestLoopCommitTimes: a committed transaction's round trip (its end held
// 20ms here) reaches Stats' quantiles beside CommitTime; an aborted one
// does not.
func TestLoopCommitTimes(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	h.intake(records(0, 10, 2)...)
	h.settle(h.idle)
	h.commitWhile(func() {})
	s := h.p.Stats()
	require.Equal(t, int64(1), s.Commits)
	require.GreaterOrEqual(t, s.CommitTimeMedian, 20*time.Millisecond)
	require.Equal(t, s.CommitTime, s.CommitTimeMax, "one commit: its round trip is the total")
	require.Equal(t, s.CommitTimeMax, s.CommitTimeMedian)

	h.intake(records(10, 20, 2)...)
	h.settle(h.idle)
	h.c.abortNext = true
	h.commit()
	require.Equal(t, 1, h.c.aborts)
	after := h.p.Stats()
	require.Equal(t, s.Commits, after.Commits)
	require.Equal(t, s.CommitTimeMax, after.CommitTimeMax, "an aborted transaction is not a commit round trip")
}
