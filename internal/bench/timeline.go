package bench

import "time"

// timelineStep is the width of a timeline bucket. Outputs become visible
// only at commits (every 100ms by default), so finer buckets would show
// the commit interval rather than the pipeline's pace.
const timelineStep = 100 * time.Millisecond

// timeline counts the inputs accounted for in each timelineStep of a
// run, from its start: throughput over the run, for -plot. It belongs to
// the observer's poll goroutine until the observer stops.
type timeline struct {
	counts []int64
	end    time.Duration // when the last awaited input became visible
}

// add counts one input accounted for at offset at from the run's start.
func (tl *timeline) add(at time.Duration) {
	at = max(at, 0)
	i := int(at / timelineStep)
	for len(tl.counts) <= i {
		tl.counts = append(tl.counts, 0)
	}
	tl.counts[i]++
	tl.end = max(tl.end, at)
}

// rates merges buckets so that there are at most maxPoints, and returns
// each merged bucket's start (seconds from the run's start) and its
// throughput (records/s). The last one ends at the last input accounted
// for, not at its bucket's end, so that a run's final partial bucket does
// not read as a slowdown.
func (tl *timeline) rates(maxPoints int) (starts, perSec []float64) {
	n := len(tl.counts)
	if n == 0 || maxPoints <= 0 {
		return nil, nil
	}
	k := (n + maxPoints - 1) / maxPoints // buckets per point
	width := time.Duration(k) * timelineStep
	for i := 0; i < n; i += k {
		var sum int64
		for _, c := range tl.counts[i:min(i+k, n)] {
			sum += c
		}
		from := time.Duration(i) * timelineStep
		w := width
		if i+k >= n {
			// The last point: up to the last input, at least a
			// millisecond (a run whose inputs all showed at once).
			w = max(tl.end-from, time.Millisecond)
		}
		starts = append(starts, from.Seconds())
		perSec = append(perSec, float64(sum)/w.Seconds())
	}
	return starts, perSec
}
