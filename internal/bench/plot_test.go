package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/svgtest"
)

// TestPercentileCurve: from the minimum at 0% up to 1/(1-p) = the count.
func TestPercentileCurve(t *testing.T) {
	h := newHistogram()
	for v := int64(1); v <= 10_000; v++ {
		require.NoError(t, h.RecordValue(v*1000)) // 1ms..10s
	}
	pts := percentileCurve(h)
	require.Equal(t, 1.0, pts[0].X)
	require.InDelta(t, 1, pts[0].Y, 0.01, "0%: the minimum, 1ms")
	require.InDelta(t, 10_000, pts[len(pts)-1].X, 1e-6)
	require.Len(t, pts, 4*percentileSteps+1)
	for i := 1; i < len(pts); i++ {
		require.GreaterOrEqual(t, pts[i].Y, pts[i-1].Y)
	}
	require.InDelta(t, 2, pts[6].X, 0.01, "10^(6/20)")
	require.InDelta(t, 5000, pts[6].Y, 300, "about the median at x=2")
}

// TestWritePlotSynthetic: without a broker, results of two modes (one
// run twice) give an SVG document with one legend entry per mode in each
// panel; a mode with no latencies still has its throughput curve.
func TestWritePlotSynthetic(t *testing.T) {
	res := func(mode Mode, thr float64, ms ...int64) Result {
		r := Result{Scenario: "default", Mode: mode, Throughput: thr, hist: newHistogram(), timeline: &timeline{}}
		for i, v := range ms {
			require.NoError(t, r.hist.RecordValue(v*1000))
			r.timeline.add(time.Duration(i)*30*time.Millisecond, time.Duration(v)*time.Millisecond)
		}
		return r
	}
	alo := res(ModeALO, 5)                 // e.g. every input dead-lettered
	alo.timeline.add(time.Millisecond, -1) // a dead letter
	rs := []Result{res(ModeGTS, 10, 5, 7, 9), res(ModeSession, 20, 1, 2, 3), res(ModeGTS, 12, 6, 8, 10), alo}
	ss := plotSeriesOf(rs)
	require.Len(t, ss, 3)
	require.Equal(t, int64(6), ss[0].hist.TotalCount(), "franz-gts: both runs merged")
	require.Equal(t, 10.0, ss[0].median.Throughput, "the lower middle run of an even count")

	var buf bytes.Buffer
	require.NoError(t, WritePlot(&buf, rs))
	texts := svgtest.Texts(t, &buf)
	require.Equal(t, 3, texts["franz-gts"], "legend entries in the three panels")
	require.Equal(t, 3, texts["onceflow-session"])
	require.Equal(t, 1, texts["alo-raw"], "no latencies: the throughput panel only")

	// Several phases: labels name the phase.
	rs[1].Scenario = "chat"
	buf.Reset()
	require.NoError(t, WritePlot(&buf, rs))
	texts = svgtest.Texts(t, &buf)
	require.Equal(t, 3, texts["chat onceflow-session"])
	require.Equal(t, 3, texts["default franz-gts"])

	buf.Reset()
	require.NoError(t, WritePlot(&buf, nil), "nothing ran: empty panels")
	svgtest.Texts(t, &buf)
}
