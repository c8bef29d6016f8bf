package processor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
	require.Equal(t, s.CommitTime, s.CommitTimeMax, "one commit: its round trip is the total (both exact)")
	// The median comes from the histogram: to about 1% (Stats' doc), and
	// never above the max.
	require.LessOrEqual(t, s.CommitTimeMedian, s.CommitTimeMax)
	require.InEpsilon(t, float64(s.CommitTimeMax), float64(s.CommitTimeMedian), 0.01)

	h.intake(records(10, 20, 2)...)
	h.settle(h.idle)
	h.c.abortNext = true
	h.commit()
	require.Equal(t, 1, h.c.aborts)
	after := h.p.Stats()
	require.Equal(t, s.Commits, after.Commits)
	require.Equal(t, s.CommitTimeMax, after.CommitTimeMax, "an aborted transaction is not a commit round trip")
}
