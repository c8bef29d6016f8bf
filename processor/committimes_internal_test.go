package processor

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommitTimes: the median, p99 and max of recorded commit round trips,
// the percentiles to 2 significant figures and never above the max.
func TestCommitTimes(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var oneToHundred []time.Duration
	for i := 100; i >= 1; i-- {
		oneToHundred = append(oneToHundred, ms(i))
	}
	for _, tc := range []struct {
		name              string
		in                []time.Duration
		p50, p99, longest time.Duration
	}{
		{name: "no commit yet"},
		{"one", []time.Duration{ms(18)}, ms(18), ms(18), ms(18)},
		{"eleven, unsorted", []time.Duration{ms(20), ms(10), ms(15), ms(11), ms(19), ms(12), ms(18), ms(13), ms(17), ms(14), ms(16)}, ms(15), ms(20), ms(20)},
		{"1 to 100 ms", oneToHundred, ms(50), ms(99), ms(100)},
		{"a slow commit moves the mean, not the median", append(slices.Repeat([]time.Duration{ms(10)}, 99), 10*time.Second), ms(10), ms(10), 10 * time.Second},
		{"under a microsecond", []time.Duration{500 * time.Nanosecond}, 500 * time.Nanosecond, 500 * time.Nanosecond, 500 * time.Nanosecond},
		{"past the histogram's range: the max is exact", []time.Duration{20 * time.Minute}, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c commitTimes
			for _, d := range tc.in {
				c.record(d)
			}
			p50, p99, longest := c.quantiles()
			require.Equal(t, tc.longest, longest, "the max is exact")
			if tc.longest == 0 {
				require.Zero(t, p50)
				require.Zero(t, p99)
				return
			}
			require.InEpsilon(t, float64(tc.p50), float64(p50), 0.01, "median %v", p50)
			require.InEpsilon(t, float64(tc.p99), float64(p99), 0.01, "p99 %v", p99)
			require.LessOrEqual(t, p50, p99)
			require.LessOrEqual(t, p99, longest)
		})
	}
}

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
				p.stats.commitTimes.record(time.Duration(1+(i+w)%50) * time.Millisecond)
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
