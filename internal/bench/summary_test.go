package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/processor"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"repeated", []float64{2, 2, 9}, 2},
		{"an outlier does not move it", []float64{100, 101, 99, 1e9, 0}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			require.InDelta(t, tc.want, median(tc.in), 1e-9)
			require.Equal(t, in, tc.in, "the input is left as it was")
		})
	}
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		modes []Mode
		order processor.Ordering
		count int
		want  []Mode
	}{
		{"once", []Mode{ModeGTS, ModeSession}, processor.OrderBySession, 1, []Mode{ModeGTS, ModeSession}},
		{"interleaved", []Mode{ModeGTS, ModeSession}, processor.OrderBySession, 2, []Mode{ModeGTS, ModeSession, ModeGTS, ModeSession}},
		{"listed twice and counted", []Mode{ModeSession, ModeSession + ObserveSuffix, ModeSession}, processor.OrderBySession, 2,
			[]Mode{ModeSession, ModeSession + ObserveSuffix, ModeSession, ModeSession, ModeSession + ObserveSuffix, ModeSession}},
		{"resolved", []Mode{ModeOnceflow + GuardSuffix}, processor.Unordered, 2, []Mode{ModeUnordered + GuardSuffix, ModeUnordered + GuardSuffix}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, schedule(Config{Modes: tc.modes, Order: tc.order, Count: tc.count}))
		})
	}
}

