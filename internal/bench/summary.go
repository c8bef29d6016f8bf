package bench

import "slices"

// Summary is one mode's runs in one phase. A single run lasts a fraction
// of a second to a few seconds, and its window ends with a commit, so it is
// at the mercy of the machine and of where commit intervals fall: the
// median of several runs interleaved with the other modes' (Config.Count)
// is the figure to compare, and the ratios are of medians.
type Summary struct {
	Scenario         string  `json:"scenario"`
	Mode             Mode    `json:"mode"`
	Runs             int     `json:"runs"`
	ThroughputMedian float64 `json:"throughput_median"`
	ThroughputMin    float64 `json:"throughput_min"`
	ThroughputMax    float64 `json:"throughput_max"`
	// Ratios of this mode's median to the baseline's median in the same
	// phase; null when the baseline did not run (or measured nothing).
	RatioToGTS *float64 `json:"ratio_to_franz_gts"`
	RatioToALO *float64 `json:"ratio_to_alo_raw"`
	// RatioToKStreams is this mode's median over kafka-streams's, when it
	// ran in the phase.
	RatioToKStreams *float64 `json:"ratio_to_kafka_streams,omitempty"`
	// RatioToUnobserved, for a twin (ObserveSuffix and the like), is its
	// median over the plain mode's median.
	RatioToUnobserved *float64 `json:"ratio_to_unobserved,omitempty"`
	// ExactlyOnce holds when every run verified exactly once (for alo-raw
	// as for its runs: no duplicates, which it does not promise).
	ExactlyOnce bool `json:"exactly_once"`
	// ExactlyOnceRuns counts the runs that verified exactly once.
	ExactlyOnceRuns int `json:"exactly_once_runs"`
	// Verdict is FAIL when any run failed, else the runs' (PASS or ALO).
	Verdict string `json:"verdict"`
	// Medians of the runs' processing windows and median latencies, beside
	// which published figures (Anchor) are shown.
	SecondsMedian    float64 `json:"seconds_median"`
	LatencyP50Median float64 `json:"latency_p50_ms_median"`
	Anchor           *Anchor `json:"anchor,omitempty"`
}

// phaseMode identifies a summary: runs are grouped by phase and by mode
// name, whether the mode was repeated by Config.Count or listed again in
// Config.Modes.
type phaseMode struct {
	scenario string
	mode     Mode
}

// Summarize groups results by phase and mode, in order of first run, and
// computes each group's median, min and max throughput over all its runs
// and the ratios of medians.
func Summarize(rs []Result) []Summary {
	index := map[phaseMode]int{}
	var out []Summary
	var thr, secs, p50 [][]float64
	for _, r := range rs {
		k := phaseMode{r.Scenario, r.Mode}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Summary{Scenario: r.Scenario, Mode: r.Mode, ExactlyOnce: true, Anchor: r.Anchor})
			thr, secs, p50 = append(thr, nil), append(secs, nil), append(p50, nil)
		}
		s := &out[i]
		s.Runs++
		thr[i] = append(thr[i], r.Throughput)
		secs[i] = append(secs[i], r.Seconds)
		p50[i] = append(p50[i], r.LatencyP50)
		if r.ExactlyOnce {
			s.ExactlyOnceRuns++
		} else {
			s.ExactlyOnce = false
		}
		if s.Verdict != VerdictFail {
			s.Verdict = r.Verdict
		}
	}
	for i := range out {
		s := &out[i]
		s.ThroughputMedian = median(thr[i])
		s.ThroughputMin, s.ThroughputMax = slices.Min(thr[i]), slices.Max(thr[i])
		s.SecondsMedian, s.LatencyP50Median = median(secs[i]), median(p50[i])
	}
	med := medians(out)
	for i := range out {
		s := &out[i]
		s.RatioToGTS = ratioTo(s.ThroughputMedian, med, phaseMode{s.Scenario, ModeGTS})
		s.RatioToALO = ratioTo(s.ThroughputMedian, med, phaseMode{s.Scenario, ModeALO})
		s.RatioToKStreams = ratioTo(s.ThroughputMedian, med, phaseMode{s.Scenario, ModeKafkaStreams})
		if s.Mode.observed() {
			s.RatioToUnobserved = ratioTo(s.ThroughputMedian, med, phaseMode{s.Scenario, s.Mode.base()})
		}
	}
	return out
}

// medians maps each summary to its median throughput.
func medians(ss []Summary) map[phaseMode]float64 {
	m := make(map[phaseMode]float64, len(ss))
	for _, s := range ss {
		m[phaseMode{s.Scenario, s.Mode}] = s.ThroughputMedian
	}
	return m
}

// ratioTo is v over the median of base, or nil when base did not run or
// measured nothing.
func ratioTo(v float64, med map[phaseMode]float64, base phaseMode) *float64 {
	b, ok := med[base]
	if !ok || b <= 0 {
		return nil
	}
	r := v / b
	return &r
}

// median of xs (the mean of the middle two for an even count), 0 for none.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
