package durations

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histogram keeps durations of 1µs to 10 minutes (shorter or longer
// ones count as the bound) to 2 significant figures, in a few KiB.
const (
	lowest  = time.Microsecond
	highest = 10 * time.Minute
)

// Recorder is safe for concurrent use; its zero value is ready. It is meant
// for events that come at most a few hundred times a second (commits), so a
// mutex costs nothing.
type Recorder struct {
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram // microseconds; built at the first Record
	count   int64
	total   time.Duration
	longest time.Duration
}

// Summary is what a Recorder has seen: the count and total are exact, so
// is the longest; the median and p99 are to 2 significant figures and
// never above the longest. All 0 before the first Record.
type Summary struct {
	Count                int64
	Total, P50, P99, Max time.Duration
}

// Record adds one duration.
func (r *Recorder) Record(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hist == nil {
		r.hist = hdrhistogram.New(lowest.Microseconds(), highest.Microseconds(), 2)
	}
	_ = r.hist.RecordValue(ceilMicros(min(max(d, lowest), highest))) // in range: cannot fail
	r.count++
	r.total += d
	r.longest = max(r.longest, d)
}

// ceilMicros is d in whole microseconds, rounded up: a quantile is its
// bucket's upper end, which is then at least every duration in the bucket.
// Truncated, a single 20.479561ms came back as a median of 20.479ms, below
// the exact max it was recorded as.
func ceilMicros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// Count returns how many durations were recorded.
func (r *Recorder) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Summary returns the count, total, median, p99 and longest duration.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hist == nil {
		return Summary{}
	}
	// A quantile is its bucket's upper end, which may pass the exact max.
	at := func(q float64) time.Duration {
		return min(time.Duration(r.hist.ValueAtQuantile(q))*time.Microsecond, r.longest)
	}
	return Summary{Count: r.count, Total: r.total, P50: at(50), P99: at(99), Max: r.longest}
}
