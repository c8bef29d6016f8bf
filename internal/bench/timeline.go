package bench

import (
	"math"
	"slices"
	"time"
)

// timelineStep is the width of a timeline bucket. Outputs become visible
// only at commits (every 100ms by default), so finer buckets would show
// the commit interval rather than the pipeline's pace.
const timelineStep = 100 * time.Millisecond

// timeline counts the inputs accounted for in each timelineStep of a
// run, from its start, and keeps the latencies of the outputs that became
// visible in it: throughput and median latency over the run, for -plot
// (a pipeline of transactions shows as a lower, steadier median). It
// belongs to the observer's poll goroutine until the observer stops.
type timeline struct {
	counts []int64
	lat    [][]uint32    // per bucket: output latencies, microseconds
	end    time.Duration // when the last awaited input became visible
}

// add counts one input accounted for at offset at from the run's start;
// lat is its output's latency, or negative for a dead letter.
func (tl *timeline) add(at, lat time.Duration) {
	at = max(at, 0)
	i := int(at / timelineStep)
	for len(tl.counts) <= i {
		tl.counts = append(tl.counts, 0)
		tl.lat = append(tl.lat, nil)
	}
	tl.counts[i]++
	if lat >= 0 {
		tl.lat[i] = append(tl.lat[i], uint32(min(lat.Microseconds(), math.MaxUint32)))
	}
	tl.end = max(tl.end, at)
}

// medians merges every k buckets into one point, as rates does, and
// returns each point's start (seconds from the run's start) and the
// median latency (ms) of the outputs that became visible in it; points
// without outputs are left out.
func (tl *timeline) medians(k int) (starts, p50 []float64) {
	k = max(k, 1)
	for i := 0; i < len(tl.lat); i += k {
		var pts []uint32
		for _, b := range tl.lat[i:min(i+k, len(tl.lat))] {
			pts = append(pts, b...)
		}
		if len(pts) == 0 {
			continue
		}
		slices.Sort(pts)
		starts = append(starts, (time.Duration(i) * timelineStep).Seconds())
		p50 = append(p50, float64(pts[len(pts)/2])/1000)
	}
	return starts, p50
}

// rates merges every k buckets into one point and returns each point's
// start (seconds from the run's start) and its throughput (records/s).
// The last point ends at the last input accounted for, not at its
// buckets' end, so that a run's final partial point does not read as a
// slowdown; and when that leaves it under half a point, it is folded into
// the one before, or the inputs of a commit just past a point's edge,
// over a millisecond, would read as a burst of millions a second.
func (tl *timeline) rates(k int) (starts, perSec []float64) {
	n := len(tl.counts)
	if n == 0 {
		return nil, nil
	}
	k = max(k, 1)
	width := time.Duration(k) * timelineStep
	var sums []int64
	for i := 0; i < n; i += k {
		var sum int64
		for _, c := range tl.counts[i:min(i+k, n)] {
			sum += c
		}
		sums = append(sums, sum)
	}
	last := len(sums) - 1
	lastFrom := time.Duration(last) * width
	if last > 0 && tl.end-lastFrom < width/2 {
		sums[last-1] += sums[last]
		sums, last, lastFrom = sums[:last], last-1, lastFrom-width
	}
	for j, sum := range sums {
		from, w := time.Duration(j)*width, width
		if j == last {
			// At least a millisecond: a run whose inputs all showed
			// at once.
			w = max(tl.end-lastFrom, time.Millisecond)
		}
		starts = append(starts, from.Seconds())
		perSec = append(perSec, float64(sum)/w.Seconds())
	}
	return starts, perSec
}
