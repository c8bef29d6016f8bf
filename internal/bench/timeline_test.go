package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTimelineRates: buckets are merged down to the asked points, and
// the last point's rate runs to the last input, not its bucket's end.
func TestTimelineRates(t *testing.T) {
	var tl timeline
	for i := range 1000 {
		tl.add(time.Duration(i) * time.Millisecond) // 1,000 records/s for 1s
	}
	require.Len(t, tl.counts, 10)
	starts, rates := tl.rates(100)
	require.Len(t, starts, 10)
	require.InDelta(t, 0.3, starts[3], 1e-9)
	for _, r := range rates[:9] {
		require.InDelta(t, 1000, r, 1e-6)
	}
	require.InDelta(t, 100/0.099, rates[9], 1e-6, "the last bucket ends at 999ms")

	starts, rates = tl.rates(3) // 4 buckets a point
	require.Equal(t, []float64{0, 0.4, 0.8}, starts)
	require.InDelta(t, 1000, rates[0], 1e-6)
	require.InDelta(t, 200/0.199, rates[2], 1e-6)

	var empty timeline
	starts, _ = empty.rates(10)
	require.Empty(t, starts)
	empty.add(-time.Second) // before the start: the first bucket
	require.Equal(t, []int64{1}, empty.counts)
}
