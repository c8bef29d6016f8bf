package durations

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecorder: the count, total and max of recorded durations are exact,
// the median and p99 to 2 significant figures and never above the max.
func TestRecorder(t *testing.T) {
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
		{name: "nothing recorded"},
		{"one", []time.Duration{ms(18)}, ms(18), ms(18), ms(18)},
		// Its microseconds are its bucket's upper end: truncated to them, the
		// median fell below the max (issue 31).
		{"one, not a whole microsecond", []time.Duration{20479561}, 20479561, 20479561, 20479561},
		{"eleven, unsorted", []time.Duration{ms(20), ms(10), ms(15), ms(11), ms(19), ms(12), ms(18), ms(13), ms(17), ms(14), ms(16)}, ms(15), ms(20), ms(20)},
		{"1 to 100 ms", oneToHundred, ms(50), ms(99), ms(100)},
		{"a slow one moves the mean, not the median", append(slices.Repeat([]time.Duration{ms(10)}, 99), 10*time.Second), ms(10), ms(10), 10 * time.Second},
		{"under a microsecond", []time.Duration{500 * time.Nanosecond}, 500 * time.Nanosecond, 500 * time.Nanosecond, 500 * time.Nanosecond},
		{"past the histogram's range: the max is exact", []time.Duration{20 * time.Minute}, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Recorder
			for _, d := range tc.in {
				r.Record(d)
			}
			s := r.Summary()
			p50, p99, longest := s.P50, s.P99, s.Max
			require.Equal(t, tc.longest, longest, "the max is exact")
			require.Equal(t, int64(len(tc.in)), s.Count)
			require.Equal(t, int64(len(tc.in)), r.Count())
			var total time.Duration
			for _, d := range tc.in {
				total += d
			}
			require.Equal(t, total, s.Total, "the total is exact")
			if tc.longest == 0 {
				require.Zero(t, s)
				return
			}
			require.InEpsilon(t, float64(tc.p50), float64(p50), 0.01, "median %v", p50)
			require.InEpsilon(t, float64(tc.p99), float64(p99), 0.01, "p99 %v", p99)
			require.LessOrEqual(t, p50, p99)
			if len(tc.in) == 1 && tc.longest <= highest {
				require.Equal(t, longest, p50, "one duration in range is its own median")
			}
			require.LessOrEqual(t, p99, longest)
		})
	}
}

// TestRecorderConcurrent: Summary may be called while durations are
// recorded (run with -race), and sees a consistent summary.
func TestRecorderConcurrent(t *testing.T) {
	var r Recorder
	require.Zero(t, r.Summary())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r.Record(time.Duration(1+(i+w)%50) * time.Millisecond)
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				s := r.Summary()
				assert.LessOrEqual(t, s.P50, s.P99)
				assert.LessOrEqual(t, s.P99, s.Max)
				assert.LessOrEqual(t, s.Max, s.Total)
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
	s := r.Summary()
	require.Equal(t, int64(2000), s.Count)
	require.Equal(t, 50*time.Millisecond, s.Max)
	require.InEpsilon(t, float64(25*time.Millisecond), float64(s.P50), 0.1)
}
