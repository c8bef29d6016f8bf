package processor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCommitSchedule(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		endAt     time.Duration // a commit ends at this time...
		saturated bool          // ...after a transaction that waited for room
		wantFloor time.Duration // the floor after it
	}
	for name, tc := range map[string]struct {
		minFloor, interval time.Duration
		steps              []step
	}{
		"light load stays at the minimum": {1 * ms, 100 * ms, []step{{10 * ms, false, 1 * ms}, {20 * ms, false, 1 * ms}}},
		"heavy load commits on the interval at once": {1 * ms, 100 * ms, []step{
			{10 * ms, true, 100 * ms}, {120 * ms, true, 100 * ms}}},
		"load ending halves back": {1 * ms, 100 * ms, []step{
			{10 * ms, true, 100 * ms}, {120 * ms, false, 50 * ms}, {180 * ms, false, 25 * ms}, {210 * ms, false, 12500 * time.Microsecond},
			{230 * ms, false, 6250 * time.Microsecond}, {240 * ms, false, 3125 * time.Microsecond}, {250 * ms, false, 1562500 * time.Nanosecond},
			{260 * ms, false, 1 * ms}, {270 * ms, false, 1 * ms}}},
		"minimum equal to the interval is a fixed interval": {100 * ms, 100 * ms, []step{{10 * ms, false, 100 * ms}, {20 * ms, true, 100 * ms}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCommitSchedule(tc.minFloor, tc.interval, t0)
			for _, s := range tc.steps {
				c.ended(at(s.endAt), s.saturated)
				require.Equal(t, s.wantFloor, c.floor)
				// Finished work commits at the floor, nothing else at the interval.
				require.False(t, c.due(at(s.endAt+s.wantFloor-1), true))
				require.True(t, c.due(at(s.endAt+s.wantFloor), true))
				require.False(t, c.due(at(s.endAt+tc.interval-1), false))
				require.True(t, c.due(at(s.endAt+tc.interval), false))
			}
		})
	}
}