func TestSummarize(t *testing.T) {
	// A run's window is 1000 inputs over its throughput (none when it
	// measured nothing), its median latency a tenth of its throughput.
	run := func(scenario string, m Mode, thr float64, verdict string, eos bool) Result {
		r := Result{Scenario: scenario, Mode: m, Throughput: thr, LatencyP50: thr / 10, Verdict: verdict, ExactlyOnce: eos}
		if thr > 0 {
			r.Seconds = 1000 / thr
		}
		return r
	}
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		in   []Result
		want []Summary
	}{
		{name: "nothing ran", in: nil, want: nil},
		{
			name: "interleaved runs, ratios of medians",
			in: []Result{
				run("d", ModeALO, 1000, VerdictALO, false), run("d", ModeGTS, 100, VerdictPass, true), run("d", ModeSession, 300, VerdictPass, true),
				run("d", ModeALO, 800, VerdictALO, true), run("d", ModeGTS, 400, VerdictPass, true), run("d", ModeSession, 50, VerdictPass, true),
				run("d", ModeALO, 900, VerdictALO, true), run("d", ModeGTS, 200, VerdictPass, true), run("d", ModeSession, 400, VerdictPass, true),
			},
			want: []Summary{
				{Scenario: "d", Mode: ModeALO, Runs: 3, ThroughputMedian: 900, ThroughputMin: 800, ThroughputMax: 1000,
					RatioToGTS: f(4.5), RatioToALO: f(1), ExactlyOnceRuns: 2, Verdict: VerdictALO, SecondsMedian: 1000.0 / 900, LatencyP50Median: 90},
				{Scenario: "d", Mode: ModeGTS, Runs: 3, ThroughputMedian: 200, ThroughputMin: 100, ThroughputMax: 400,
					RatioToGTS: f(1), RatioToALO: f(200.0 / 900), ExactlyOnce: true, ExactlyOnceRuns: 3, Verdict: VerdictPass, SecondsMedian: 5, LatencyP50Median: 20},
				{Scenario: "d", Mode: ModeSession, Runs: 3, ThroughputMedian: 300, ThroughputMin: 50, ThroughputMax: 400,
					RatioToGTS: f(1.5), RatioToALO: f(300.0 / 900), ExactlyOnce: true, ExactlyOnceRuns: 3, Verdict: VerdictPass, SecondsMedian: 1000.0 / 300, LatencyP50Median: 30},
			},
		},
		{
			name: "one failed run fails the mode",
			in:   []Result{run("d", ModeSession, 100, VerdictPass, true), run("d", ModeSession, 0, VerdictFail, false), run("d", ModeSession, 300, VerdictPass, true)},
			want: []Summary{{Scenario: "d", Mode: ModeSession, Runs: 3, ThroughputMedian: 100, ThroughputMin: 0, ThroughputMax: 300,
				ExactlyOnceRuns: 2, Verdict: VerdictFail, SecondsMedian: 1000.0 / 300, LatencyP50Median: 10}},
		},
		{
			name: "a twin against the plain mode's median; even counts",
			in: []Result{
				run("d", ModeSession, 100, VerdictPass, true), run("d", ModeSession+ObserveSuffix, 90, VerdictPass, true),
				run("d", ModeSession, 80, VerdictPass, true), run("d", ModeSession+ObserveSuffix, 60, VerdictPass, true),
			},
			want: []Summary{
				{Scenario: "d", Mode: ModeSession, Runs: 2, ThroughputMedian: 90, ThroughputMin: 80, ThroughputMax: 100,
					ExactlyOnce: true, ExactlyOnceRuns: 2, Verdict: VerdictPass, SecondsMedian: (10 + 12.5) / 2, LatencyP50Median: 9},
				{Scenario: "d", Mode: ModeSession + ObserveSuffix, Runs: 2, ThroughputMedian: 75, ThroughputMin: 60, ThroughputMax: 90,
					RatioToUnobserved: f(75.0 / 90), ExactlyOnce: true, ExactlyOnceRuns: 2, Verdict: VerdictPass, SecondsMedian: (1000.0/90 + 1000.0/60) / 2, LatencyP50Median: 7.5},
			},
		},
		{
			name: "phases apart: a baseline counts in its own phase only",
			in:   []Result{run("a", ModeGTS, 100, VerdictPass, true), run("a", ModeSession, 200, VerdictPass, true), run("b", ModeSession, 50, VerdictPass, true)},
			want: []Summary{
				{Scenario: "a", Mode: ModeGTS, Runs: 1, ThroughputMedian: 100, ThroughputMin: 100, ThroughputMax: 100,
					RatioToGTS: f(1), ExactlyOnce: true, ExactlyOnceRuns: 1, Verdict: VerdictPass, SecondsMedian: 10, LatencyP50Median: 10},
				{Scenario: "a", Mode: ModeSession, Runs: 1, ThroughputMedian: 200, ThroughputMin: 200, ThroughputMax: 200,
					RatioToGTS: f(2), ExactlyOnce: true, ExactlyOnceRuns: 1, Verdict: VerdictPass, SecondsMedian: 5, LatencyP50Median: 20},
				{Scenario: "b", Mode: ModeSession, Runs: 1, ThroughputMedian: 50, ThroughputMin: 50, ThroughputMax: 50,
					ExactlyOnce: true, ExactlyOnceRuns: 1, Verdict: VerdictPass, SecondsMedian: 20, LatencyP50Median: 5},
			},
		},
		{
			name: "a baseline that measured nothing gives no ratio",
			in:   []Result{run("d", ModeGTS, 0, VerdictFail, false), run("d", ModeSession, 200, VerdictPass, true)},
			want: []Summary{
				{Scenario: "d", Mode: ModeGTS, Runs: 1, Verdict: VerdictFail},
				{Scenario: "d", Mode: ModeSession, Runs: 1, ThroughputMedian: 200, ThroughputMin: 200, ThroughputMax: 200,
					ExactlyOnce: true, ExactlyOnceRuns: 1, Verdict: VerdictPass, SecondsMedian: 5, LatencyP50Median: 20},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.in)
			require.Len(t, got, len(tc.want))
			for i, w := range tc.want {
				g := got[i]
				requireRatio(t, w.RatioToGTS, g.RatioToGTS, "%s ratio to franz-gts", w.Mode)
				requireRatio(t, w.RatioToALO, g.RatioToALO, "%s ratio to alo-raw", w.Mode)
				requireRatio(t, w.RatioToUnobserved, g.RatioToUnobserved, "%s ratio to unobserved", w.Mode)
				require.InDelta(t, w.SecondsMedian, g.SecondsMedian, 1e-9, w.Mode)
				require.InDelta(t, w.LatencyP50Median, g.LatencyP50Median, 1e-9, w.Mode)
				g.RatioToGTS, g.RatioToALO, g.RatioToUnobserved, w.RatioToGTS, w.RatioToALO, w.RatioToUnobserved = nil, nil, nil, nil, nil, nil
				g.SecondsMedian, g.LatencyP50Median, w.SecondsMedian, w.LatencyP50Median = 0, 0, 0, 0
				require.Equal(t, w, g)
			}
		})
	}
}

// TestRunRatiosFromMedians: each run's ratios are to the baselines'
// medians, so that a run's row and its mode's summary agree.
func TestRunRatiosFromMedians(t *testing.T) {
	rs := []Result{
		{Mode: ModeGTS, Throughput: 100}, {Mode: ModeSession, Throughput: 150},
		{Mode: ModeGTS, Throughput: 300}, {Mode: ModeSession, Throughput: 600},
		{Mode: ModeGTS, Throughput: 200}, {Mode: ModeSession, Throughput: 400},
	}
	setRatios(rs)
	for _, r := range rs {
		require.InDelta(t, r.Throughput/200, *r.RatioToGTS, 1e-9, "%s %v", r.Mode, r.Throughput)
		require.Nil(t, r.RatioToALO)
	}
	ss := Summarize(rs)
	require.InDelta(t, 2.0, *ss[1].RatioToGTS, 1e-9, "400 / 200")
}

func requireRatio(t *testing.T, want, got *float64, msg string, args ...any) {
	t.Helper()
	if want == nil {
		require.Nil(t, got, append([]any{msg}, args...)...)
		return
	}
	require.NotNil(t, got, append([]any{msg}, args...)...)
	require.InDelta(t, *want, *got, 1e-9, append([]any{msg}, args...)...)
}
