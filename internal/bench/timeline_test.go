package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTimelineRates: buckets are merged k to a point, and the last
// point's rate runs to the last input, not its bucket's end, folded into
// the point before when under half a point.
func TestTimelineRates(t *testing.T) {
	var tl timeline
	for i := range 1000 {
		tl.add(time.Duration(i)*time.Millisecond, time.Duration(i%10)*time.Millisecond) // 1,000 records/s for 1s
	}
	require.Len(t, tl.counts, 10)
	starts, rates := tl.rates(1)
	require.Len(t, starts, 10)
	require.InDelta(t, 0.3, starts[3], 1e-9)
	for _, r := range rates[:9] {
		require.InDelta(t, 1000, r, 1e-6)
	}
	require.InDelta(t, 100/0.099, rates[9], 1e-6, "the last bucket ends at 999ms")

	starts, rates = tl.rates(5) // 0-500, 500-999ms
	require.Equal(t, []float64{0, 0.5}, starts)
	require.InDelta(t, 1000, rates[0], 1e-6)
	require.InDelta(t, 500/0.499, rates[1], 1e-6)
	starts, rates = tl.rates(4) // 0-400, then 400-999ms: 800-999 is under half a point
	require.Equal(t, []float64{0, 0.4}, starts)
	require.InDelta(t, 600/0.599, rates[1], 1e-6)

	// A commit's 300 inputs showing 1ms past the edge of the last point:
	// counted in the point before, which then runs to the end.
	for range 300 {
		tl.add(1201*time.Millisecond, -1)
	}
	starts, rates = tl.rates(4)
	require.Equal(t, []float64{0, 0.4, 0.8}, starts)
	require.InDelta(t, 500/0.401, rates[2], 1e-6)
	starts, rates = tl.rates(20)
	require.Equal(t, []float64{0}, starts)
	require.InDelta(t, 1300/1.201, rates[0], 1e-6, "one point: the run's mean")

	var empty timeline
	starts, _ = empty.rates(3)
	require.Empty(t, starts)
	empty.add(-time.Second, -1) // before the start: the first bucket
	require.Equal(t, []int64{1}, empty.counts)
}

// TestTimelineMedians: the median latency of the outputs that became
// visible in each point, points without outputs left out.
func TestTimelineMedians(t *testing.T) {
	var tl timeline
	for i := range 300 { // 0-299ms: latencies 1..3ms, then 10..30ms
		lat := time.Duration(1+i%3) * time.Millisecond
		if i >= 100 {
			lat *= 10
		}
		tl.add(time.Duration(i)*time.Millisecond, lat)
	}
	tl.add(650*time.Millisecond, -1) // a dead letter only
	starts, p50 := tl.medians(1)
	require.Equal(t, []float64{0, 0.1, 0.2}, starts)
	require.Equal(t, []float64{2, 20, 20}, p50)
	starts, p50 = tl.medians(2)
	require.Equal(t, []float64{0, 0.2}, starts)
	require.Equal(t, []float64{10, 20}, p50, "0-200ms: the upper middle of 1-3ms and 10-30ms, 100 each")
}
