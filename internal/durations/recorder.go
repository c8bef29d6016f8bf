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
	longest time.Duration
}

// Record adds one duration.
func (r *Recorder) Record(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hist == nil {
		r.hist = hdrhistogram.New(lowest.Microseconds(), highest.Microseconds(), 2)
	}
	_ = r.hist.RecordValue(min(max(d, lowest), highest).Microseconds()) // in range: cannot fail
	r.longest = max(r.longest, d)
}

// Quantiles returns the median, the 99th percentile (both to 2 significant
// figures) and the exact longest duration; all 0 before the first Record.
func (r *Recorder) Quantiles() (p50, p99, longest time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hist == nil {
		return 0, 0, 0
	}
	// A quantile is its bucket's upper end, which may pass the exact max.
	at := func(q float64) time.Duration {
		return min(time.Duration(r.hist.ValueAtQuantile(q))*time.Microsecond, r.longest)
	}
	return at(50), at(99), r.longest
}
